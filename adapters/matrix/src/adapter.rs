//! [`MatrixAdapter`]: the send side (messages with a transaction id from their idempotency key,
//! HTML rendered from the Markdown, threads, approval prompts with reaction keys, files, paced
//! edits, typing) and the entry to the sync loop in [`crate::sync`].

use crate::errors::classify;
use crate::reactions::{self, Prompt, Prompts};
use crate::settings::{Login, MatrixSettings};
use crate::state::StateDir;
use async_trait::async_trait;
use hermes_adapter::FileKind;
use hermes_adapter::pacing::{Destination, Pacer};
use hermes_adapter::render::matrix_html;
use hermes_adapter::{
    AdapterContext, AdapterError, Capabilities, ChatTarget, CredentialId, LengthUnit, Lookup, MarkdownDialect, OutboundMessage, Platform,
    PlatformAdapter, SendError, SendReceipt, StreamStyle,
};
use matrix_sdk::attachment::{AttachmentConfig, AttachmentInfo, BaseAudioInfo};
use matrix_sdk::ruma::UInt;
use matrix_sdk::ruma::{OwnedRoomId, OwnedTransactionId};
use matrix_sdk::{Client, Room};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

/// Longest message sent, in characters: Matrix allows 64 KiB events, but long messages read
/// badly in every client, and the HTML doubles the size.
pub const MAX_MESSAGE_LEN: usize = 4_000;
/// Threads remembered as "the bot takes part"; past this the book starts over (a forgotten
/// thread is looked up again at its root, not lost).
const THREADS_REMEMBERED: usize = 10_000;

pub struct MatrixAdapter {
    platform: Platform,
    capabilities: Capabilities,
    pub(crate) settings: MatrixSettings,
    pub(crate) state: StateDir,
    /// Set by `run` once logged in; sends before that are refused as transient.
    client: RwLock<Option<Client>>,
    pub(crate) prompts: Prompts,
    /// Message event id → when it was last edited, to pace edits.
    edited: Mutex<HashMap<String, Instant>>,
    /// (room, thread root) the bot takes part in.
    threads: Mutex<HashSet<(String, String)>>,
    /// Sends per room kept under [`crate::MatrixSendBudget`] and the homeserver's 429s.
    pacer: Pacer<String>,
}

/// How long after a send its transaction id is relied on to deduplicate a resend of a file from
/// the same device (Synapse keeps them about 30 minutes; a margin below that).
const TXN_MEMORY: Duration = Duration::from_secs(20 * 60);

/// A Matrix transaction id from a message's idempotency key: the same key always gives the same
/// id, so the homeserver recognises a resend (see [`crate::errors`]), and a lookup from another
/// device finds the message by it ([`crate::lookup`]). Hashed because keys may hold characters
/// a URL path segment must not.
pub(crate) fn txn_id(idempotency_key: &str) -> OwnedTransactionId {
    let digest = Sha256::digest(idempotency_key.as_bytes());
    OwnedTransactionId::from(format!("hermes-{}", &hex::encode(digest)[..40]))
}

impl MatrixAdapter {
    pub fn new(settings: MatrixSettings) -> Self {
        let capabilities = Capabilities {
            max_message_len: settings.max_message_len.clamp(1, MAX_MESSAGE_LEN),
            length_unit: LengthUnit::Chars,
            dialect: MarkdownDialect::Markdown,
            streaming: StreamStyle::EditInPlace,
            supports_edit: true,
            supports_buttons: true,
            supports_typing: true,
            supports_threads: true,
            supports_async_delivery: true,
            splits_long_messages: true,
            supports_files: true,
            read_live: true,
            people_reply: true,
            voice_notes: true,
        };
        let state = StateDir::new(settings.state_dir.clone());
        let prompts = Prompts::load(state.prompts_file());
        let pacer = Pacer::new(settings.budget.limits());
        Self {
            platform: Platform::new("matrix"),
            capabilities,
            settings,
            state,
            client: RwLock::new(None),
            prompts,
            edited: Mutex::new(HashMap::new()),
            threads: Mutex::new(HashSet::new()),
            pacer,
        }
    }

    pub(crate) fn set_client(&self, client: Option<Client>) {
        if let Ok(mut slot) = self.client.write() {
            *slot = client;
        }
    }

