//! Outbound delivery: render for the platform's dialect, chunk to its limit, and hand the parts
//! to the [`Courier`](crate::gateway::delivery::courier::Courier), which queues them in the outbox under their
//! idempotency keys and delivers them through outages and restarts. A caller waits only for
//! each part's first outcome (see [`Delivery`]).

use crate::gateway::delivery::courier::Outcome;
use crate::gateway::delivery::deliverer::Deliverer;
use crate::store::NewOutboxRow;
use hermes_adapter::media::extract_media_tags;
use hermes_adapter::{Button, Capabilities, ChatTarget, OutboundFile, OutboundMessage, Usage, chunk, render};
use std::time::Duration;

pub use crate::gateway::delivery::courier::RESEND_MARK;

/// Marks the last message of a turn (usage and finish reason travel with it).
#[derive(Debug, Clone)]
pub struct Finish {
    pub usage: Usage,
    pub finish_reason: String,
}

impl Finish {
    pub fn stop() -> Self {
        Self { usage: Usage::default(), finish_reason: "stop".into() }
    }
}

/// What happened to a delivery, as far as its caller waits to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Every part is on the platform (now or in an earlier attempt).
    Delivered,
    /// Some part is not delivered yet: the platform is having trouble (or an earlier message of
    /// the chat is), and the courier keeps at it until its retry window ends.
    Queued,
    /// Some part may or may not have arrived and will not be sent again without a person.
    InDoubt,
    /// Given up: no adapter, refused for good, or nobody waiting any more.
    Failed,
}

/// How long a caller waits for a delivery's first outcome before it hears [`Delivery::Queued`]
/// (the courier keeps at it either way): long enough for a platform's usual answer, short
/// enough that a turn or a session is never held up by an outage.
const PATIENCE: Duration = Duration::from_secs(10);

/// The terms of one delivery: how long it is tried, and how long its caller waits.
#[derive(Debug, Clone, Copy)]
struct Terms {
    /// Give the parts up after this long instead of the configured window (an approval prompt
    /// is worthless once it expired).
    expiry: Option<Duration>,
    /// How long the caller waits for the first outcome.
    patience: Duration,
}

impl Terms {
    const WAIT: Terms = Terms { expiry: None, patience: PATIENCE };
    const QUEUE_ONLY: Terms = Terms { expiry: None, patience: Duration::ZERO };
}

/// Deliver `markdown` to `target`. `key_base` must be stable for the same logical message (turn id
/// plus purpose) so that a replay after a crash finds the chunks already sent.
pub async fn deliver(
    deliverer: &Deliverer,
    target: &ChatTarget,
    reply_to: Option<&str>,
    markdown_text: &str,
    key_base: &str,
    finish: Option<Finish>,
) -> Delivery {
    deliver_with_buttons(deliverer, target, reply_to, markdown_text, &[], key_base, finish).await
}

/// [`deliver`] without waiting for the platform: the parts are queued (durably) and the courier
/// delivers them. For replies a session's actor sends while it has other events to handle (a
/// command's answer, "your message is queued"), which must not wait out a platform's outage.
pub async fn queue(
    deliverer: &Deliverer,
    target: &ChatTarget,
    reply_to: Option<&str>,
    markdown_text: &str,
    buttons: &[Vec<Button>],
    key_base: &str,
    finish: Option<Finish>,
) -> Delivery {
    let parts = Parts { target, reply_to, body: Body::Markdown(markdown_text), buttons, key_base, finish };
    deliver_parts(deliverer, parts, Terms::QUEUE_ONLY).await
}

/// One message already rendered in the platform's dialect and within its limit (a part of an
/// answer being streamed, a tool progress line): sent as it is, under `{key_base}:0`. `MEDIA:`
/// tags stay text (the turn sends the files once, when the answer is complete).
pub async fn deliver_streamed_part(
    deliverer: &Deliverer,
    target: &ChatTarget,
    reply_to: Option<&str>,
    rendered: &str,
    key_base: &str,
) -> Delivery {
    let parts = Parts { target, reply_to, body: Body::Rendered(rendered), buttons: &[], key_base, finish: None };
    deliver_parts(deliverer, parts, Terms::WAIT).await
}

