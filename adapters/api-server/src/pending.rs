//! Requests waiting for the gateway's answer, keyed by request id.
//!
//! An HTTP handler registers its request here *before* handing the event to the gateway (which
//! may answer before `accept` even returns) and then reads [`ReplyEvent`]s from its
//! [`PendingReply`]. The gateway's `stream()` / `send()` calls land in [`PendingReplies`], which
//! turns them into those events. This module owns the bookkeeping that makes a stream read
//! right: the final `send` carries the whole answer, so only the part not already streamed as
//! tokens is emitted.

use hermes_adapter::{OutboundMessage, SendError, StreamEvent, Usage};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::mpsc;

/// What a waiting request receives.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ReplyEvent {
    /// Text to append to the answer being written.
    Delta(String),
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
    ToolResult {
        id: String,
        name: String,
        content: String,
    },
    /// The answer is complete; nothing follows.
    Done(FinalReply),
}

/// The end of a turn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FinalReply {
    /// The whole answer (several messages of one reply joined with blank lines).
    pub content: String,
    pub usage: Usage,
    pub finish_reason: String,
}

/// Whether the client reads the answer as it is written or all at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyMode {
    Stream,
    Whole,
}

/// Between two messages of one reply (a command answered in several parts).
fn separator_after(text: &str) -> &'static str {
    if text.is_empty() || text.ends_with("\n\n") {
        ""
    } else if text.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    }
}

struct Entry {
    mode: ReplyMode,
    // Unbounded on purpose: a bounded channel would let one slow client stall the session actor
    // that delivers to it, and what flows here is one answer, already bounded by the model.
    tx: mpsc::UnboundedSender<ReplyEvent>,
    /// Everything already sent to the client as content deltas.
    emitted: String,
    /// Tokens streamed since the last tool event or message part: the final text of a turn that
    /// used tools is the last assistant message, which starts here rather than at `emitted`.
    segment: String,
    /// Non-final messages of this reply, in order.
    parts: Vec<String>,
}

impl Entry {
    fn emit(&self, event: ReplyEvent) -> Result<(), ()> {
        self.tx.send(event).map_err(|_| ())
    }

    fn alive(&self) -> Result<(), ()> {
        if self.tx.is_closed() { Err(()) } else { Ok(()) }
    }

    fn token(&mut self, text: &str) -> Result<(), ()> {
        if text.is_empty() {
            return Ok(());
        }
        self.emitted.push_str(text);
        self.segment.push_str(text);
        self.emit(ReplyEvent::Delta(text.to_string()))
    }

    fn tool(&mut self, event: ReplyEvent) -> Result<(), ()> {
        self.segment.clear();
        self.emit(event)
    }

    fn part(&mut self, text: &str) -> Result<(), ()> {
        self.parts.push(text.to_string());
        if self.mode == ReplyMode::Whole || text.is_empty() {
            // Nothing to send yet, but a client that already left is still reported.
            return self.alive();
        }
        let delta = format!("{}{text}", separator_after(&self.emitted));
        self.emitted.push_str(&delta);
        self.segment.clear();
        self.emit(ReplyEvent::Delta(delta))
    }

