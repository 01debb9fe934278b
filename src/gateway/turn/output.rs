//! How an answer leaves, chosen once per turn from the platform's capabilities: one message
//! edited in place as it is written, incremental events to a client, a line per tool used and
//! then the answer, or only the final answer. The turn's other steps never ask which platform
//! or chat type they serve.

use super::admit::AnswerTo;
use crate::config::ToolProgress;
use crate::gateway::delivery::deliverer::Deliverer;
use crate::gateway::delivery::reply::Finish;
use crate::gateway::delivery::reply::{Reply, ReplyKey};
use crate::gateway::delivery::stream_edit::{StreamEditor, StreamSettings};
use hermes_adapter::media::extract_media_tags;
use hermes_adapter::{SendError, StreamEvent, StreamStyle};
use std::collections::HashSet;
use std::sync::Arc;

pub(super) enum Output {
    /// One message edited in place while the answer is written (chat platforms that can edit).
    EditInPlace(Box<StreamEditor>),
    /// Incremental events through the adapter (an HTTP client's event stream); `gone` once the
    /// client left, after which nothing more is streamed.
    Events { gone: bool },
    /// A line per tool used, then the answer (chats read live that cannot edit, or with
    /// streaming off).
    ProgressLines { sent: usize, seen: HashSet<String>, mode: ToolProgress },
    /// Only the final answer (a webhook callback, a request/response client).
    FinalOnly,
}

/// Which [`Output`] a platform gets, from what it can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strategy {
    EditInPlace,
    Events,
    ProgressLines,
    FinalOnly,
}

impl Strategy {
    /// `edits_wanted`: streaming by edits is on for this platform (see
    /// [`StreamSettings::edits_wanted`]).
    pub(super) fn for_caps(caps: &hermes_adapter::Capabilities, edits_wanted: bool) -> Strategy {
        match caps.streaming {
            StreamStyle::Events => Strategy::Events,
            StreamStyle::EditInPlace if edits_wanted => Strategy::EditInPlace,
            _ if caps.supports_async_delivery && caps.read_live => Strategy::ProgressLines,
            _ => Strategy::FinalOnly,
        }
    }
}

impl Output {
    /// `voice_only`: the answer will be spoken instead of written (`/voice only`), so it is not
    /// streamed into an edited message either.
    pub(super) fn choose(deliverer: &Arc<Deliverer>, settings: &StreamSettings, answer: &AnswerTo, voice_only: bool) -> Output {
        let edits_wanted = settings.edits_wanted(&answer.caps) && !voice_only;
        match Strategy::for_caps(&answer.caps, edits_wanted) {
            Strategy::EditInPlace => Output::EditInPlace(Box::new(StreamEditor::new(
                deliverer.clone(),
                settings,
                answer.adapter.clone(),
                answer.target.clone(),
                answer.reply_to.clone(),
                answer.event_id.clone(),
            ))),
            Strategy::Events => Output::Events { gone: false },
            Strategy::ProgressLines => Output::ProgressLines { sent: 0, seen: HashSet::new(), mode: settings.tool_progress },
            Strategy::FinalOnly => Output::FinalOnly,
        }
    }

    /// Whether the model's answer should arrive token by token.
    pub(super) fn streams(&self) -> bool {
        matches!(self, Output::EditInPlace(_) | Output::Events { .. })
    }

    pub(super) async fn text(&mut self, answer: &AnswerTo, delta: &str) {
        match self {
            Output::EditInPlace(editor) => editor.on_delta(delta).await,
            Output::Events { .. } => self.stream(answer, StreamEvent::Token { text: delta.to_string() }).await,
            _ => {}
        }
    }

    pub(super) async fn tool_call(&mut self, answer: &AnswerTo, id: String, name: String, arguments: String) {
        match self {
            Output::EditInPlace(editor) => editor.on_tool_call(&name, &arguments).await,
            Output::ProgressLines { sent, seen, mode } => {
                if mode.shows(seen.insert(name.clone())) {
                    let key = ReplyKey::Progress { event_id: answer.event_id.clone(), n: *sent };
                    answer.deliverer.queue(Reply::markdown(answer.target.clone(), format!("🔧 {name}")), key).await;
                    *sent += 1;
                }
            }
            Output::Events { .. } => self.stream(answer, StreamEvent::ToolCall { id, name, arguments }).await,
            Output::FinalOnly => {}
        }
    }

    pub(super) async fn tool_result(&mut self, answer: &AnswerTo, id: String, name: String, content: String) {
        if let Output::Events { .. } = self {
            self.stream(answer, StreamEvent::ToolResult { id, name, content }).await;
        }
    }

    async fn stream(&mut self, answer: &AnswerTo, event: StreamEvent) {
        if let Output::Events { gone: gone @ false } = self
            && let Err(SendError::Gone(_)) = answer.adapter.stream(&answer.target, answer.reply_to.as_deref(), &event).await
        {
            *gone = true;
        }
    }

    /// Deliver the final answer (queued: the turn does not wait out a platform's outage; its
    /// chat's lane keeps the order). Where it was streamed into an edited message, that message
    /// shows the words and files named by `MEDIA:` tags follow it.
    pub(super) async fn answer(&mut self, answer: &AnswerTo, text: &str, finish: Finish) {
        if let Output::EditInPlace(editor) = self {
            let (words, tags) = extract_media_tags(text);
            if editor.finish(&words).await {
                if !tags.is_empty() {
                    let only_tags: String = tags.iter().map(|t| format!("{t}\n")).collect();
                    let key = ReplyKey::Media(answer.event_id.clone());
                    answer.deliverer.queue(Reply::markdown(answer.target.clone(), only_tags), key).await;
                }
                return;
            }
        }
        answer.deliverer.queue(answer.reply(text).finishing(Some(finish)), answer.key()).await;
    }

    /// The user stopped the turn: an edited message keeps what was written; a client waiting for
    /// the answer gets it, cut short.
    pub(super) async fn interrupted(&mut self, answer: &AnswerTo, streamed: &str) {
        if let Output::EditInPlace(editor) = self
            && !streamed.is_empty()
        {
            editor.finish(streamed).await;
        }
        if !answer.caps.supports_async_delivery {
            let finish = Finish { usage: Default::default(), finish_reason: "interrupted".into() };
            answer.deliverer.queue(answer.reply(streamed).finishing(Some(finish)), answer.key()).await;
        }
    }
}
