//! Edit-in-place streaming to a chat: the answer's text deltas become one message that is edited
//! as the text grows — coalesced to at most one edit per `streaming.edit_interval` (or every
//! `buffer_threshold` new characters), with a cursor while streaming, continuing in a new message
//! when the platform's length limit nears — plus tool-progress lines (`display.tool_progress`).
//! The response is rendered whole and split by the same chunker as any answer, so the chat ends
//! up showing exactly what it would without streaming. The final text is never delivered twice:
//! when the stream already shows it, the final edit just removes the cursor; when edits failed
//! (flood control), only what the chat does not show yet is sent.

use crate::config::{Config, StreamingConfig, ToolProgress};
use crate::gateway::delivery::deliverer::Deliverer;
use crate::gateway::delivery::outbound::Delivery;
use crate::gateway::delivery::reply::{Reply, ReplyKey};
use hermes_adapter::{Capabilities, ChatTarget, PlatformAdapter, SendError, chunk, render};
use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Rate-limit answers to edits after which editing stops for the rest of the turn.
const FLOOD_STRIKES: u32 = 3;
/// Text shorter than this is held back before the first message, so a silence token or a
/// one-word start never flashes up.
const FIRST_POST_MIN_CHARS: usize = 12;

/// A message the stream posted for the current response.
#[derive(Debug, Clone)]
struct Shown {
    message_id: Option<String>,
    /// What the chat shows in it now (rendered, with the cursor while streaming).
    text: String,
    /// Which visible bytes of the rendered response that is.
    visible: Range<usize>,
}

/// The tool progress message of the current tool round.
#[derive(Debug, Clone)]
struct Progress {
    message_id: Option<String>,
    markdown: String,
}

/// How answers are shown while they are written (`streaming.*`, `display.tool_progress`).
#[derive(Debug, Clone)]
pub(crate) struct StreamSettings {
    pub streaming: StreamingConfig,
    pub tool_progress: ToolProgress,
}

impl StreamSettings {
    pub(crate) fn from_config(config: &Config) -> Self {
        Self { streaming: config.streaming.clone(), tool_progress: config.display.tool_progress }
    }

    /// Whether the adapter and configuration call for edit-in-place streaming.
    pub(crate) fn edits_wanted(&self, caps: &Capabilities) -> bool {
        let s = &self.streaming;
        s.enabled && s.transport != "off" && caps.supports_edit && caps.supports_async_delivery
    }
}

pub(crate) struct StreamEditor {
    deliverer: Arc<Deliverer>,
    adapter: Arc<dyn PlatformAdapter>,
    caps: Capabilities,
    target: ChatTarget,
    reply_to: Option<String>,
    /// The event whose answer this is: every message posted is keyed under its answer.
    event_id: String,
    interval: Duration,
    threshold: usize,
    /// The cursor, in the platform's dialect.
    cursor: String,
    safe_limit: usize,
    progress_mode: ToolProgress,
    /// The Markdown of the current model response so far.
    response: String,
    /// The messages showing it, in order.
    shown: Vec<Shown>,
    /// Serial of posted messages this turn (idempotency keys).
    posted: usize,
    last_edit: Instant,
    unsent_chars: usize,
    edits_disabled: bool,
    strikes: u32,
    progress: Option<Progress>,
    tools_seen: HashSet<String>,
}

impl StreamEditor {
    pub(crate) fn new(
        deliverer: Arc<Deliverer>,
        settings: &StreamSettings,
        adapter: Arc<dyn PlatformAdapter>,
        target: ChatTarget,
        reply_to: Option<String>,
        event_id: String,
    ) -> Self {
        let caps = adapter.capabilities().clone();
        let cfg = &settings.streaming;
        let cursor = render::escape(&cfg.cursor, caps.dialect);
        let safe_limit = caps.max_message_len.saturating_sub(caps.length_unit.measure(&cursor) + 100).max(500);
        Self {
            interval: Duration::from_secs_f64(cfg.edit_interval.max(0.0)),
            threshold: cfg.buffer_threshold.max(1),
            progress_mode: settings.tool_progress,
            deliverer,
            adapter,
            caps,
            target,
            reply_to,
            event_id,
            cursor,
            safe_limit,
            response: String::new(),
            shown: Vec::new(),
            posted: 0,
            last_edit: Instant::now(),
            unsent_chars: 0,
            edits_disabled: false,
            strikes: 0,
            progress: None,
            tools_seen: HashSet::new(),
        }
    }

