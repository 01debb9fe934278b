//! The sessions REST API (`/api/sessions…`): create, talk to, read and end conversations that
//! the gateway stores. Conversations are addressed through the gateway's [`SessionDirectory`]
//! with the same [`source_for`] as chat completions, so `X-Hermes-Session-Id: <id>` continues a
//! session created here.
//!
//! [`SessionDirectory`]: hermes_adapter::SessionDirectory

use crate::conversation::{idempotency_key, new_id, source_for, validate_id};
use crate::error::ApiError;
use crate::json_body::{body_rejection, parse_json};
use crate::pending::{ReplyEvent, ReplyMode};
use crate::server::{AppState, with_session_header};
use crate::sse::{self, SseFormat};
use crate::turn::{Turn, submit, usage_json, wait_whole};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use hermes_adapter::SessionDirectoryError;
use serde::Deserialize;
use serde_json::{Value, json};

const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 1000;

fn storage_error(err: SessionDirectoryError) -> ApiError {
    tracing::error!(error = %err, "api_server: session directory failed");
    ApiError::internal("The session store failed.").with_code("storage_error")
}

fn session_not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("Session '{id}' not found")).with_code("session_not_found")
}

/// `POST /api/sessions`
pub(crate) async fn create(State(state): State<AppState>) -> Result<Response, ApiError> {
    let id = new_id();
    state.ctx.sessions().open(&source_for(&id, None)).await.map_err(storage_error)?;
    Ok((StatusCode::CREATED, Json(json!({"session_id": id}))).into_response())
}

#[derive(Debug, Deserialize)]
struct PostMessage {
    input: String,
    #[serde(default)]
    stream: Option<bool>,
}

/// `POST /api/sessions/{id}/messages`
pub(crate) async fn post_message(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    validate_id(&id, "session_id")?;
    let body = body.map_err(body_rejection)?;
    let request: PostMessage = parse_json(&body)?;
    if request.input.trim().is_empty() {
        return Err(ApiError::bad_request("'input' must not be empty", "input"));
    }
    let exists = state.ctx.sessions().history(&source_for(&id, None), 1).await.map_err(storage_error)?;
    if exists.is_none() {
        return Err(session_not_found(&id));
    }
    let stream = request.stream.unwrap_or(false);
    let turn = Turn {
        conversation_id: id.clone(),
        user: None,
        text: request.input,
        context: Vec::new(),
        channel_prompt: None,
        idempotency_key: idempotency_key(&headers)?,
        mode: if stream { ReplyMode::Stream } else { ReplyMode::Whole },
    };
    let mut reply = submit(&state, turn).await?;
    let timeout = state.settings.request_timeout;
    let response = if stream {
        sse::response(reply, timeout, Vec::new(), SessionEvents { next_id: 1 })
    } else {
        let done = wait_whole(&mut reply, timeout).await?;
        Json(json!({
            "session_id": id,
            "role": "assistant",
            "content": done.content,
            "finish_reason": done.finish_reason,
            "usage": usage_json(&done.usage),
        }))
        .into_response()
    };
    Ok(with_session_header(response, &id))
}

/// The named, numbered events of a session stream.
struct SessionEvents {
    next_id: u64,
}

impl SessionEvents {
    fn event(&mut self, name: &str, data: Value) -> Event {
        let id = self.next_id;
        self.next_id += 1;
        Event::default().event(name).id(id.to_string()).data(data.to_string())
    }
}

impl SseFormat for SessionEvents {
    fn events(&mut self, event: ReplyEvent) -> Vec<Event> {
        let event = match event {
            ReplyEvent::Delta(text) => self.event("token", json!({"text": text})),
            ReplyEvent::ToolCall { id, name, arguments } => {
                self.event("tool_call", json!({"id": id, "name": name, "arguments": arguments}))
            }
            ReplyEvent::ToolResult { id, name, content } => self.event("tool_result", json!({"id": id, "name": name, "content": content})),
            ReplyEvent::Done(done) => self.event(
                "done",
                json!({
                    "finish_reason": done.finish_reason,
                    "usage": usage_json(&done.usage),
                    "content": done.content,
                }),
            ),
        };
        vec![event]
    }

    fn error(&mut self, error: ApiError) -> Vec<Event> {
        vec![self.event("error", error.body()["error"].clone())]
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct HistoryQuery {
    #[serde(default)]
    limit: Option<String>,
}

fn parse_limit(raw: Option<&str>) -> Result<usize, ApiError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_LIMIT);
    };
    let limit: usize =
        raw.trim().parse().map_err(|_| ApiError::bad_request(format!("'limit' must be a positive integer, got '{raw}'"), "limit"))?;
    if limit == 0 {
        return Err(ApiError::bad_request("'limit' must be at least 1", "limit"));
    }
    Ok(limit.min(MAX_LIMIT))
}

/// `GET /api/sessions/{id}/messages?limit=N`
pub(crate) async fn get_messages(
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    validate_id(&id, "session_id")?;
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text(), "query"))?;
    let limit = parse_limit(query.limit.as_deref())?;
    let messages =
        state.ctx.sessions().history(&source_for(&id, None), limit).await.map_err(storage_error)?.ok_or_else(|| session_not_found(&id))?;
    let messages: Vec<Value> = messages.iter().map(|m| json!({"role": m.role, "content": m.content, "timestamp": m.timestamp})).collect();
    Ok(Json(json!({"session_id": id, "messages": messages})).into_response())
}

/// `DELETE /api/sessions/{id}`
pub(crate) async fn delete(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    validate_id(&id, "session_id")?;
    if state.ctx.sessions().close(&source_for(&id, None)).await.map_err(storage_error)? {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(session_not_found(&id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_defaults_clamps_and_rejects() {
        assert_eq!(parse_limit(None).unwrap(), 50);
        assert_eq!(parse_limit(Some("7")).unwrap(), 7);
        assert_eq!(parse_limit(Some("5000")).unwrap(), 1000);
        assert_eq!(parse_limit(Some("0")).unwrap_err().param.as_deref(), Some("limit"));
        assert_eq!(parse_limit(Some("-1")).unwrap_err().param.as_deref(), Some("limit"));
    }
}
