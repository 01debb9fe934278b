//! Step 3, run the agent: build the model request (tools filtered for this event, the session's
//! scope, compression, steering) and follow the agent's events — text and tool calls go to the
//! [`Output`], tool messages and usage to the store as they happen — until the agent finishes.

use super::admit::AnswerTo;
use super::output::Output;
use super::prepare::Prepared;
use crate::agent::tools::SessionScope;
use crate::agent::{Agent, ChatMessage, ProviderError, SteeringInbox, TurnEvent, TurnOutcome, TurnRequest, TurnTools};
use crate::gateway::conversation::compaction::Compactor;
use crate::gateway::conversation::messages::new_message;
use crate::gateway::conversation::models::Models;
use crate::gateway::turn::tool_access::ToolAccess;
use crate::store::{CallUsage, RouteEntry, StoreError, Turns};
use hermes_adapter::{Capabilities, InboundEvent, Usage};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

/// How the agent's run ended, and what is left to record.
pub(super) struct Ran {
    pub outcome: Result<TurnOutcome, ProviderError>,
    /// The answer's text since the last tool call (what an interrupted turn keeps).
    pub streamed: String,
    /// Model calls whose usage is not stored yet (stored with the answer).
    pub unrecorded: Vec<CallUsage>,
}

/// What the turn runs with, besides the prepared request.
pub(super) struct RunControls<'a> {
    pub interrupt: &'a CancellationToken,
    /// Set once the model was asked (a later message then steers or interrupts this turn).
    pub started: &'a AtomicBool,
    pub steering: &'a SteeringInbox,
}

/// Where a turn writes as it runs: its messages, and each model call's usage at its price (kept
/// until the next message is stored, so that one write carries both). Scheduled runs keep their
/// sessions through it too.
pub(crate) struct Ledger<'a> {
    pub turns: &'a dyn Turns,
    pub models: &'a Models,
    pub session_id: &'a str,
    pub event_id: &'a str,
}

impl Ledger<'_> {
    /// Counts one model call at its price, to be stored with the next message.
    pub(crate) fn count(&self, unrecorded: &mut Vec<CallUsage>, model: String, usage: Usage) {
        let cost_usd = self.models.cost_of(&model, &usage);
        unrecorded.push(CallUsage { model, usage, cost_usd });
    }

    /// Stores `message` of the turn with the calls counted since the last one.
    pub(crate) async fn store(
        &self,
        unrecorded: &mut Vec<CallUsage>,
        message: &ChatMessage,
        finish_reason: Option<&str>,
    ) -> Result<(), StoreError> {
        let row = new_message(self.session_id, self.event_id, message, finish_reason);
        self.turns.turn_record(self.session_id, vec![row], std::mem::take(unrecorded)).await
    }
}

pub(super) async fn run_agent(
    agent: &Arc<Agent>,
    ledger: Ledger<'_>,
    mut request: TurnRequest,
    session_key: &str,
    answer: &AnswerTo,
    controls: RunControls<'_>,
    output: &mut Output,
) -> Ran {
    request.stream = output.streams();
    controls.started.store(true, Ordering::Release);
    let mut events = agent.run_turn(request, controls.interrupt.clone());
    let mut streamed = String::new();
    let mut unrecorded: Vec<CallUsage> = Vec::new();
    let outcome = loop {
        let Some(ev) = events.recv().await else {
            break Err(ProviderError::Fatal("the agent stopped unexpectedly".into()));
        };
        match ev {
            TurnEvent::TextDelta(delta) => {
                streamed.push_str(&delta);
                output.text(answer, &delta).await;
            }
            TurnEvent::ToolCall(call) => {
                streamed.clear();
                output.tool_call(answer, call.id, call.name, call.arguments).await;
            }
            TurnEvent::ToolResult { id, name, content, .. } => output.tool_result(answer, id, name, content).await,
            TurnEvent::Persist(m) => {
                if let Err(e) = ledger.store(&mut unrecorded, &m, None).await {
                    tracing::warn!(error = %e, "could not store a tool message");
                }
            }
            TurnEvent::CallUsage { model, usage } => ledger.count(&mut unrecorded, model, usage),
            TurnEvent::Compressed { tokens_before, tokens_after } => {
                tracing::info!(session_key, tokens_before, tokens_after, "compressed inside the turn");
            }
            TurnEvent::FellBack { from, to, reason } => {
                tracing::warn!(%from, %to, %reason, session_key, "continuing on a fallback model");
            }
            TurnEvent::Done(o) => break Ok(o),
            TurnEvent::Failed(e) => break Err(e),
        }
    };
    Ran { outcome, streamed, unrecorded }
}

/// The conversation the turn's tools act for.
pub(super) fn scope(event: &InboundEvent, route: &RouteEntry, caps: &Capabilities, is_admin: bool) -> SessionScope {
    let source = &event.source;
    SessionScope {
        session_id: route.session_id.clone(),
        session_key: route.session_key.clone(),
        platform: source.platform.to_string(),
        chat_id: source.chat_id.clone(),
        chat_name: source.chat_name.clone(),
        thread_id: source.thread_id.clone(),
        user_id: source.user_id.clone(),
        interactive: caps.supports_async_delivery && caps.people_reply,
        // A message's turn; scheduled runs build their scope with this set.
        scheduled: false,
        is_admin,
    }
}

/// The model request: the prepared messages, this event's tools in this session's scope.
pub(super) fn request(
    models: &Models,
    tools: &ToolAccess,
    compactor: &Compactor,
    scope: SessionScope,
    event: &InboundEvent,
    prepared: &mut Prepared,
    controls: &RunControls<'_>,
) -> TurnRequest {
    let context = tools.context(scope, &event.event_id, prepared.fence.clone(), controls.interrupt.clone());
    let mut request = TurnRequest::new(prepared.model.clone(), std::mem::take(&mut prepared.messages));
    request.fallbacks = models.fallbacks();
    request.tools = Some(TurnTools { filter: prepared.filter.clone(), context });
    request.tool_protocol = models.tool_protocol();
    request.steering = Some(controls.steering.clone());
    request.compression = compactor.in_turn(&prepared.model);
    request
}
