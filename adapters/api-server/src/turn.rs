//! Handing one client message to the gateway as an [`InboundEvent`] and waiting for its answer;
//! shared by chat completions and the sessions API so both submit turns the same way.

use crate::conversation::{PLATFORM, new_id, source_for};
use crate::error::ApiError;
use crate::pending::{FinalReply, PendingReply, ReplyMode};
use crate::server::AppState;
use axum::http::StatusCode;
use hermes_adapter::{AcceptError, AcceptOutcome, ContextMessage, InboundEvent, Usage};
use serde_json::{Value, json};
use std::time::Duration;

/// One message for the gateway.
pub(crate) struct Turn {
    pub conversation_id: String,
    pub user: Option<String>,
    pub text: String,
    pub context: Vec<ContextMessage>,
    pub channel_prompt: Option<String>,
    pub idempotency_key: Option<String>,
    pub mode: ReplyMode,
}

/// Register the request, then store the event in the gateway's inbox.
pub(crate) async fn submit(state: &AppState, turn: Turn) -> Result<PendingReply, ApiError> {
    let request_id = new_id();
    let event_id = match &turn.idempotency_key {
        Some(key) => format!("{PLATFORM}:idem:{key}"),
        None => format!("{PLATFORM}:{request_id}"),
    };
    // Registered first: the gateway may answer before `accept` returns.
    let reply = state.pending.register(request_id.clone(), turn.mode);
    let mut event = InboundEvent::text(event_id, source_for(&turn.conversation_id, turn.user.as_deref()), turn.text);
    event.message_id = Some(request_id);
    event.context = turn.context;
    event.channel_prompt = turn.channel_prompt;
    // The bearer key (or the loopback opt-in) already authenticated the client.
    event.authorized_upstream = true;
    match state.ctx.accept(event).await {
        Ok(AcceptOutcome::Accepted) => Ok(reply),
        Ok(AcceptOutcome::Duplicate) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "A request with this Idempotency-Key was already accepted; its answer is in the conversation history.",
        )
        .with_param("Idempotency-Key")
        .with_code("duplicate_request")),
        Err(AcceptError::ShuttingDown) => {
            Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "The gateway is shutting down; retry shortly.").with_code("shutting_down"))
        }
        Err(AcceptError::Storage(detail)) => {
            tracing::error!(%detail, "api_server: the inbox refused a request");
            Err(ApiError::internal("The gateway could not store the request.").with_code("storage_error"))
        }
    }
}

/// The error sent when the agent stays silent for `timeout`.
pub(crate) fn timeout_error(timeout: Duration) -> ApiError {
    ApiError::new(StatusCode::GATEWAY_TIMEOUT, format!("The agent did not answer within {} s.", timeout.as_secs_f32())).with_code("timeout")
}

/// Wait for the whole answer.
pub(crate) async fn wait_whole(reply: &mut PendingReply, timeout: Duration) -> Result<FinalReply, ApiError> {
    match tokio::time::timeout(timeout, reply.final_reply()).await {
        Ok(Some(done)) => Ok(done),
        // The registry only closes a request's channel after its final message.
        Ok(None) => Err(ApiError::internal("The request ended without an answer.")),
        Err(_) => Err(timeout_error(timeout)),
    }
}

/// Usage in OpenAI's shape.
pub(crate) fn usage_json(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total(),
    })
}