    fn client(&self) -> Result<Client, SendError> {
        self.client
            .read()
            .ok()
            .and_then(|c| c.clone())
            .ok_or_else(|| SendError::Transient("not connected to the homeserver yet".to_string()))
    }

    fn room(&self, target: &ChatTarget) -> Result<Room, SendError> {
        let client = self.client()?;
        let room_id = OwnedRoomId::try_from(target.chat_id.trim())
            .map_err(|_| SendError::NotFound(format!("`{}` is not a Matrix room id", target.chat_id)))?;
        client.get_room(&room_id).ok_or_else(|| SendError::NotFound(format!("the bot is not in room {room_id}")))
    }

    /// The bot takes part in the thread (it was mentioned at its root or wrote there).
    pub(crate) fn join_thread(&self, room: &str, root: &str) {
        if let Ok(mut threads) = self.threads.lock() {
            if threads.len() >= THREADS_REMEMBERED {
                threads.clear();
            }
            threads.insert((room.to_string(), root.to_string()));
        }
    }

    pub(crate) fn takes_part(&self, room: &str, root: &str) -> bool {
        self.threads.lock().ok().is_some_and(|t| t.contains(&(room.to_string(), root.to_string())))
    }

    /// Wait for this room's next send slot (the budget, and any 429 the homeserver answered).
    async fn pace(&self, room: &Room) {
        self.pacer.acquire(Destination::chat(&room.room_id().to_string())).await;
    }

    /// A 429 holds back every later send to the room for the homeserver's `retry_after_ms`.
    fn note_rate_limit(&self, room: &Room, error: SendError) -> SendError {
        if let SendError::RateLimited { retry_after } = &error {
            self.pacer.block(&room.room_id().to_string(), *retry_after);
        }
        error
    }

    /// Waits out the rest of the edit interval since this message's last edit.
    async fn pace_edit(&self, message_id: &str) {
        let wait = self
            .edited
            .lock()
            .ok()
            .and_then(|e| e.get(message_id).map(|at| self.settings.min_edit_interval.saturating_sub(at.elapsed())))
            .unwrap_or_default();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        if let Ok(mut edited) = self.edited.lock() {
            // Old entries only pace edits that will never come.
            edited.retain(|_, at| at.elapsed() < Duration::from_secs(60));
            edited.insert(message_id.to_string(), Instant::now());
        }
    }

    async fn send_file(&self, room: &Room, msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        let Some(file) = &msg.file else { return Err(SendError::Other("no file".to_string())) };
        let data = tokio::fs::read(&file.path).await.map_err(|e| SendError::Other(format!("could not read `{}`: {e}", file.file_name)))?;
        let mut mime = mime_of(&file.file_name);
        let mut config = AttachmentConfig::new().txn_id(txn_id(&msg.idempotency_key));
        if file.kind == FileKind::Voice {
            // matrix-sdk marks it `org.matrix.msc3245.voice` and, given the length and the
            // waveform, adds MSC1767's audio block: clients play it as a voice note.
            mime = mime::Mime::from_str("audio/ogg").unwrap_or(mime);
            let info = BaseAudioInfo {
                duration: file.duration_secs.filter(|s| s.is_finite() && *s >= 0.0).map(Duration::from_secs_f64),
                size: UInt::new(data.len() as u64),
                waveform: crate::voice::waveform(&data),
            };
            config = config.info(AttachmentInfo::Voice(info));
        }
        if !msg.text.trim().is_empty() {
            config = config.caption(Some(matrix_sdk::ruma::events::room::message::TextMessageEventContent::plain(msg.text.clone())));
        }
        self.pace(room).await;
        let response = room
            .send_attachment(file.file_name.clone(), &mime, data, config)
            .await
            .map_err(|e| self.note_rate_limit(room, classify(&e)))?;
        Ok(SendReceipt { message_id: Some(response.event_id.to_string()) })
    }
}

/// A MIME type from the file name's extension; anything unknown is sent as bytes.
fn mime_of(name: &str) -> mime::Mime {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    let text = match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "txt" | "md" | "log" => "text/plain",
        "json" => "application/json",
        "mp3" => "audio/mpeg",
        "ogg" | "oga" | "opus" => "audio/ogg",
        "m4a" => "audio/mp4",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        _ => "application/octet-stream",
    };
    text.parse().unwrap_or(mime::APPLICATION_OCTET_STREAM)
}

