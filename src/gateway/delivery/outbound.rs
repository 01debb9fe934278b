//! What [`Deliverer::send`](crate::gateway::delivery::deliverer::Deliverer::send) needs
//! besides the [`plan`](crate::gateway::delivery::plan::plan): the files an answer's `MEDIA:`
//! tags may attach, the outbox rows of the planned parts, and one word for what happened to them
//! (see [`Delivery`]). The parts go to the [`Courier`](crate::gateway::delivery::courier::Courier),
//! which queues them in the outbox under their keys and delivers them through outages and
//! restarts; a caller waits only for each part's first outcome.

use crate::config::Home;
use crate::gateway::delivery::courier::Outcome;
use crate::gateway::delivery::reply::{Body, Reply};
use crate::store::NewOutboxRow;
use hermes_adapter::media::extract_media_tags;
use hermes_adapter::{ChatTarget, OutboundFile, OutboundMessage};
use std::path::PathBuf;
use std::time::Duration;

/// The folders an answer may attach files from (see [`attachable`]).
pub(crate) struct FileRoots {
    /// `HERMES_HOME`: nothing under it is sent, apart from its cache.
    pub home: Home,
    /// The agent's working folder.
    pub workdir: PathBuf,
}

/// What happened to a delivery, as far as its caller waits to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
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
pub(super) struct Terms {
    /// Give the parts up after this long instead of the configured window (an approval prompt
    /// is worthless once it expired).
    pub(super) expiry: Option<Duration>,
    /// How long the caller waits for the first outcome.
    pub(super) patience: Duration,
}

impl Terms {
    pub(super) const WAIT: Terms = Terms { expiry: None, patience: PATIENCE };
    pub(super) const QUEUE_ONLY: Terms = Terms { expiry: None, patience: Duration::ZERO };
}

/// The outbox rows of one delivery's parts, in order; the first says how late it is, if late.
/// `per_request`: the platform answers on the request, and each request's parts are a lane of
/// their own, so a part whose request waits on another replica, or died with it, never holds up
/// another request's.
pub(super) fn queue_rows(
    target: &ChatTarget,
    messages: Vec<OutboundMessage>,
    window: Duration,
    notify_on_death: bool,
    per_request: bool,
) -> Vec<NewOutboxRow> {
    let deadline_ms = chrono::Utc::now().timestamp_millis().saturating_add(window.as_millis().min(i64::MAX as u128) as i64);
    let target_json = serde_json::to_string(target).unwrap_or_default();
    let chat_lane = crate::gateway::delivery::courier::lane_of(target.platform.as_str(), &target.chat_id);
    let lane_of = |message: &OutboundMessage| match (&message.reply_to, per_request) {
        (Some(request), true) => format!("{chat_lane}\u{1f}{request}"),
        _ => chat_lane.clone(),
    };
    messages
        .into_iter()
        .enumerate()
        .map(|(i, message)| NewOutboxRow {
            key: message.idempotency_key.clone(),
            lane: lane_of(&message),
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
pub(super) fn summarize(outcomes: &[Outcome]) -> Delivery {
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

/// `reply` with the files its Markdown's `MEDIA:` tags name taken out of its text and added
/// to its files (reads the file system: whether each may be sent). A rendered body is left
/// as it is.
pub(super) fn with_attachments(roots: &FileRoots, mut reply: Reply, supports_files: bool) -> Reply {
    if let Body::Markdown(markdown_text) = &reply.body {
        let (text, files) = attachments(roots, markdown_text, supports_files);
        reply.body = Body::Markdown(text);
        reply.files.extend(files);
    }
    reply
}

/// Largest file sent from a `MEDIA:` tag (Telegram's upload limit for bots).
const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;

/// The answer without its `MEDIA:` tags, and the files they name that may be sent. A file that
/// may not (missing, too large, outside the allowed folders, or a platform without files) is
/// named in the answer instead, so nothing disappears silently.
fn attachments(roots: &FileRoots, markdown_text: &str, supports_files: bool) -> (String, Vec<OutboundFile>) {
    let (mut text, tags) = extract_media_tags(markdown_text);
    let mut files = Vec::new();
    for tag in tags {
        let name =
            std::path::Path::new(&tag.path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| tag.path.clone());
        let checked = if supports_files { attachable(roots, &tag.path) } else { Err(NotAttachable::ChatTakesNoFiles) };
        match checked {
            Ok(path) if tag.as_voice => files.push(voice_file(path)),
            Ok(path) => files.push(OutboundFile::new(path, tag.as_document)),
            Err(why) => {
                tracing::warn!(file = %tag.path, "a file in the answer was not sent: {why}");
                text.push_str(&format!("\n\n(`{name}` was not sent: {why}.)"));
            }
        }
    }
    (text, files)
}

/// A `[[audio_as_voice]]` file: a voice note when it is OGG/Opus (its length read from the
/// file, as platforms show it), else sent as the file it is.
fn voice_file(path: std::path::PathBuf) -> OutboundFile {
    match std::fs::read(&path).ok().and_then(|bytes| crate::media::ogg::opus_duration(&bytes).ok()) {
        Some(secs) => OutboundFile::voice(path, secs),
        None => {
            tracing::warn!(file = %path.display(), "a file marked [[audio_as_voice]] is not OGG/Opus; sent as a file");
            OutboundFile::new(path, true)
        }
    }
}

/// Why a `MEDIA:` file is not sent; the answer names it with this text.
#[derive(Debug, thiserror::Error)]
enum NotAttachable {
    #[error("this chat cannot receive files")]
    ChatTakesNoFiles,
    #[error("the path is not absolute")]
    RelativePath,
    #[error("no such file")]
    Missing,
    #[error(transparent)]
    Unreadable(std::io::Error),
    #[error("not a file")]
    NotAFile,
    #[error("larger than {} MB", MAX_FILE_BYTES / (1024 * 1024))]
    TooLarge,
    #[error("it is outside the folders files may be sent from (the cache, the temp folder, the working folder)")]
    OutsideAllowedFolders,
}

/// Files may come from the cache (downloads, generated files), the system temp folder and the
/// agent's working folder — never from elsewhere in `HERMES_HOME` (config, `.env`, the database).
fn attachable(roots: &FileRoots, path: &str) -> Result<std::path::PathBuf, NotAttachable> {
    let path = std::path::Path::new(path);
    if !path.is_absolute() {
        return Err(NotAttachable::RelativePath);
    }
    let real = std::fs::canonicalize(path).map_err(|_| NotAttachable::Missing)?;
    let meta = std::fs::metadata(&real).map_err(NotAttachable::Unreadable)?;
    if !meta.is_file() {
        return Err(NotAttachable::NotAFile);
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(NotAttachable::TooLarge);
    }
    let canonical = |p: std::path::PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
    let home = canonical(roots.home.root());
    let in_cache = real.starts_with(canonical(roots.home.cache_dir()));
    let in_work_or_temp = [std::env::temp_dir(), roots.workdir.clone()].into_iter().map(canonical).any(|root| real.starts_with(root));
    let allowed = in_cache || (in_work_or_temp && !real.starts_with(&home));
    if !allowed {
        return Err(NotAttachable::OutsideAllowedFolders);
    }
    Ok(real)
}