/// What a delivery carries.
#[derive(Clone, Copy)]
enum Body<'a> {
    /// The agent's Markdown: files taken out of its `MEDIA:` tags, the rest rendered for the
    /// platform and split to its limit.
    Markdown(&'a str),
    /// One message already in the platform's dialect.
    Rendered(&'a str),
}

/// One delivery: what goes where, under which keys.
struct Parts<'a> {
    target: &'a ChatTarget,
    reply_to: Option<&'a str>,
    body: Body<'a>,
    buttons: &'a [Vec<Button>],
    key_base: &'a str,
    finish: Option<Finish>,
}

/// [`deliver`], with buttons under the last message where the platform has buttons (elsewhere
/// the text must already say what the buttons would do).
pub async fn deliver_with_buttons(
    deliverer: &Deliverer,
    target: &ChatTarget,
    reply_to: Option<&str>,
    markdown_text: &str,
    buttons: &[Vec<Button>],
    key_base: &str,
    finish: Option<Finish>,
) -> Delivery {
    let parts = Parts { target, reply_to, body: Body::Markdown(markdown_text), buttons, key_base, finish };
    deliver_parts(deliverer, parts, Terms::WAIT).await
}

/// [`deliver_with_buttons`] for a prompt that is worthless after `expires_in`: never shown
/// later than that.
pub async fn deliver_prompt(
    deliverer: &Deliverer,
    target: &ChatTarget,
    markdown_text: &str,
    buttons: &[Vec<Button>],
    key_base: &str,
    expires_in: Duration,
) -> Delivery {
    let parts = Parts { target, reply_to: None, body: Body::Markdown(markdown_text), buttons, key_base, finish: None };
    deliver_parts(deliverer, parts, Terms { expiry: Some(expires_in), ..Terms::WAIT }).await
}

async fn deliver_parts(deliverer: &Deliverer, parts: Parts<'_>, terms: Terms) -> Delivery {
    let Parts { target, reply_to, body, buttons, key_base, finish } = parts;
    let Some(adapter) = deliverer.adapter(target.platform.as_str()) else {
        tracing::error!(platform = %target.platform, "cannot deliver: platform `{}` is not enabled", target.platform);
        return Delivery::Failed;
    };
    let caps = adapter.capabilities();
    let (mut chunks, files) = match body {
        Body::Rendered(text) => (vec![text.to_string()], Vec::new()),
        Body::Markdown(markdown_text) => {
            let (markdown_text, files) = attachments(deliverer, markdown_text, caps.supports_files);
            (render_for(caps, &markdown_text), files)
        }
    };
    if !files.is_empty() && chunks.iter().all(|c| c.trim().is_empty()) {
        chunks.clear();
    }
    let part = |idempotency_key: String, text: String, reply_to: Option<&str>, file: Option<OutboundFile>| OutboundMessage {
        target: target.clone(),
        text,
        reply_to: reply_to.map(str::to_string),
        idempotency_key,
        is_final: false,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file,
    };
    let mut messages: Vec<OutboundMessage> = chunks
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| part(format!("{key_base}:{i}"), chunk, reply_to, None))
        .chain(files.into_iter().enumerate().map(|(i, file)| part(format!("{key_base}:file:{i}"), String::new(), None, Some(file))))
        .collect();
    if let Some(last) = messages.last_mut() {
        last.is_final = finish.is_some();
        last.usage = finish.as_ref().map(|f| f.usage);
        last.finish_reason = finish.as_ref().map(|f| f.finish_reason.clone());
        if caps.supports_buttons {
            last.buttons = buttons.to_vec();
        }
    }
    let window = terms.expiry.unwrap_or(deliverer.courier.policy().window);
    let rows = queue_rows(target, messages, window, terms.expiry.is_none());
    summarize(&deliverer.courier.dispatch(rows, terms.patience).await)
}