/// The content of a text message: the Markdown as `body`, its HTML rendering as
/// `formatted_body`, no mentions (the bot never pings anyone by accident), and the thread
/// relation when it goes into a thread.
pub(crate) fn text_content(text: &str, thread: Option<&str>, reply_to: Option<&str>, link_previews: bool) -> Value {
    let mut content = json!({
        "msgtype": "m.text",
        "body": text,
        "format": "org.matrix.custom.html",
        "formatted_body": matrix_html::to_html(text),
        "m.mentions": {},
    });
    if !link_previews {
        // MSC4095: an empty list tells clients that show URL previews to show none, so a link the
        // model wrote is not fetched by every reader's client.
        content["com.beeper.linkpreviews"] = json!([]);
    }
    if let Some(root) = thread {
        content["m.relates_to"] = json!({
            "rel_type": "m.thread",
            "event_id": root,
            // A client without threads shows it as a reply to the message it answers.
            "is_falling_back": true,
            "m.in_reply_to": {"event_id": reply_to.unwrap_or(root)},
        });
    }
    content
}

/// An edit of `original` to `text` (`m.replace`; the `* ` body is what clients without edits
/// show).
pub(crate) fn edit_content(original: &str, text: &str, link_previews: bool) -> Value {
    let html = matrix_html::to_html(text);
    let mut content = json!({
        "msgtype": "m.text",
        "body": format!("* {text}"),
        "format": "org.matrix.custom.html",
        "formatted_body": format!("* {html}"),
        "m.mentions": {},
        "m.new_content": {"msgtype": "m.text", "body": text, "format": "org.matrix.custom.html", "formatted_body": html, "m.mentions": {}},
        "m.relates_to": {"rel_type": "m.replace", "event_id": original},
    });
    if !link_previews {
        content["com.beeper.linkpreviews"] = json!([]);
        content["m.new_content"]["com.beeper.linkpreviews"] = json!([]);
    }
    content
}

