//! Outbound delivery: render for the platform's dialect, chunk to its limit, record each chunk in
//! the outbox under an idempotency key, and send with retries classified by error kind. A chunk
//! whose earlier send may have reached the platform is never blindly resent.

use super::deliverer::Deliverer;
use crate::store::OutboxReservation;
use hermes_adapter::media::extract_media_tags;
use hermes_adapter::{Button, Capabilities, ChatTarget, OutboundFile, OutboundMessage, PlatformAdapter, SendError, Usage, chunk, render};
use std::time::Duration;

/// Attempts per chunk for failures that are safe to retry.
const MAX_ATTEMPTS: u32 = 3;
const RETRY_BASE: Duration = Duration::from_secs(2);
/// Longest total rate-limit wait honoured before giving up on a chunk.
const MAX_RATE_LIMIT_WAIT: Duration = Duration::from_secs(300);
/// Sends a chunk gets when a restart interrupted them: the first, then one labelled resend.
const INTERRUPTED_SENDS: i64 = 2;
/// Starts a message resent after a restart cut off its first send (it may be a repeat).
pub const RESEND_MARK: &str = "↻ (resent) ";
const DELIVERY_FAILED_NOTICE: &str =
    "⚠️ Message delivery failed after multiple attempts. Please try again — your request was processed but the response could not be sent.";

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

/// What happened to a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Every chunk is on the platform (now or in an earlier attempt).
    Delivered,
    /// Some chunk may or may not have arrived; it was not resent.
    InDoubt,
    /// Nobody could be reached (no adapter, recipient gone, refused, retries exhausted).
    Failed,
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
    deliver_inner(deliverer, target, reply_to, Body::Rendered(rendered), &[], key_base, None).await
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
    deliver_inner(deliverer, target, reply_to, Body::Markdown(markdown_text), buttons, key_base, finish).await
}

async fn deliver_inner(
    deliverer: &Deliverer,
    target: &ChatTarget,
    reply_to: Option<&str>,
    body: Body<'_>,
    buttons: &[Vec<Button>],
    key_base: &str,
    finish: Option<Finish>,
) -> Delivery {
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
    send_in_order(deliverer, adapter.as_ref(), target, messages, key_base).await
}

/// Send `messages` one after another, each claimed in the outbox first (a chunk already sent is
/// skipped, one that may have arrived is not resent); the first that fails ends the delivery.
async fn send_in_order(
    deliverer: &Deliverer,
    adapter: &dyn PlatformAdapter,
    target: &ChatTarget,
    messages: Vec<OutboundMessage>,
    key_base: &str,
) -> Delivery {
    let target_json = serde_json::to_string(target).unwrap_or_default();
    let mut outcome = Delivery::Delivered;
    for mut message in messages {
        let key = message.idempotency_key.clone();
        // What the outbox remembers: the text, or the file's path.
        let body = message.file.as_ref().map(|f| f.path.to_string_lossy().into_owned()).unwrap_or_else(|| message.text.clone());
        let claimed = deliverer.store.outbox_claim(&key, &target_json, &body, sends_now).await;
        let attempt_recorded = matches!(&claimed, Ok(r) if sends_now(r));
        match claimed {
            Ok(OutboxReservation::AlreadySent { .. }) => continue,
            Ok(OutboxReservation::Interrupted { attempts }) if attempts < INTERRUPTED_SENDS => {
                // Cut off mid-send by a crash: it may or may not have arrived. Losing an answer is
                // worse than a labelled repeat, so it goes out once more, marked as such.
                tracing::warn!(outbox_key = %key, "a send was interrupted by a restart; resending it once, marked as a possible repeat");
                message.text =
                    if message.text.is_empty() { RESEND_MARK.trim_end().to_string() } else { format!("{RESEND_MARK}{}", message.text) };
            }
            Ok(OutboxReservation::Interrupted { .. }) | Ok(OutboxReservation::InDoubt) => {
                tracing::warn!(outbox_key = %key, "an earlier send of this message may have arrived; not resending");
                outcome = Delivery::InDoubt;
                continue;
            }
            Ok(OutboxReservation::Failed { error }) => {
                tracing::warn!(outbox_key = %key, "message failed earlier ({error}); not retrying");
                return Delivery::Failed;
            }
            Ok(OutboxReservation::New) | Ok(OutboxReservation::Resume { .. }) => {}
            Err(e) => {
                // Without an outbox row a crash could resend it; sending anyway beats losing it.
                tracing::error!(error = %e, outbox_key = %key, "outbox unavailable; sending without a record");
            }
        }
        match send_chunk(deliverer, adapter, message, attempt_recorded).await {
            ChunkResult::Sent => {}
            ChunkResult::Ambiguous => outcome = Delivery::InDoubt,
            ChunkResult::Gone => return Delivery::Failed,
            ChunkResult::Failed { notify } => {
                if notify && adapter.capabilities().supports_async_delivery {
                    notify_failure(deliverer, adapter, target, key_base).await;
                }
                return Delivery::Failed;
            }
        }
    }
    outcome
}