/// The outbox rows of one delivery's parts, in order; the first says how late it is, if late.
fn queue_rows(target: &ChatTarget, messages: Vec<OutboundMessage>, window: Duration, notify_on_death: bool) -> Vec<NewOutboxRow> {
    let deadline_ms = chrono::Utc::now().timestamp_millis().saturating_add(window.as_millis().min(i64::MAX as u128) as i64);
    let target_json = serde_json::to_string(target).unwrap_or_default();
    let lane = crate::gateway::delivery::courier::lane_of(target.platform.as_str(), &target.chat_id);
    messages
        .into_iter()
        .enumerate()
        .map(|(i, message)| NewOutboxRow {
            key: message.idempotency_key.clone(),
            lane: lane.clone(),
            platform: target.platform.to_string(),
            target: target_json.clone(),
            // What an operator is shown: the text, or the file's path.
            body: message.file.as_ref().map(|f| f.path.to_string_lossy().into_owned()).unwrap_or_else(|| message.text.clone()),
            message: serde_json::to_string(&message).unwrap_or_default(),
            deadline_ms,
            // One notice per delivery at most, carried by its first part.
            notify_on_death: notify_on_death && i == 0,
            lead: i == 0,
        })
        .collect()
}

/// One word for a delivery's parts: the worst of their outcomes.
fn summarize(outcomes: &[Outcome]) -> Delivery {
    let worst = |d: &Outcome| match d {
        Outcome::Delivered { .. } => 0,
        Outcome::Queued => 1,
        Outcome::InDoubt => 2,
        Outcome::GivenUp { .. } => 3,
    };
    match outcomes.iter().max_by_key(|o| worst(o)) {
        None | Some(Outcome::Delivered { .. }) => Delivery::Delivered,
        Some(Outcome::Queued) => Delivery::Queued,
        Some(Outcome::InDoubt) => Delivery::InDoubt,
        Some(Outcome::GivenUp { .. }) => Delivery::Failed,
    }
}

/// The agent's Markdown as the messages a platform receives: rendered in its dialect (the
/// whole answer at once, so lists and quotes render as one), then split to its limit without
/// losing or changing a character.
pub fn render_for(caps: &Capabilities, markdown_text: &str) -> Vec<String> {
    let doc = render::document(markdown_text, caps.dialect);
    if caps.splits_long_messages { chunk::split(&doc, caps.max_message_len, caps.length_unit) } else { vec![doc.to_text()] }
}

/// Largest file sent from a `MEDIA:` tag (Telegram's upload limit for bots).
const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;

/// The answer without its `MEDIA:` tags, and the files they name that may be sent. A file that
/// may not (missing, too large, outside the allowed folders, or a platform without files) is
/// named in the answer instead, so nothing disappears silently.
fn attachments(deliverer: &Deliverer, markdown_text: &str, supports_files: bool) -> (String, Vec<OutboundFile>) {
    let (mut text, tags) = extract_media_tags(markdown_text);
    let mut files = Vec::new();
    for tag in tags {
        let name =
            std::path::Path::new(&tag.path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| tag.path.clone());
        let checked = if supports_files { attachable(deliverer, &tag.path) } else { Err("this chat cannot receive files".to_string()) };
        match checked {
            Ok(path) => files.push(OutboundFile::new(path, tag.as_document)),
            Err(why) => {
                tracing::warn!(file = %tag.path, "a file in the answer was not sent: {why}");
                text.push_str(&format!("\n\n(`{name}` was not sent: {why}.)"));
            }
        }
    }
    (text, files)
}

/// Files may come from the cache (downloads, generated files), the system temp folder and the
/// agent's working folder — never from elsewhere in `HERMES_HOME` (config, `.env`, the database).
fn attachable(deliverer: &Deliverer, path: &str) -> Result<std::path::PathBuf, String> {
    let path = std::path::Path::new(path);
    if !path.is_absolute() {
        return Err("the path is not absolute".to_string());
    }
    let real = std::fs::canonicalize(path).map_err(|_| "no such file".to_string())?;
    let meta = std::fs::metadata(&real).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a file".to_string());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("larger than {} MB", MAX_FILE_BYTES / (1024 * 1024)));
    }
    let canonical = |p: std::path::PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
    let home = canonical(deliverer.files.home.root());
    let in_cache = real.starts_with(canonical(deliverer.files.home.cache_dir()));
    let in_work_or_temp =
        [std::env::temp_dir(), deliverer.files.workdir.clone()].into_iter().map(canonical).any(|root| real.starts_with(root));
    let allowed = in_cache || (in_work_or_temp && !real.starts_with(&home));
    if !allowed {
        return Err("it is outside the folders files may be sent from (the cache, the temp folder, the working folder)".to_string());
    }
    Ok(real)
}
