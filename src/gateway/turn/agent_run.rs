//! Step 3, run the agent: build the model request (tools filtered for this event, the session's
//! scope, compression, steering) and follow the agent's events — text and tool calls go to the
//! [`Output`], tool messages and usage to the store as they happen — until the agent finishes.

use super::admit::AnswerTo;
use super::messages::new_message;
use super::output::Output;
use super::prepare::Prepared;
use crate::agent::tools::{SessionScope, ToolContext};
use crate::agent::turn::InTurnCompression;
use crate::agent::{ProviderError, SteeringInbox, TurnEvent, TurnOutcome, TurnRequest, TurnTools};
use crate::gateway::services::Services;
use crate::store::CallUsage;
use hermes_adapter::InboundEvent;
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

pub(super) async fn run_agent(
    services: &Arc<Services>,
    event: &InboundEvent,
    prepared: &mut Prepared,
    answer: &AnswerTo,
    controls: RunControls<'_>,
    output: &mut Output,
) -> Ran {
    let mut request = request(services, event, prepared, answer, &controls);
    request.stream = output.streams();
    controls.started.store(true, Ordering::Release);
    let mut events = services.agent.run_turn(request, controls.interrupt.clone());
    let session_id = &prepared.route.session_id;
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
                output.tool_call(services, answer, call.id, call.name, call.arguments).await;
            }
            TurnEvent::ToolResult { id, name, content, .. } => output.tool_result(answer, id, name, content).await,
            TurnEvent::Persist(m) => {
                let message = new_message(session_id, &event.event_id, &m, None);
                if let Err(e) = services.store.turn_record(session_id, vec![message], std::mem::take(&mut unrecorded)).await {
                    tracing::warn!(error = %e, "could not store a tool message");
                }
            }
            TurnEvent::CallUsage { model, usage } => {
                // Recorded with the next message the turn stores (one write instead of three).
                let cost_usd = services.cost_of(&model, &usage);
                unrecorded.push(CallUsage { model, usage, cost_usd });
            }
            TurnEvent::Compressed { tokens_before, tokens_after } => {
                tracing::info!(session_key = %prepared.route.session_key, tokens_before, tokens_after, "compressed inside the turn");
            }
            TurnEvent::FellBack { from, to, reason } => {
                tracing::warn!(%from, %to, %reason, session_key = %prepared.route.session_key, "continuing on a fallback model");
            }
            TurnEvent::Done(o) => break Ok(o),
            TurnEvent::Failed(e) => break Err(e),
        }
    };
    Ran { outcome, streamed, unrecorded }
}

/// The model request: the prepared messages, this event's tools in this session's scope.
fn request(
    services: &Arc<Services>,
    event: &InboundEvent,
    prepared: &mut Prepared,
    answer: &AnswerTo,
    controls: &RunControls<'_>,
) -> TurnRequest {
    let source = &event.source;
    let scope = SessionScope {
        session_id: prepared.route.session_id.clone(),
        session_key: prepared.route.session_key.clone(),
        platform: source.platform.to_string(),
        chat_id: source.chat_id.clone(),
        chat_name: source.chat_name.clone(),
        thread_id: source.thread_id.clone(),
        user_id: source.user_id.clone(),
        interactive: answer.caps.supports_async_delivery && answer.caps.read_live,
        is_admin: services.auth.is_admin(event),
    };
    let context = ToolContext {
        scope,
        paths: services.paths.clone(),
        settings: services.tool_settings.clone(),
        host: services.tool_host.clone(),
        approval: services.approval.clone(),
        delegation: None,
        cancel: controls.interrupt.clone(),
        call_id: String::new(),
        turn_id: event.event_id.clone(),
        fence: prepared.fence.clone(),
    };
    let mut request = TurnRequest::new(prepared.model.clone(), std::mem::take(&mut prepared.messages));
    request.fallbacks = services.fallbacks();
    request.tools = Some(TurnTools { filter: prepared.filter.clone(), context });
    request.tool_protocol = services.config.model.tool_protocol;
    request.steering = Some(controls.steering.clone());
    let c = &services.config.compression;
    request.compression = c.enabled.then(|| InTurnCompression {
        context_tokens: services.context_length(&prepared.model.model),
        threshold: c.threshold,
        protect_first: c.protect_first_n,
        protect_last: c.protect_last_n,
        target_ratio: c.target_ratio,
        summarizer: services.compression_model(&prepared.model),
    });
    request
}
