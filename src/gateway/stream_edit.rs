//! Edit-in-place streaming to a chat: the answer's text deltas become one message that is edited
//! as the text grows — coalesced to at most one edit per `streaming.edit_interval` (or every
//! `buffer_threshold` new characters), with a cursor while streaming, continuing in a new message
//! when the platform's length limit nears — plus tool-progress lines (`display.tool_progress`).
//! The final text is never delivered twice: when the stream already shows it, the final edit
//! just removes the cursor; when edits failed (flood control), only the unsent tail is sent.

use super::outbound::{self, Delivery};
use super::services::Services;
use crate::config::ToolProgress;
use hermes_adapter::markdown::render;
use hermes_adapter::{Capabilities, ChatTarget, PlatformAdapter, SendError};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Rate-limit answers to edits after which editing stops for the rest of the turn.
const FLOOD_STRIKES: u32 = 3;
/// Text shorter than this is held back before the first message, so a silence token or a
/// one-word start never flashes up.
const FIRST_POST_MIN_CHARS: usize = 12;

/// One message posted by the stream.
#[derive(Debug, Clone)]
struct Segment {
    message_id: Option<String>,
    /// The text this segment shows without the cursor (as confirmed by the platform).
    shown: String,
    /// The text it should show.
    text: String,
}

pub struct StreamEditor {
    services: Arc<Services>,
    adapter: Arc<dyn PlatformAdapter>,
    caps: Capabilities,
    target: ChatTarget,
    reply_to: Option<String>,
    key_base: String,
    interval: Duration,
    threshold: usize,
    cursor: String,
    safe_limit: usize,
    progress_mode: ToolProgress,
    /// Segments of the current model response (finished ones and the live last one).
    segments: Vec<Segment>,
    /// Serial of posted messages this turn (idempotency keys).
    posted: usize,
    last_edit: Instant,
    unsent_chars: usize,
    edits_disabled: bool,
    strikes: u32,
    progress: Option<Segment>,
    tools_seen: HashSet<String>,
}

impl StreamEditor {
    pub fn new(
        services: Arc<Services>,
        adapter: Arc<dyn PlatformAdapter>,
        target: ChatTarget,
        reply_to: Option<String>,
        key_base: String,
    ) -> Self {
        let caps = adapter.capabilities().clone();
        let cfg = &services.config.streaming;
        let cursor = cfg.cursor.clone();
        let safe_limit = caps.max_message_len.saturating_sub(cursor.chars().count() + 100).max(500);
        Self {
            interval: Duration::from_secs_f64(cfg.edit_interval.max(0.0)),
            threshold: cfg.buffer_threshold.max(1),
            progress_mode: services.config.display.tool_progress,
            services,
            adapter,
            caps,
            target,
            reply_to,
            key_base,
            cursor,
            safe_limit,
            segments: Vec::new(),
            posted: 0,
            last_edit: Instant::now(),
            unsent_chars: 0,
            edits_disabled: false,
            strikes: 0,
            progress: None,
            tools_seen: HashSet::new(),
        }
    }

    /// Whether the adapter and configuration call for edit-in-place streaming.
    pub fn wanted(services: &Services, caps: &Capabilities) -> bool {
        let s = &services.config.streaming;
        s.enabled && s.transport != "off" && caps.supports_edit && caps.supports_async_delivery
    }

    /// Some streamed text arrived.
    pub async fn on_delta(&mut self, delta: &str) {
        if self.segments.is_empty() {
            self.segments.push(Segment { message_id: None, shown: String::new(), text: String::new() });
        }
        let (unit, limit) = (self.caps.length_unit, self.safe_limit);
        let Some(live) = self.segments.last_mut() else { return };
        live.text.push_str(delta);
        self.unsent_chars += delta.chars().count();
        // Continue in a new message before the platform's limit.
        if unit.measure(&live.text) > limit {
            // Never cut before what the message already shows, or that part would appear twice.
            let cut = cut_point(&live.text, self.safe_limit, self.caps.length_unit).max(live.shown.len());
            let rest = live.text.split_off(cut);
            self.flush(false).await;
            self.segments.push(Segment { message_id: None, shown: String::new(), text: rest });
        }
        let due = self.last_edit.elapsed() >= self.interval || self.unsent_chars >= self.threshold;
        if due {
            self.flush(true).await;
        }
    }

    /// Show the live segment's text now (`with_cursor` while more is coming).
    async fn flush(&mut self, with_cursor: bool) {
        let Some(index) = self.segments.len().checked_sub(1) else { return };
        let seg = self.segments[index].clone();
        if seg.text.trim().is_empty() || (seg.message_id.is_none() && seg.text.trim().chars().count() < FIRST_POST_MIN_CHARS && with_cursor)
        {
            return;
        }
        let shown_text = if with_cursor { format!("{}{}", seg.text, self.cursor) } else { seg.text.clone() };
        match &seg.message_id {
            None if seg.shown.is_empty() => {
                if let Some(id) = self.post(&shown_text).await {
                    self.segments[index].message_id = Some(id);
                    self.segments[index].shown = seg.text.clone();
                }
            }
            None => {}
            Some(id) => {
                if self.edits_disabled {
                    return;
                }
                if self.edit(id, &shown_text).await {
                    self.segments[index].shown = seg.text.clone();
                }
            }
        }
        self.last_edit = Instant::now();
        self.unsent_chars = 0;
    }