#[async_trait]
impl PlatformAdapter for MatrixAdapter {
    fn platform(&self) -> &Platform {
        &self.platform
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn probe(&self) -> Result<Option<String>, AdapterError> {
        self.identify_for_probe().await
    }

    async fn run(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
        let result = crate::sync::run(self, ctx).await;
        self.set_client(None);
        result
    }

    fn credential(&self) -> Option<CredentialId> {
        let account = match (&self.settings.user_id, &self.settings.login) {
            (Some(user), _) => format!("{}|{user}", self.settings.homeserver),
            (None, Login::Token(token)) => format!("{}|{token}", self.settings.homeserver),
            (None, Login::Password(_)) => return None,
        };
        Some(CredentialId::new("Matrix account", &account))
    }

    fn liveness_timeout(&self) -> Option<Duration> {
        // A long poll returns at least every sync_timeout; three missed in a row is not normal.
        Some(self.settings.sync_timeout * 3 + self.settings.request_timeout)
    }

    /// A message carries its transaction id in its content, and is looked for in the room's
    /// newest events ([`crate::lookup`]): the replica asking may be another device than the one
    /// that sent it, whose transaction ids the homeserver does not deduplicate. A file's content
    /// is matrix-sdk's and carries no mark: the homeserver answers a repeated transaction id of
    /// the same device with the event it already made (for about half an hour, [`TXN_MEMORY`]),
    /// and past that, or from another replica's device, nothing can tell.
    async fn find_sent(&self, msg: &OutboundMessage, since: Duration) -> Result<Lookup, SendError> {
        if msg.file.is_some() {
            return Ok(if since < TXN_MEMORY { Lookup::ResendIsDeduplicated } else { Lookup::CannotTell });
        }
        let room = self.room(&msg.target)?;
        let client = self.client()?;
        let me = client.user_id().ok_or_else(|| SendError::Transient("not logged in to the homeserver yet".to_string()))?;
        crate::lookup::find(&room, me.as_str(), txn_id(&msg.idempotency_key).as_str(), since).await
    }

    async fn send(&self, msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        let room = self.room(&msg.target)?;
        if msg.file.is_some() {
            return self.send_file(&room, msg).await;
        }
        if msg.text.trim().is_empty() && msg.buttons.is_empty() {
            return Err(SendError::Other("nothing to send: the message is empty".to_string()));
        }
        let thread = msg.target.thread_id.as_deref().filter(|t| !t.is_empty());
        let choices = reactions::choices(&msg.buttons);
        let text =
            if msg.buttons.is_empty() { msg.text.clone() } else { format!("{}{}", msg.text, reactions::legend(&msg.buttons, &choices)) };
        let txn = txn_id(&msg.idempotency_key);
        let mut content = text_content(&text, thread, msg.reply_to.as_deref(), self.settings.link_previews);
        content[crate::lookup::MARK_KEY] = json!(txn.as_str());
        self.pace(&room).await;
        let sent = room
            .send_raw("m.room.message", content)
            .with_transaction_id(&txn)
            .await
            .map_err(|e| self.note_rate_limit(&room, classify(&e)))?;
        let event_id = sent.response.event_id.to_string();
        if let Some(root) = thread {
            self.join_thread(room.room_id().as_str(), root);
        }
        if !choices.is_empty() {
            // Remembered before the bot reacts, so a quick tap is already understood.
            let prompt = Prompt {
                event_id: event_id.clone(),
                room_id: room.room_id().to_string(),
                thread_id: thread.map(str::to_string),
                choices: choices.clone(),
            };
            if let Err(e) = self.prompts.remember(prompt) {
                tracing::warn!(
                    "could not save an approval prompt ({e}); after a restart its reactions are ignored (the text commands still work)"
                );
            }
            for (index, choice) in choices.iter().enumerate() {
                let reaction = json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": choice.key}});
                let txn = txn_id(&format!("{}:reaction:{index}", msg.idempotency_key));
                if let Err(e) = room.send_raw("m.reaction", reaction).with_transaction_id(&txn).await {
                    tracing::warn!("could not add the {} reaction to an approval prompt: {e}", choice.key);
                }
            }
        }
        Ok(SendReceipt { message_id: Some(event_id) })
    }

    async fn edit(&self, target: &ChatTarget, message_id: &str, text: &str) -> Result<(), SendError> {
        if text.trim().is_empty() {
            return Ok(());
        }
        let room = self.room(target)?;
        self.pace_edit(message_id).await;
        // Each edit gets its own transaction id: two edits with the same text are both wanted,
        // and a doubled edit shows nothing twice.
        room.send_raw("m.room.message", edit_content(message_id, text, self.settings.link_previews))
            .await
            .map_err(|e| self.note_rate_limit(&room, classify(&e)))?;
        Ok(())
    }

    async fn typing(&self, target: &ChatTarget) -> Result<(), SendError> {
        let room = self.room(target)?;
        room.typing_notice(true).await.map_err(|e| classify(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_key_gives_the_same_transaction_id() {
        assert_eq!(txn_id("turn-1:0"), txn_id("turn-1:0"));
        assert_ne!(txn_id("turn-1:0"), txn_id("turn-1:1"));
        assert!(txn_id("a/b?c#d").as_str().bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    }

    #[test]
    fn thread_answers_carry_the_thread_and_a_fallback_reply() {
        let content = text_content("**hi**", Some("$root"), Some("$q"), false);
        assert_eq!(content["m.relates_to"]["rel_type"], "m.thread");
        assert_eq!(content["m.relates_to"]["event_id"], "$root");
        assert_eq!(content["m.relates_to"]["is_falling_back"], true);
        assert_eq!(content["m.relates_to"]["m.in_reply_to"]["event_id"], "$q");
        assert_eq!(content["body"], "**hi**");
        assert!(content["formatted_body"].as_str().unwrap().contains("<strong>hi</strong>"));
        assert!(text_content("x", None, None, false).get("m.relates_to").is_none());
        assert_eq!(content["com.beeper.linkpreviews"], json!([]), "no link previews unless asked");
        assert!(text_content("x", None, None, true).get("com.beeper.linkpreviews").is_none());
    }

    #[test]
    fn unsafe_links_never_become_html_links() {
        let content = text_content("[click](javascript:alert(1)) <script>x</script>", None, None, false);
        let html = content["formatted_body"].as_str().unwrap();
        assert!(!html.contains("javascript:") || !html.contains("href=\"javascript"), "{html}");
        assert!(!html.contains("<script>"), "{html}");
    }

    #[test]
    fn an_edit_replaces_the_original() {
        let content = edit_content("$orig", "new text", false);
        assert_eq!(content["m.relates_to"]["rel_type"], "m.replace");
        assert_eq!(content["m.new_content"]["body"], "new text");
    }
}