    /// The part of the final text the client has not seen yet.
    fn unstreamed<'a>(&self, final_text: &'a str) -> std::borrow::Cow<'a, str> {
        use std::borrow::Cow;
        if self.emitted.is_empty() {
            return Cow::Borrowed(final_text);
        }
        if let Some(rest) = final_text.strip_prefix(self.emitted.as_str()) {
            return Cow::Borrowed(rest);
        }
        if !self.segment.is_empty()
            && let Some(rest) = final_text.strip_prefix(self.segment.as_str())
        {
            return Cow::Borrowed(rest);
        }
        if final_text.is_empty() || self.emitted.ends_with(final_text) {
            return Cow::Borrowed("");
        }
        // Unrelated to what was streamed (an error notice replacing a broken answer): the client
        // must still see it, as a message of its own.
        Cow::Owned(format!("{}{final_text}", separator_after(&self.emitted)))
    }

    fn finish(&mut self, msg: &OutboundMessage) -> Result<(), ()> {
        let mut content = String::new();
        for part in self.parts.iter().map(String::as_str).chain(std::iter::once(msg.text.as_str())) {
            if !part.is_empty() {
                content.push_str(separator_after(&content));
                content.push_str(part);
            }
        }
        if self.mode == ReplyMode::Stream {
            let rest = self.unstreamed(&msg.text);
            if !rest.is_empty() {
                self.emit(ReplyEvent::Delta(rest.into_owned()))?;
            }
        }
        self.emit(ReplyEvent::Done(FinalReply {
            content,
            usage: msg.usage.unwrap_or_default(),
            finish_reason: msg.finish_reason.clone().unwrap_or_else(|| "stop".to_string()),
        }))
    }
}

fn gone(request_id: &str) -> SendError {
    SendError::Gone(format!("no client is waiting for request {request_id}"))
}

/// The registry shared by the HTTP handlers and the adapter's send side.
#[derive(Clone, Default)]
pub(crate) struct PendingReplies {
    inner: Arc<Mutex<HashMap<String, Entry>>>,
}