    /// Post a new message; its platform id, when the platform gave one.
    async fn post(&mut self, markdown: &str) -> Option<String> {
        let key = format!("{}:stream{}", self.key_base, self.posted);
        self.posted += 1;
        let delivered = outbound::deliver_streamed_part(&self.services, &self.target, self.reply_to.as_deref(), markdown, &key).await;
        if delivered != Delivery::Delivered {
            self.edits_disabled = true;
            return None;
        }
        // Replies thread under the user's message once; later messages follow it.
        self.reply_to = None;
        match self.services.store.outbox_get(&format!("{key}:0")).await {
            Ok(Some(row)) => row.platform_message_id,
            _ => None,
        }
    }

    /// Edit a posted message; false when the platform refused.
    async fn edit(&mut self, message_id: &str, markdown: &str) -> bool {
        let rendered = render(markdown, self.caps.dialect);
        match self.adapter.edit(&self.target, message_id, &rendered).await {
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
    pub async fn on_tool_call(&mut self, name: &str, arguments: &str) {
        self.close_response().await;
        if !self.progress_mode.shows(self.tools_seen.insert(name.to_string())) {
            return;
        }
        let preview_len = if self.progress_mode == ToolProgress::Verbose { 200 } else { 40 };
        let line = format!("🔧 {name}{}", preview(arguments, preview_len));
        match self.progress.clone() {
            Some(Segment { message_id: Some(id), text, .. }) if !self.edits_disabled => {
                let text = format!("{text}\n{line}");
                if self.edit(&id, &text).await
                    && let Some(p) = self.progress.as_mut()
                {
                    p.text = text;
                }
            }
            _ => {
                let id = self.post(&line).await;
                self.progress = Some(Segment { message_id: id, shown: line.clone(), text: line });
            }
        }
    }

    /// Finish the segments of the current response (remove the cursor); the next text starts a
    /// new message below the progress lines.
    async fn close_response(&mut self) {
        if !self.edits_disabled {
            self.flush(false).await;
        }
        let tail = self.unconfirmed();
        if !tail.trim().is_empty() {
            self.send_tail(&tail).await;
        }
        // Progress lines of consecutive tool rounds share one message; once text came between
        // them, the next line starts a new message below it.
        if self.segments.iter().any(|s| !s.text.trim().is_empty()) {
            self.progress = None;
        }
        self.segments.clear();
    }

    /// The text of this response the platform does not show yet.
    fn unconfirmed(&self) -> String {
        self.segments.iter().map(|s| s.text.get(s.shown.len()..).unwrap_or_default()).collect()
    }

    async fn send_tail(&mut self, text: &str) {
        let key = format!("{}:tail{}", self.key_base, self.posted);
        self.posted += 1;
        outbound::deliver_streamed_part(&self.services, &self.target, self.reply_to.as_deref(), text, &key).await;
        self.reply_to = None;
    }

    /// The turn's answer is `final_text`. Returns true when the stream delivered it (the caller
    /// must not send it again); false when nothing of it was streamed.
    pub async fn finish(&mut self, final_text: &str) -> bool {
        if self.segments.iter().all(|s| s.message_id.is_none() && s.shown.is_empty()) {
            // Nothing of this response reached the chat: the caller sends it normally.
            return false;
        }
        let streamed: String = self.segments.iter().map(|s| s.text.as_str()).collect();
        if streamed.trim() != final_text.trim() {
            tracing::debug!("final text differs from the streamed text; correcting the last message");
            if let Some(live) = self.segments.last_mut() {
                let before: usize = streamed.len() - live.text.len();
                live.text = final_text.get(before..).map(str::to_string).unwrap_or_else(|| final_text.to_string());
            }
        }
        if !self.edits_disabled {
            self.flush(false).await;
        }
        // Whatever the platform has not confirmed goes out once, as new messages.
        let tail = self.unconfirmed();
        if self.edits_disabled && !tail.trim().is_empty() {
            // Best effort: take the cursor off the last message that shows text.
            if let Some(Segment { message_id: Some(id), shown, .. }) = self.segments.iter().rev().find(|s| s.message_id.is_some()).cloned()
            {
                let rendered = render(&shown, self.caps.dialect);
                let _ = self.adapter.edit(&self.target, &id, &rendered).await;
            }
        }
        if !tail.trim().is_empty() {
            self.send_tail(&tail).await;
        }
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

/// A byte index to split `text` at, at most `limit` units in, preferring a newline or a space.
fn cut_point(text: &str, limit: usize, unit: hermes_adapter::LengthUnit) -> usize {
    let mut used = 0;
    let mut hard = text.len();
    for (i, c) in text.char_indices() {
        used += unit.of_char(c);
        if used > limit {
            hard = i;
            break;
        }
    }
    let window = &text[..hard];
    window.rfind('\n').filter(|&i| i > hard / 2).or_else(|| window.rfind(' ').filter(|&i| i > hard / 2)).map(|i| i + 1).unwrap_or(hard)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::LengthUnit;

    #[test]
    fn cuts_prefer_line_breaks() {
        let text = format!("{}\n{}", "a".repeat(60), "b".repeat(60));
        assert_eq!(cut_point(&text, 100, LengthUnit::Chars), 61);
        assert_eq!(cut_point(&"x".repeat(50), 20, LengthUnit::Chars), 20);
    }

    #[test]
    fn previews_are_short() {
        assert_eq!(preview(r#"{"command":"ls -la"}"#, 40), ": `ls -la`");
        assert!(preview(&format!(r#"{{"q":"{}"}}"#, "z".repeat(100)), 10).ends_with("…`"));
        assert_eq!(preview("{}", 40), "");
    }
}