    /// Some streamed text arrived.
    pub(crate) async fn on_delta(&mut self, delta: &str) {
        self.response.push_str(delta);
        self.unsent_chars += delta.chars().count();
        let due = self.last_edit.elapsed() >= self.interval || self.unsent_chars >= self.threshold;
        if due {
            self.flush(true).await;
        }
    }

    /// The response rendered whole and split into the messages that show it, exactly as an
    /// answer sent without streaming is (only without counters, and leaving room for the
    /// cursor), so what the chat ends up showing is the same.
    fn parts(&self) -> (render::Doc, Vec<chunk::Part>) {
        let doc = render::document(&self.response, self.caps.dialect);
        let parts = chunk::split_parts(&doc, 0, self.safe_limit, self.caps.length_unit);
        (doc, parts)
    }

    /// Bring the chat up to date with the response: edit the messages whose part changed and
    /// post the parts that have none yet (`with_cursor` while more is coming).
    async fn flush(&mut self, with_cursor: bool) {
        let started = self.response.trim().chars().count();
        if started == 0 || (self.shown.is_empty() && with_cursor && started < FIRST_POST_MIN_CHARS) {
            return;
        }
        let (_, parts) = self.parts();
        let count = parts.len();
        for (i, part) in parts.into_iter().enumerate() {
            let text = if with_cursor && i + 1 == count { format!("{}{}", part.text, self.cursor) } else { part.text };
            match self.shown.get(i) {
                Some(shown) if shown.text == text => self.shown[i].visible = part.visible,
                Some(shown) => {
                    let Some(id) = shown.message_id.clone().filter(|_| !self.edits_disabled) else { break };
                    if !self.edit(&id, &text).await {
                        break;
                    }
                    self.shown[i] = Shown { message_id: Some(id), text, visible: part.visible };
                }
                None => {
                    if self.edits_disabled {
                        break;
                    }
                    match self.post(&text).await {
                        Some(message_id) => {
                            // A message without an id cannot be edited: the rest goes out at the end.
                            self.edits_disabled |= message_id.is_none();
                            self.shown.push(Shown { message_id, text, visible: part.visible });
                        }
                        None => break,
                    }
                }
            }
        }
        self.last_edit = Instant::now();
        self.unsent_chars = 0;
    }

    /// Post a new message; `Some(platform id)` once the platform has it.
    async fn post(&mut self, rendered: &str) -> Option<Option<String>> {
        let key = ReplyKey::Stream { event_id: self.event_id.clone(), n: self.posted };
        self.posted += 1;
        let first_part = key.part(0);
        if self.send_part(rendered, key).await != Delivery::Delivered {
            self.edits_disabled = true;
            return None;
        }
        // Replies thread under the user's message once; later messages follow it.
        self.reply_to = None;
        match self.deliverer.outbox.outbox_get(&first_part).await {
            Ok(Some(row)) => Some(row.platform_message_id),
            _ => Some(None),
        }
    }

    /// Send one message already rendered and within the limit, replying where the stream still
    /// replies; its `MEDIA:` tags stay text (the turn sends the files once, when it is complete).
    async fn send_part(&self, rendered: &str, key: ReplyKey) -> Delivery {
        let reply = Reply::rendered(self.target.clone(), rendered).replying_to(self.reply_to.clone());
        self.deliverer.send(reply, key).await
    }

    /// Edit a posted message; false when the platform refused.
    async fn edit(&mut self, message_id: &str, rendered: &str) -> bool {
        match self.adapter.edit(&self.target, message_id, rendered).await {
            Ok(()) => true,
            Err(SendError::RateLimited { retry_after }) => {
                self.strikes += 1;
                tracing::debug!(strikes = self.strikes, retry_after_ms = retry_after.as_millis() as u64, "edit rate limited");
                if self.strikes >= FLOOD_STRIKES {
                    tracing::info!("flood control: editing stops for this turn; the rest of the answer is sent at the end");
                    self.edits_disabled = true;
                }
                false
            }
            Err(e) => {
                tracing::info!(error = %e, "editing failed; the rest of the answer is sent at the end");
                self.edits_disabled = true;
                false
            }
        }
    }

