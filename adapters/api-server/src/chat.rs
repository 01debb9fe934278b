//! `POST /v1/chat/completions`: OpenAI Chat Completions requests in, one gateway turn out, and
//! the answer back as a `chat.completion` object or a stream of `chat.completion.chunk`s.

use crate::conversation::{conversation_id, idempotency_key, validate_id};
use crate::error::ApiError;
use crate::json_body::{body_rejection, parse_json};
use crate::pending::{ReplyEvent, ReplyMode};
use crate::server::{AppState, unix_now, with_session_header};
use crate::sse::{self, SseFormat};
use crate::turn::{Turn, submit, usage_json, wait_whole};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use hermes_adapter::ContextMessage;
use serde::Deserialize;
use serde_json::{Value, json};

/// SSE event name for tool progress; standard OpenAI clients skip named events.
const TOOL_PROGRESS_EVENT: &str = "hermes.tool.progress";

#[derive(Debug, Deserialize)]
struct ChatRequest {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    user: Option<String>,
}

#[derive(Debug, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct ChatMessage {
    role: String,
    // Kept raw: string, array of parts or null, with errors that say which part is wrong.
    #[serde(default)]
    content: Option<Value>,
}

/// A request reduced to what the gateway needs.
#[derive(Debug, PartialEq)]
struct ChatTurn {
    model: String,
    text: String,
    context: Vec<ContextMessage>,
    channel_prompt: Option<String>,
    stream: bool,
    include_usage: bool,
    user: Option<String>,
}

/// The text of `messages[index].content`.
fn content_text(content: Option<&Value>, index: usize) -> Result<String, ApiError> {
    let field = format!("messages[{index}].content");
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, part) in parts.iter().enumerate() {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("<missing>");
                if kind != "text" {
                    return Err(ApiError::bad_request(
                        format!("Unsupported content part type '{kind}' in {field}[{j}]; only 'text' parts are supported"),
                        format!("{field}[{j}].type"),
                    ));
                }
                let text = part
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::bad_request(format!("{field}[{j}].text must be a string"), format!("{field}[{j}].text")))?;
                texts.push(text);
            }
            Ok(texts.join("\n"))
        }
        Some(_) => Err(ApiError::bad_request(format!("{field} must be a string or an array of content parts"), field)),
    }
}

fn parse_chat(request: ChatRequest, default_model: &str) -> Result<ChatTurn, ApiError> {
    let Some(last_index) = request.messages.len().checked_sub(1) else {
        return Err(ApiError::bad_request("'messages' must contain at least one message", "messages"));
    };
    let mut prompts = Vec::new();
    let mut context = Vec::new();
    let mut text = String::new();
    for (i, message) in request.messages.iter().enumerate() {
        let content = content_text(message.content.as_ref(), i)?;
        if i == last_index {
            if message.role != "user" {
                return Err(ApiError::bad_request("messages[-1].role must be \"user\"", "messages[-1].role"));
            }
            if content.trim().is_empty() {
                return Err(ApiError::bad_request("messages[-1].content must not be empty", "messages[-1].content"));
            }
            text = content;
            continue;
        }
        match message.role.as_str() {
            // `developer` is the newer name of `system` in OpenAI's API.
            "system" | "developer" => {
                if !content.trim().is_empty() {
                    prompts.push(content);
                }
            }
            "user" | "assistant" => {
                if !content.is_empty() {
                    context.push(ContextMessage { role: message.role.clone(), content });
                }
            }
            // Tool traffic of an earlier client-side loop: the gateway runs its own tools.
            "tool" | "function" => {}
            other => {
                return Err(ApiError::bad_request(
                    format!("messages[{i}].role \"{other}\" is not supported"),
                    format!("messages[{i}].role"),
                ));
            }
        }
    }
    let user = request.user.filter(|u| !u.trim().is_empty());
    if let Some(user) = &user {
        validate_id(user, "user")?;
    }
    let stream = request.stream.unwrap_or(false);
    Ok(ChatTurn {
        model: request.model.filter(|m| !m.trim().is_empty()).unwrap_or_else(|| default_model.to_string()),
        text,
        context,
        channel_prompt: (!prompts.is_empty()).then(|| prompts.join("\n\n")),
        stream,
        include_usage: stream && request.stream_options.and_then(|o| o.include_usage).unwrap_or(false),
        user,
    })
}