/// The agent's Markdown as the messages a platform receives: rendered in its dialect (the
/// whole answer at once, so lists and quotes render as one), then split to its limit without
/// losing or changing a character.
pub fn render_for(caps: &Capabilities, markdown_text: &str) -> Vec<String> {
    let doc = render::document(markdown_text, caps.dialect);
    if caps.splits_long_messages { chunk::split(&doc, caps.max_message_len, caps.length_unit) } else { vec![doc.to_text()] }
}

enum ChunkResult {
    Sent,
    Ambiguous,
    Gone,
    Failed { notify: bool },
}

/// Whether a reservation is to be sent now: new, reserved but never attempted, or cut off by a
/// restart fewer than [`INTERRUPTED_SENDS`] times (the one labelled resend).
fn sends_now(reservation: &OutboxReservation) -> bool {
    match reservation {
        OutboxReservation::New | OutboxReservation::Resume { .. } => true,
        OutboxReservation::Interrupted { attempts } => *attempts < INTERRUPTED_SENDS,
        _ => false,
    }
}

/// `attempt_recorded`: the outbox already holds the first attempt as `sending` (claimed with it).
async fn send_chunk(
    deliverer: &Deliverer,
    adapter: &dyn PlatformAdapter,
    mut message: OutboundMessage,
    attempt_recorded: bool,
) -> ChunkResult {
    let _sending = crate::observe::metrics::global().sending();
    let store = &deliverer.store;
    let key = message.idempotency_key.clone();
    let mut plain_fallback_used = false;
    let mut rate_limit_waited = Duration::ZERO;
    let mut attempt = 0;
    let mut unrecorded_attempt = !attempt_recorded;
    loop {
        attempt += 1;
        if unrecorded_attempt && let Err(e) = store.outbox_mark_sending(&key).await {
            tracing::warn!(error = %e, "could not record a send attempt");
        }
        unrecorded_attempt = true;
        let error = match adapter.send(&message).await {
            Ok(receipt) => {
                crate::observe::metrics::global().message_sent(message.target.platform.as_str(), &message.target.chat_id);
                if let Err(e) = store.outbox_mark_sent(&key, receipt.message_id.as_deref()).await {
                    tracing::warn!(error = %e, "could not record a sent message");
                }
                return ChunkResult::Sent;
            }
            Err(e) => {
                crate::observe::metrics::global().send_failed(message.target.platform.as_str(), &e);
                e
            }
        };
        // A 429 means the platform did not take the message, so waiting it out is always safe
        // and does not use up an attempt; only the total wait is bounded.
        if let SendError::RateLimited { retry_after } = &error
            && rate_limit_waited + *retry_after <= MAX_RATE_LIMIT_WAIT
        {
            rate_limit_waited += *retry_after;
            attempt -= 1;
            tracing::info!(outbox_key = %key, wait_ms = retry_after.as_millis() as u64, "rate limited by the platform; waiting");
            tokio::time::sleep(*retry_after).await;
            continue;
        }
        let wait = match &error {
            SendError::Transient(_) => Some(jittered(RETRY_BASE * 2u32.pow(attempt - 1))),
            // The mark pushed a chunk that was exactly at the limit over it.
            SendError::TooLong if message.text.starts_with(RESEND_MARK) => {
                message.text = message.text[RESEND_MARK.len()..].to_string();
                attempt -= 1;
                Some(Duration::ZERO)
            }
            SendError::BadFormat(_) if !plain_fallback_used => {
                // The platform rejected the markup: send the same words as plain text.
                plain_fallback_used = true;
                message.text = render::to_plain_text(&message.text, adapter.capabilities().dialect);
                attempt -= 1;
                Some(Duration::ZERO)
            }
            _ => None,
        };
        match (&error, wait) {
            (_, Some(wait)) if attempt < MAX_ATTEMPTS => {
                tracing::warn!(outbox_key = %key, attempt, wait_ms = wait.as_millis() as u64, error = %error, "send failed; retrying");
                tokio::time::sleep(wait).await;
            }
            (SendError::Ambiguous(detail), _) => {
                if let Err(e) = store.outbox_mark_ambiguous(&key, detail).await {
                    // A restart then finds it `sending` and may resend it once, labelled as a
                    // possible repeat: the operator should know why.
                    tracing::error!(outbox_key = %key, error = %e, "could not record an outcome-unknown send in the outbox");
                }
                tracing::warn!(outbox_key = %key, "send outcome unknown ({detail}); not resending to avoid a duplicate");
                return ChunkResult::Ambiguous;
            }
            (SendError::Gone(detail), _) => {
                if let Err(e) = store.outbox_mark_failed(&key, &format!("recipient gone: {detail}")).await {
                    tracing::error!(outbox_key = %key, error = %e, "could not record a failed send in the outbox");
                }
                tracing::info!(outbox_key = %key, "the recipient is gone; the answer stays in the session");
                return ChunkResult::Gone;
            }
            _ => {
                if let Err(e) = store.outbox_mark_failed(&key, &error.to_string()).await {
                    tracing::error!(outbox_key = %key, error = %e, "could not record a failed send in the outbox");
                }
                tracing::error!(outbox_key = %key, attempts = attempt, error = %error, "message could not be delivered");
                let notify = matches!(error, SendError::Transient(_) | SendError::RateLimited { .. });
                return ChunkResult::Failed { notify };
            }
        }
    }
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

/// One best-effort notice that the answer could not be delivered.
async fn notify_failure(deliverer: &Deliverer, adapter: &dyn PlatformAdapter, target: &ChatTarget, key_base: &str) {
    let key = format!("{key_base}:delivery-failed");
    match deliverer.store.outbox_reserve(&key, "", DELIVERY_FAILED_NOTICE).await {
        Ok(OutboxReservation::New) => {}
        // Sent (or tried) before: one notice at most.
        Ok(_) => return,
        // Without a reservation the notice could go out twice; skip it, but say why.
        Err(e) => {
            tracing::error!(outbox_key = %key, error = %e, "could not reserve the delivery-failed notice in the outbox; not sending it");
            return;
        }
    }
    let dialect_text = render::render(DELIVERY_FAILED_NOTICE, adapter.capabilities().dialect);
    let message = OutboundMessage {
        target: target.clone(),
        text: dialect_text,
        reply_to: None,
        idempotency_key: key.clone(),
        is_final: false,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file: None,
    };
    let result = adapter.send(&message).await;
    let recorded = match result {
        Ok(r) => deliverer.store.outbox_mark_sent(&key, r.message_id.as_deref()).await,
        Err(e) => deliverer.store.outbox_mark_failed(&key, &e.to_string()).await,
    };
    if let Err(e) = recorded {
        tracing::error!(outbox_key = %key, error = %e, "could not record the delivery-failed notice's outcome in the outbox");
    }
}

fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.8 + 0.4 * rand::random::<f64>())
}
