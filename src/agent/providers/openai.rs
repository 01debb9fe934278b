//! OpenAI-compatible Chat Completions (OpenAI, OpenRouter, vLLM, Ollama, llama.cpp servers):
//! non-streaming and streaming (SSE, including tool-call deltas and usage).

use super::http::{retry_after, transport_error};
use super::sse::SseDecoder;
use super::{ChatProvider, ChatRequest, ChatResponse, ProviderError};
use crate::agent::message::{ChatMessage, Role, ToolCallRequest};
use async_trait::async_trait;
use futures::StreamExt;
use hermes_adapter::Usage;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Clone)]
pub struct OpenAiCompatible {
    client: reqwest::Client,
}

impl OpenAiCompatible {
    pub fn new(request_timeout: Duration) -> Result<Self, ProviderError> {
        Ok(Self::with_client(super::http::client(request_timeout)?))
    }

    /// Use an existing client (its connection pool is shared).
    pub fn with_client(client: reqwest::Client) -> Self {
        Self { client }
    }
}

fn message_json(m: &ChatMessage) -> Value {
    let mut v = json!({ "role": m.role.as_str(), "content": m.content });
    if m.role == Role::Assistant && !m.tool_calls.is_empty() {
        v["tool_calls"] = m
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        if m.content.is_empty() {
            v["content"] = Value::Null;
        }
    }
    if m.role == Role::Tool
        && let Some(id) = &m.tool_call_id
    {
        v["tool_call_id"] = json!(id);
    }
    v
}

/// The request body; public so tests can check what goes on the wire.
pub fn request_body(req: &ChatRequest) -> Value {
    let mut body = json!({
        "model": req.model.model,
        "messages": req.messages.iter().map(message_json).collect::<Vec<_>>(),
        "stream": req.stream,
    });
    if req.stream {
        body["stream_options"] = json!({ "include_usage": true });
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    body
}

fn parse_usage(v: &Value) -> Usage {
    Usage {
        prompt_tokens: v.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        completion_tokens: v.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
        cached_tokens: v.pointer("/prompt_tokens_details/cached_tokens").and_then(Value::as_u64).unwrap_or(0),
        cache_write_tokens: 0,
    }
}

fn classify_status(status: reqwest::StatusCode, retry_after: Option<Duration>, body: &str) -> ProviderError {
    let detail = error_detail(body);
    match status.as_u16() {
        401 | 403 => ProviderError::Auth(detail),
        429 => ProviderError::RateLimited { retry_after },
        400 | 413 if detail.contains("context") || detail.contains("too long") || detail.contains("maximum") => {
            ProviderError::ContextOverflow(detail)
        }
        408 | 409 | 500..=599 => ProviderError::Transient(format!("HTTP {status}: {detail}")),
        _ => ProviderError::Fatal(format!("HTTP {status}: {detail}")),
    }
}

fn error_detail(body: &str) -> String {
    let text = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| body.to_string());
    text.chars().take(300).collect()
}

/// Tool calls assembled from stream deltas, keyed by their index.
#[derive(Default)]
struct ToolCallAssembler {
    calls: Vec<ToolCallRequest>,
}

impl ToolCallAssembler {
    fn apply(&mut self, delta: &Value) {
        let index = delta.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        while self.calls.len() <= index {
            self.calls.push(ToolCallRequest { id: String::new(), name: String::new(), arguments: String::new() });
        }
        let call = &mut self.calls[index];
        if let Some(id) = delta.get("id").and_then(Value::as_str) {
            call.id = id.to_string();
        }
        if let Some(name) = delta.pointer("/function/name").and_then(Value::as_str) {
            call.name.push_str(name);
        }
        if let Some(args) = delta.pointer("/function/arguments").and_then(Value::as_str) {
            call.arguments.push_str(args);
        }
    }
}

fn parse_tool_calls(message: &Value) -> Vec<ToolCallRequest> {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|c| ToolCallRequest {
                    id: c.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
                    name: c.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_string(),
                    arguments: c.pointer("/function/arguments").and_then(Value::as_str).unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[async_trait]
impl ChatProvider for OpenAiCompatible {
    async fn complete(&self, req: &ChatRequest, deltas: Option<&mpsc::Sender<String>>) -> Result<ChatResponse, ProviderError> {
        let url = format!("{}/chat/completions", req.model.base_url.trim_end_matches('/'));
        let mut http = self.client.post(&url).json(&request_body(req));
        if let Some(key) = &req.model.api_key {
            http = http.bearer_auth(key);
        }
        let response = http.send().await.map_err(transport_error)?;
        let status = response.status();
        if !status.is_success() {
            let after = retry_after(response.headers());
            let body = response.text().await.unwrap_or_default();
            return Err(classify_status(status, after, &body));
        }
        if !req.stream {
            let body: Value =
                response.json().await.map_err(|e| ProviderError::Transient(format!("unreadable response: {}", e.without_url())))?;
            let choice = body.pointer("/choices/0").cloned().unwrap_or(Value::Null);
            let message = choice.get("message").cloned().unwrap_or(Value::Null);
            return Ok(ChatResponse {
                text: message.get("content").and_then(Value::as_str).unwrap_or_default().to_string(),
                tool_calls: parse_tool_calls(&message),
                finish_reason: choice.get("finish_reason").and_then(Value::as_str).unwrap_or("stop").to_string(),
                usage: body.get("usage").map(parse_usage).unwrap_or_default(),
            });
        }

        let mut out = ChatResponse { finish_reason: "stop".into(), ..Default::default() };
        let mut tools = ToolCallAssembler::default();
        let mut decoder = SseDecoder::new();
        let mut stream = response.bytes_stream();
        let mut done = false;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| ProviderError::Transient(format!("stream interrupted: {}", e.without_url())))?;
            for data in decoder.feed(&chunk) {
                if data.trim() == "[DONE]" {
                    done = true;
                    continue;
                }
                let Ok(event) = serde_json::from_str::<Value>(&data) else {
                    tracing::debug!("skipping an unparsable stream event");
                    continue;
                };
                if let Some(err) = event.get("error") {
                    return Err(ProviderError::Transient(format!(
                        "provider stream error: {}",
                        err.get("message").and_then(Value::as_str).unwrap_or("unknown")
                    )));
                }
                if let Some(usage) = event.get("usage").filter(|u| !u.is_null()) {
                    out.usage = parse_usage(usage);
                }
                let Some(choice) = event.pointer("/choices/0") else { continue };
                if let Some(text) = choice.pointer("/delta/content").and_then(Value::as_str)
                    && !text.is_empty()
                {
                    out.text.push_str(text);
                    if let Some(tx) = deltas {
                        // The consumer may have gone (client disconnected); the turn goes on.
                        let _ = tx.send(text.to_string()).await;
                    }
                }
                if let Some(calls) = choice.pointer("/delta/tool_calls").and_then(Value::as_array) {
                    for call in calls {
                        tools.apply(call);
                    }
                }
                if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                    out.finish_reason = reason.to_string();
                }
            }
        }
        if !done && out.text.is_empty() && tools.calls.is_empty() {
            return Err(ProviderError::Transient("the stream ended without an answer".into()));
        }
        out.tool_calls = tools.calls;
        Ok(out)
    }
}