pub(crate) async fn completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(body_rejection)?;
    let chat = parse_chat(parse_json(&body)?, &state.settings.model_name)?;
    let conversation = conversation_id(&headers, chat.user.as_deref())?;
    let turn = Turn {
        conversation_id: conversation.clone(),
        user: chat.user.clone(),
        text: chat.text,
        context: chat.context,
        channel_prompt: chat.channel_prompt,
        idempotency_key: idempotency_key(&headers)?,
        mode: if chat.stream { ReplyMode::Stream } else { ReplyMode::Whole },
    };
    let mut reply = submit(&state, turn).await?;
    let id = format!("chatcmpl-{}", reply.request_id());
    let created = unix_now();
    let timeout = state.settings.request_timeout;
    let response = if chat.stream {
        let chunks = Chunks { id, created, model: chat.model, include_usage: chat.include_usage };
        let initial = vec![chunks.chunk(json!({"role": "assistant"}), None)];
        sse::response(reply, timeout, initial, chunks)
    } else {
        let done = wait_whole(&mut reply, timeout).await?;
        Json(json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": chat.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": done.content},
                "finish_reason": done.finish_reason,
            }],
            "usage": usage_json(&done.usage),
        }))
        .into_response()
    };
    Ok(with_session_header(response, &conversation))
}

/// The `chat.completion.chunk` stream of one request.
struct Chunks {
    id: String,
    created: i64,
    model: String,
    include_usage: bool,
}

impl Chunks {
    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Event {
        let mut chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        });
        if self.include_usage {
            // OpenAI sends `usage: null` on every chunk but the last when usage is requested.
            chunk["usage"] = Value::Null;
        }
        Event::default().data(chunk.to_string())
    }

    fn progress(data: Value) -> Event {
        Event::default().event(TOOL_PROGRESS_EVENT).data(data.to_string())
    }
}

impl SseFormat for Chunks {
    fn events(&mut self, event: ReplyEvent) -> Vec<Event> {
        match event {
            ReplyEvent::Delta(text) => vec![self.chunk(json!({"content": text}), None)],
            ReplyEvent::ToolCall { id, name, arguments } => {
                vec![Self::progress(json!({"type": "tool_call", "id": id, "name": name, "arguments": arguments}))]
            }
            ReplyEvent::ToolResult { id, name, content } => {
                vec![Self::progress(json!({"type": "tool_result", "id": id, "name": name, "content": content}))]
            }
            ReplyEvent::Done(done) => {
                let mut events = vec![self.chunk(json!({}), Some(&done.finish_reason))];
                if self.include_usage {
                    let usage = json!({
                        "id": self.id,
                        "object": "chat.completion.chunk",
                        "created": self.created,
                        "model": self.model,
                        "choices": [],
                        "usage": usage_json(&done.usage),
                    });
                    events.push(Event::default().data(usage.to_string()));
                }
                events.push(Event::default().data("[DONE]"));
                events
            }
        }
    }

    fn error(&mut self, error: ApiError) -> Vec<Event> {
        // OpenAI reports mid-stream failures as a data message holding an error object.
        vec![Event::default().data(error.body().to_string()), Event::default().data("[DONE]")]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: Value) -> Result<ChatTurn, ApiError> {
        let request: ChatRequest = serde_json::from_value(body).unwrap();
        parse_chat(request, "hermes-agent")
    }

    #[test]
    fn system_and_history_are_separated_from_the_last_user_message() {
        let turn = parse(json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"},
                {"role": "developer", "content": "No emojis."},
                {"role": "user", "content": [{"type": "text", "text": "What"}, {"type": "text", "text": "time?"}]},
            ]
        }))
        .unwrap();
        assert_eq!(turn.text, "What\ntime?");
        assert_eq!(turn.channel_prompt.as_deref(), Some("Be brief.\n\nNo emojis."));
        assert_eq!(
            turn.context,
            vec![
                ContextMessage { role: "user".into(), content: "Hi".into() },
                ContextMessage { role: "assistant".into(), content: "Hello!".into() },
            ]
        );
        assert_eq!(turn.model, "m");
        assert!(!turn.stream && !turn.include_usage);
    }

    #[test]
    fn model_defaults_and_usage_needs_stream() {
        let turn = parse(json!({
            "messages": [{"role": "user", "content": "x"}],
            "stream_options": {"include_usage": true}
        }))
        .unwrap();
        assert_eq!(turn.model, "hermes-agent");
        assert!(!turn.include_usage);
    }

    #[test]
    fn bad_messages_are_named() {
        let last = parse(json!({"messages": [{"role": "assistant", "content": "x"}]})).unwrap_err();
        assert_eq!(last.message, "messages[-1].role must be \"user\"");
        let image = parse(json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})).unwrap_err();
        assert!(image.message.contains("image_url"), "{}", image.message);
        assert_eq!(image.param.as_deref(), Some("messages[0].content[0].type"));
        let empty = parse(json!({"messages": []})).unwrap_err();
        assert_eq!(empty.param.as_deref(), Some("messages"));
        let role = parse(json!({"messages": [{"role": "robot", "content": "x"}, {"role": "user", "content": "y"}]})).unwrap_err();
        assert_eq!(role.param.as_deref(), Some("messages[0].role"));
        let number = parse(json!({"messages": [{"role": "user", "content": 3}]})).unwrap_err();
        assert_eq!(number.param.as_deref(), Some("messages[0].content"));
    }
}