impl PendingReplies {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding the lock cannot leave the map half-updated (every critical
        // section is a single insert, lookup or remove plus channel sends), so keep using it.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Start waiting for the answer to `request_id`. The entry lives until the final message is
    /// delivered or the returned handle is dropped (the client went away).
    pub(crate) fn register(&self, request_id: String, mode: ReplyMode) -> PendingReply {
        let (tx, rx) = mpsc::unbounded_channel();
        let entry = Entry { mode, tx, emitted: String::new(), segment: String::new(), parts: Vec::new() };
        self.lock().insert(request_id.clone(), entry);
        PendingReply { request_id, replies: self.clone(), rx }
    }

    /// Deliver one incremental event.
    pub(crate) fn stream(&self, request_id: &str, event: &StreamEvent) -> Result<(), SendError> {
        let mut map = self.lock();
        let entry = map.get_mut(request_id).ok_or_else(|| gone(request_id))?;
        let delivered = if entry.mode == ReplyMode::Whole {
            // The client wants the answer at once: progress is dropped, but a client that
            // already left is still reported so the gateway stops streaming to it.
            entry.alive()
        } else {
            match event {
                StreamEvent::Token { text } => entry.token(text),
                StreamEvent::ToolCall { id, name, arguments } => {
                    entry.tool(ReplyEvent::ToolCall { id: id.clone(), name: name.clone(), arguments: arguments.clone() })
                }
                StreamEvent::ToolResult { id, name, content } => {
                    entry.tool(ReplyEvent::ToolResult { id: id.clone(), name: name.clone(), content: content.clone() })
                }
            }
        };
        if delivered.is_err() {
            map.remove(request_id);
            return Err(gone(request_id));
        }
        Ok(())
    }

    /// Deliver one message of the answer; the final one completes the request.
    pub(crate) fn send(&self, msg: &OutboundMessage) -> Result<(), SendError> {
        let request_id = msg
            .reply_to
            .as_deref()
            .ok_or_else(|| SendError::Gone("the API server only answers requests; reply_to is empty".to_string()))?;
        let mut map = self.lock();
        let entry = map.get_mut(request_id).ok_or_else(|| gone(request_id))?;
        let delivered = if msg.is_final { entry.finish(msg) } else { entry.part(&msg.text) };
        if msg.is_final || delivered.is_err() {
            map.remove(request_id);
        }
        delivered.map_err(|()| gone(request_id))
    }

    /// Whether a client waits here for the answer to `request_id`.
    pub(crate) fn is_waiting(&self, request_id: &str) -> bool {
        self.lock().contains_key(request_id)
    }

    fn forget(&self, request_id: &str) {
        self.lock().remove(request_id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// One request's side of the registry. Dropping it (the client disconnected, the handler timed
/// out) unregisters the request, so later deliveries for it fail with [`SendError::Gone`].
pub(crate) struct PendingReply {
    request_id: String,
    replies: PendingReplies,
    rx: mpsc::UnboundedReceiver<ReplyEvent>,
}

impl PendingReply {
    pub(crate) fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The next event; `None` once the final one has been read.
    pub(crate) async fn recv(&mut self) -> Option<ReplyEvent> {
        self.rx.recv().await
    }

    /// Wait for the whole answer, ignoring progress.
    pub(crate) async fn final_reply(&mut self) -> Option<FinalReply> {
        while let Some(event) = self.recv().await {
            if let ReplyEvent::Done(reply) = event {
                return Some(reply);
            }
        }
        None
    }
}

impl Drop for PendingReply {
    fn drop(&mut self) {
        self.replies.forget(&self.request_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::{ChatTarget, Platform};

    fn token(text: &str) -> StreamEvent {
        StreamEvent::Token { text: text.to_string() }
    }

    fn message(id: &str, text: &str, is_final: bool) -> OutboundMessage {
        OutboundMessage {
            target: ChatTarget { platform: Platform::new("api_server"), chat_id: "c".into(), thread_id: None },
            text: text.to_string(),
            reply_to: Some(id.to_string()),
            idempotency_key: "k".into(),
            is_final,
            usage: Some(Usage { prompt_tokens: 5, completion_tokens: 2, cached_tokens: 0, cache_write_tokens: 0 }),
            finish_reason: is_final.then(|| "stop".to_string()),
            buttons: Vec::new(),
            file: None,
        }
    }

    async fn drain(reply: &mut PendingReply) -> (String, FinalReply) {
        let mut streamed = String::new();
        loop {
            match reply.recv().await {
                Some(ReplyEvent::Delta(d)) => streamed.push_str(&d),
                Some(ReplyEvent::Done(f)) => return (streamed, f),
                Some(_) => {}
                None => panic!("channel closed before Done"),
            }
        }
    }

    #[tokio::test]
    async fn final_repeating_streamed_text_emits_only_the_rest() {
        let replies = PendingReplies::default();
        let mut reply = replies.register("r1".into(), ReplyMode::Stream);
        replies.stream("r1", &token("Hel")).unwrap();
        replies.stream("r1", &token("lo")).unwrap();
        replies.send(&message("r1", "Hello world", true)).unwrap();
        let (streamed, done) = drain(&mut reply).await;
        assert_eq!(streamed, "Hello world");
        assert_eq!(done.content, "Hello world");
        assert_eq!(replies.len(), 0);
    }

    #[tokio::test]
    async fn nothing_streamed_emits_everything() {
        let replies = PendingReplies::default();
        let mut reply = replies.register("r".into(), ReplyMode::Stream);
        replies.send(&message("r", "All at once", true)).unwrap();
        assert_eq!(drain(&mut reply).await.0, "All at once");
    }

    #[tokio::test]
    async fn final_answer_after_tools_is_matched_against_its_own_segment() {
        let replies = PendingReplies::default();
        let mut reply = replies.register("r".into(), ReplyMode::Stream);
        replies.stream("r", &token("Let me check. ")).unwrap();
        let call = StreamEvent::ToolCall { id: "t1".into(), name: "clock".into(), arguments: "{}".into() };
        replies.stream("r", &call).unwrap();
        replies.stream("r", &token("It is ")).unwrap();
        replies.send(&message("r", "It is noon.", true)).unwrap();
        let (streamed, done) = drain(&mut reply).await;
        assert_eq!(streamed, "Let me check. It is noon.");
        assert_eq!(done.content, "It is noon.");
    }

    #[tokio::test]
    async fn fully_streamed_final_adds_nothing() {
        let replies = PendingReplies::default();
        let mut reply = replies.register("r".into(), ReplyMode::Stream);
        replies.stream("r", &token("Done.")).unwrap();
        let call = StreamEvent::ToolResult { id: "t".into(), name: "x".into(), content: "ok".into() };
        replies.stream("r", &call).unwrap();
        replies.send(&message("r", "Done.", true)).unwrap();
        assert_eq!(drain(&mut reply).await.0, "Done.");
    }

    #[tokio::test]
    async fn unrelated_final_text_is_shown_as_its_own_paragraph() {
        let replies = PendingReplies::default();
        let mut reply = replies.register("r".into(), ReplyMode::Stream);
        replies.stream("r", &token("Partial")).unwrap();
        replies.send(&message("r", "The agent failed.", true)).unwrap();
        assert_eq!(drain(&mut reply).await.0, "Partial\n\nThe agent failed.");
    }

    #[tokio::test]
    async fn parts_are_appended_in_both_modes() {
        for mode in [ReplyMode::Stream, ReplyMode::Whole] {
            let replies = PendingReplies::default();
            let mut reply = replies.register("r".into(), mode);
            replies.send(&message("r", "part one", false)).unwrap();
            replies.send(&message("r", "part two", true)).unwrap();
            let (streamed, done) = drain(&mut reply).await;
            assert_eq!(done.content, "part one\n\npart two");
            if mode == ReplyMode::Stream {
                assert_eq!(streamed, done.content);
            } else {
                assert_eq!(streamed, "");
            }
        }
    }

    #[tokio::test]
    async fn whole_mode_ignores_progress() {
        let replies = PendingReplies::default();
        let mut reply = replies.register("r".into(), ReplyMode::Whole);
        replies.stream("r", &token("ignored")).unwrap();
        replies.send(&message("r", "answer", true)).unwrap();
        assert_eq!(
            reply.recv().await.unwrap(),
            ReplyEvent::Done(FinalReply {
                content: "answer".into(),
                usage: Usage { prompt_tokens: 5, completion_tokens: 2, cached_tokens: 0, cache_write_tokens: 0 },
                finish_reason: "stop".into(),
            })
        );
    }

    #[test]
    fn unknown_or_dropped_requests_are_gone() {
        let replies = PendingReplies::default();
        assert!(matches!(replies.send(&message("nope", "x", true)), Err(SendError::Gone(_))));
        let reply = replies.register("r".into(), ReplyMode::Stream);
        drop(reply);
        assert_eq!(replies.len(), 0);
        assert!(matches!(replies.stream("r", &token("x")), Err(SendError::Gone(_))));
        let mut no_reply_to = message("r", "x", true);
        no_reply_to.reply_to = None;
        assert!(matches!(replies.send(&no_reply_to), Err(SendError::Gone(_))));
    }

    /// A replica behind a load balancer delivers only the answers of requests waiting on it:
    /// another replica's request, or one whose client left or got its answer, is not here.
    #[test]
    fn a_request_waits_here_from_its_registration_to_its_final_part() {
        let replies = PendingReplies::default();
        assert!(!replies.is_waiting("r"), "another replica's request");
        let reply = replies.register("r".into(), ReplyMode::Whole);
        assert!(replies.is_waiting("r"));
        replies.send(&message("r", "answer", true)).unwrap();
        assert!(!replies.is_waiting("r"), "answered");
        drop(reply);
        let left = replies.register("s".into(), ReplyMode::Stream);
        drop(left);
        assert!(!replies.is_waiting("s"), "the client left");
    }

    #[test]
    fn a_closed_receiver_is_gone_and_forgotten() {
        let replies = PendingReplies::default();
        let mut reply = replies.register("r".into(), ReplyMode::Whole);
        reply.rx.close();
        assert!(matches!(replies.stream("r", &token("x")), Err(SendError::Gone(_))));
        assert_eq!(replies.len(), 0);
    }
}