    /// The model is calling tools: the text so far is complete, and a progress line may follow.
    pub(crate) async fn on_tool_call(&mut self, name: &str, arguments: &str) {
        let had_text = !self.response.trim().is_empty();
        self.complete_response().await;
        // Progress lines of consecutive tool rounds share one message; once text came between
        // them, the next line starts a new message below it.
        if had_text {
            self.progress = None;
        }
        self.response.clear();
        self.shown.clear();
        if !self.progress_mode.shows(self.tools_seen.insert(name.to_string())) {
            return;
        }
        let preview_len = if self.progress_mode == ToolProgress::Verbose { 200 } else { 40 };
        let line = format!("🔧 {name}{}", preview(arguments, preview_len));
        match self.progress.clone() {
            Some(Progress { message_id: Some(id), markdown }) if !self.edits_disabled => {
                let markdown = format!("{markdown}\n{line}");
                let rendered = render::render(&markdown, self.caps.dialect);
                if self.caps.length_unit.measure(&rendered) <= self.safe_limit {
                    if self.edit(&id, &rendered).await {
                        self.progress = Some(Progress { message_id: Some(id), markdown });
                    }
                    return;
                }
                self.post_progress(line).await;
            }
            _ => self.post_progress(line).await,
        }
    }

    async fn post_progress(&mut self, line: String) {
        let rendered = render::render(&line, self.caps.dialect);
        let message_id = self.post(&rendered).await.flatten();
        self.progress = Some(Progress { message_id, markdown: line });
    }

    /// Make the chat show the whole response, without the cursor: by edits while they work,
    /// then whatever it does not show yet goes out once, as new messages.
    async fn complete_response(&mut self) {
        if !self.edits_disabled {
            self.flush(false).await;
        }
        let (doc, parts) = self.parts();
        let complete = parts.len() <= self.shown.len() && parts.iter().zip(&self.shown).all(|(p, s)| p.text == s.text);
        if complete || self.response.trim().is_empty() {
            return;
        }
        // Best effort: take the cursor off the last message that shows one.
        if let Some(last) = self.shown.last().cloned()
            && let (Some(id), Some(text)) = (last.message_id, last.text.strip_suffix(self.cursor.as_str()))
            && !self.cursor.is_empty()
        {
            let _ = self.adapter.edit(&self.target, &id, text).await;
        }
        // The chat shows the response up to here, without a gap.
        let mut covered = 0;
        for shown in &self.shown {
            if shown.visible.start > covered {
                break;
            }
            covered = covered.max(shown.visible.end);
        }
        for part in chunk::split_parts(&doc, covered, self.safe_limit, self.caps.length_unit) {
            let key = ReplyKey::Tail { event_id: self.event_id.clone(), n: self.posted };
            self.posted += 1;
            self.send_part(&part.text, key).await;
            self.reply_to = None;
        }
    }

    /// The turn's answer is `final_text`. Returns true when the stream delivered it (the caller
    /// must not send it again); false when nothing of it was streamed.
    pub(crate) async fn finish(&mut self, final_text: &str) -> bool {
        if self.shown.is_empty() {
            // Nothing of this response reached the chat: the caller sends it normally.
            return false;
        }
        if self.response.trim() != final_text.trim() {
            tracing::debug!("final text differs from the streamed text; correcting the messages");
        }
        self.response = final_text.to_string();
        self.complete_response().await;
        true
    }
}

/// A short preview of tool arguments for a progress line.
fn preview(arguments: &str, max: usize) -> String {
    let value: serde_json::Value = serde_json::from_str(arguments).unwrap_or(serde_json::Value::Null);
    let first = value.as_object().and_then(|o| o.values().find_map(|v| v.as_str().map(str::to_string))).unwrap_or_default();
    let first = first.replace('\n', " ");
    if first.is_empty() {
        return String::new();
    }
    let cut: String = first.chars().take(max).collect();
    let ellipsis = if first.chars().count() > max { "…" } else { "" };
    format!(": `{cut}{ellipsis}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_are_short() {
        assert_eq!(preview(r#"{"command":"ls -la"}"#, 40), ": `ls -la`");
        assert!(preview(&format!(r#"{{"q":"{}"}}"#, "z".repeat(100)), 10).ends_with("…`"));
        assert_eq!(preview("{}", 40), "");
    }
}
