//! Anthropic Messages API (`POST /v1/messages`): request mapping from the provider-neutral
//! conversation, prompt caching, non-streaming and streaming (SSE) responses, and error
//! classification.
//!
//! The Messages API differs from Chat Completions in ways that matter for a faithful mapping:
//! the system prompt is a top-level field rather than a message, tool calls and tool results are
//! content blocks (`tool_use` in the assistant turn, `tool_result` in the following *user* turn),
//! and prompt caching is opt-in per content block via `cache_control` breakpoints.

use super::http::{retry_after, transport_error};
use super::sse::SseDecoder;
use super::{ChatProvider, ChatRequest, ChatResponse, ProviderError};
use crate::agent::message::{ChatMessage, Role, ToolCallRequest};
use async_trait::async_trait;
use futures::StreamExt;
use hermes_adapter::Usage;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Map, Value, json};
use std::time::Duration;
use tokio::sync::mpsc;

/// The API version this mapping is written against; sent on every request.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` is mandatory on the Messages API; this is what Hermes asks for when nothing else
/// is configured.
pub(crate) const DEFAULT_MAX_TOKENS: u64 = 8192;

/// Anthropic rejects requests with more than four `cache_control` blocks.
const MAX_CACHE_BREAKPOINTS: usize = 4;

/// "system_and_3": the system prompt plus the last three messages carry breakpoints, so each
/// turn reads the previous turn's prefix from the cache and writes its own.
const CACHED_TAIL_MESSAGES: usize = 3;

/// Prefix of a system message that appears after the conversation started (an iteration-budget
/// note, say): the Messages API has no system role inside `messages`.
const SYSTEM_NOTE_PREFIX: &str = "[System note] ";

/// The Anthropic Messages API client. Holds no credentials: the key comes with each request's
/// [`super::ModelSpec`], so a derived `Debug` could not leak it either.
#[derive(Debug, Clone)]
pub(crate) struct AnthropicMessages {
    client: super::http::ModelClient,
}

impl AnthropicMessages {
    #[cfg(test)]
    pub(crate) fn new(request_timeout: Duration) -> Self {
        Self::with_client(super::http::ModelClient::new(request_timeout))
    }

    /// Use an existing client (its connection pool is shared).
    pub(crate) fn with_client(client: super::http::ModelClient) -> Self {
        Self { client }
    }
}

/// The messages endpoint for a base URL. Both `https://api.anthropic.com` and
/// `https://api.anthropic.com/v1` are common in configs; neither may end up as `/v1/v1`.
pub(crate) fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1") { format!("{base}/messages") } else { format!("{base}/v1/messages") }
}

/// Anthropic only accepts tool-use ids matching `^[a-zA-Z0-9_-]+$`; ids produced by another
/// provider earlier in the session (after a model switch) may not, so they are normalized the
/// same way on the `tool_use` and on the `tool_result` side to keep the pair matched.
fn tool_use_id(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// Tool arguments as the JSON object `tool_use.input` must be. Models occasionally write
/// malformed arguments; the API would reject the whole request over them, so they become `{}`.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

/// One turn of the `messages` array while it is being built.
struct Turn {
    role: &'static str,
    blocks: Vec<Value>,
}

/// Appends `blocks` to the conversation, merging into the previous turn when it has the same role:
/// the API wants user and assistant turns to alternate.
fn push_blocks(turns: &mut Vec<Turn>, role: &'static str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        return;
    }
    if turns.last().is_none_or(|t| t.role != role) {
        turns.push(Turn { role, blocks: Vec::new() });
    }
    let Some(turn) = turns.last_mut() else { return };
    for block in blocks {
        if block["type"] == "tool_result" {
            // Tool results must come before any text in a user turn, or the API answers 400.
            let at = turn.blocks.iter().take_while(|b| b["type"] == "tool_result").count();
            turn.blocks.insert(at, block);
        } else {
            turn.blocks.push(block);
        }
    }
}

fn text_block(text: impl Into<String>) -> Value {
    json!({ "type": "text", "text": text.into() })
}

/// The blocks one conversation message contributes, and the role of the turn they belong to.
fn message_blocks(m: &ChatMessage) -> (&'static str, Vec<Value>) {
    // Empty text blocks are rejected by the API, so empty content contributes nothing.
    let text = |prefix: &str| if m.content.is_empty() { None } else { Some(text_block(format!("{prefix}{}", m.content))) };
    match m.role {
        Role::System => ("user", text(SYSTEM_NOTE_PREFIX).into_iter().collect()),
        Role::User => ("user", user_blocks(m)),
        Role::Assistant => {
            let mut blocks: Vec<Value> = text("").into_iter().collect();
            blocks.extend(
                m.tool_calls
                    .iter()
                    .map(|c| json!({ "type": "tool_use", "id": tool_use_id(&c.id), "name": c.name, "input": tool_input(&c.arguments) })),
            );
            ("assistant", blocks)
        }
        Role::Tool => match &m.tool_call_id {
            Some(id) => {
                let mut block = json!({ "type": "tool_result", "tool_use_id": tool_use_id(id) });
                if !m.content.is_empty() {
                    block["content"] = json!(m.content);
                }
                ("user", vec![block])
            }
            // Without an id there is no tool_use to pair with; keep the output as plain text so
            // the model still sees it instead of the API rejecting the request.
            None => {
                let name = m.tool_name.as_deref().unwrap_or("tool");
                ("user", vec![text_block(format!("[Result of {name}] {}", m.content))])
            }
        },
    }
}

/// Images first (Anthropic's advice), then the text; an image without data becomes a line of
/// text.
fn user_blocks(m: &ChatMessage) -> Vec<Value> {
    let mut blocks = Vec::new();
    let mut text = m.content.clone();
    for image in &m.images {
        match &image.data {
            Some(data) => {
                blocks.push(json!({ "type": "image", "source": { "type": "base64", "media_type": image.media_type, "data": &**data } }))
            }
            None => text = format!("{text}\n{}", image.placeholder()),
        }
    }
    let text = text.trim_start_matches('\n');
    if !text.is_empty() {
        blocks.push(text_block(text.to_string()));
    }
    blocks
}

fn ephemeral() -> Value {
    json!({ "type": "ephemeral" })
}

/// The request body; public so tests can check what goes on the wire.
pub(crate) fn request_body(req: &ChatRequest) -> Value {
    // Leading system messages form the (frozen) system prompt; later ones are notes in the flow.
    let leading = req.messages.iter().take_while(|m| m.role == Role::System).count();
    let system_text = req.messages[..leading].iter().map(|m| m.content.as_str()).filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n\n");

    let mut turns: Vec<Turn> = Vec::new();
    for m in &req.messages[leading..] {
        let (role, blocks) = message_blocks(m);
        push_blocks(&mut turns, role, blocks);
    }

    let mut breakpoints = 0;
    let mut system = Vec::new();
    if !system_text.is_empty() {
        system.push(json!({ "type": "text", "text": system_text, "cache_control": ephemeral() }));
        breakpoints += 1;
    }
    let tail_budget = CACHED_TAIL_MESSAGES.min(MAX_CACHE_BREAKPOINTS - breakpoints);
    let first_cached = turns.len().saturating_sub(tail_budget);
    for turn in &mut turns[first_cached..] {
        if let Some(last) = turn.blocks.last_mut() {
            last["cache_control"] = ephemeral();
        }
    }

    let messages: Vec<Value> = turns.into_iter().map(|t| json!({ "role": t.role, "content": t.blocks })).collect();
    let mut body = json!({
        "model": req.model.model,
        "max_tokens": DEFAULT_MAX_TOKENS,
        "messages": messages,
        "stream": req.stream,
    });
    if !system.is_empty() {
        body["system"] = Value::Array(system);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                // `input_schema` must be a JSON-schema object; a tool without parameters still needs one.
                let schema = if t.parameters.is_object() { t.parameters.clone() } else { json!({ "type": "object", "properties": {} }) };
                json!({ "name": t.name, "description": t.description, "input_schema": schema })
            })
            .collect();
    }
    body
}

fn count(v: &Value, field: &str) -> Option<u64> {
    v.get(field).and_then(Value::as_u64)
}

/// Anthropic reports uncached input, cache reads and cache writes separately; Hermes' `Usage`
/// counts all prompt tokens in `prompt_tokens` with the cache parts broken out.
fn parse_usage(v: &Value) -> Usage {
    let input = count(v, "input_tokens").unwrap_or(0);
    let read = count(v, "cache_read_input_tokens").unwrap_or(0);
    let write = count(v, "cache_creation_input_tokens").unwrap_or(0);
    Usage {
        prompt_tokens: input + read + write,
        completion_tokens: count(v, "output_tokens").unwrap_or(0),
        cached_tokens: read,
        cache_write_tokens: write,
    }
}

/// Anthropic's `stop_reason` in the Chat Completions vocabulary the turn loop speaks.
fn finish_reason(stop_reason: Option<&str>) -> String {
    match stop_reason {
        Some("tool_use") => "tool_calls",
        Some("max_tokens") | Some("model_context_window_exceeded") => "length",
        Some("refusal") => "content_filter",
        _ => "stop",
    }
    .to_string()
}

/// Classifies a failure from the HTTP status (absent for an `error` event inside a stream) and
/// the Anthropic error body `{"type":"error","error":{"type":"…","message":"…"}}`.
fn classify(status: Option<u16>, retry_after: Option<Duration>, body: &str) -> ProviderError {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let kind = parsed.as_ref().and_then(|v| v.pointer("/error/type")).and_then(Value::as_str).unwrap_or_default().to_string();
    let detail: String =
        parsed.as_ref().and_then(|v| v.pointer("/error/message")).and_then(Value::as_str).unwrap_or(body).chars().take(300).collect();
    classify_parts(status, &kind, detail, retry_after)
}

fn classify_parts(status: Option<u16>, kind: &str, detail: String, retry_after: Option<Duration>) -> ProviderError {
    let context_overflow = {
        let lower = detail.to_lowercase();
        lower.contains("prompt is too long") || lower.contains("context")
    };
    let what = match status {
        Some(s) => format!("HTTP {s}"),
        None => "stream error".to_string(),
    };
    match (status, kind) {
        (Some(429), _) | (_, "rate_limit_error") => ProviderError::RateLimited { retry_after },
        (Some(401 | 403), _) | (_, "authentication_error" | "permission_error") => ProviderError::Auth(detail),
        (Some(413), _) | (_, "request_too_large") => ProviderError::ContextOverflow(detail),
        (Some(400) | None, "invalid_request_error") | (Some(400), "") if context_overflow => ProviderError::ContextOverflow(detail),
        (Some(408 | 409 | 500..=599), _) | (_, "overloaded_error" | "api_error" | "timeout_error") => {
            ProviderError::Transient(format!("{what} {kind}: {detail}"))
        }
        _ => ProviderError::Fatal(format!("{what} {kind}: {detail}")),
    }
}

/// A tool call's arguments as text: the streamed JSON when there was any, else the `input` the
/// block started with (a tool called without arguments streams no JSON at all).
fn arguments_text(streamed: &str, input: &Value) -> String {
    if !streamed.trim().is_empty() {
        return streamed.to_string();
    }
    match input {
        Value::Object(map) if !map.is_empty() => input.to_string(),
        _ => "{}".to_string(),
    }
}

/// The non-streaming response body as a [`ChatResponse`].
fn parse_message(body: &Value) -> ChatResponse {
    let mut out = ChatResponse { finish_reason: finish_reason(body.get("stop_reason").and_then(Value::as_str)), ..Default::default() };
    for block in body.get("content").and_then(Value::as_array).into_iter().flatten() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => out.text.push_str(block.get("text").and_then(Value::as_str).unwrap_or_default()),
            Some("tool_use") => out.tool_calls.push(ToolCallRequest {
                id: block.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
                name: block.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                arguments: arguments_text("", block.get("input").unwrap_or(&Value::Null)),
            }),
            // Thinking and other block kinds carry nothing the turn loop uses.
            _ => {}
        }
    }
    out.usage = body.get("usage").map(parse_usage).unwrap_or_default();
    out
}

/// A content block being streamed, by its index.
enum StreamBlock {
    Text,
    ToolUse { id: String, name: String, input: Value, json: String },
    Other,
}

/// Assembles a streamed message from its events.
#[derive(Default)]
struct StreamState {
    blocks: Vec<(u64, StreamBlock)>,
    text: String,
    usage: Value,
    stop_reason: Option<String>,
    done: bool,
}

impl StreamState {
    fn block(&mut self, index: u64) -> Option<&mut StreamBlock> {
        self.blocks.iter_mut().find(|(i, _)| *i == index).map(|(_, b)| b)
    }

    /// Applies one event; returns the text delta to forward, if the event carried one.
    fn apply(&mut self, event: &Value) -> Result<Option<String>, ProviderError> {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match event.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message_start" => {
                if let Some(usage) = event.pointer("/message/usage").and_then(Value::as_object) {
                    self.merge_usage(usage);
                }
            }
            "content_block_start" => {
                let block = event.get("content_block").cloned().unwrap_or(Value::Null);
                let started = match block.get("type").and_then(Value::as_str) {
                    Some("text") => StreamBlock::Text,
                    Some("tool_use") => StreamBlock::ToolUse {
                        id: block.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
                        name: block.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                        input: block.get("input").cloned().unwrap_or(Value::Null),
                        json: String::new(),
                    },
                    _ => StreamBlock::Other,
                };
                self.blocks.push((index, started));
                // A text block may start with text already in it.
                if let Some(text) = block.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    self.text.push_str(text);
                    return Ok(Some(text.to_string()));
                }
            }
            "content_block_delta" => {
                let delta = event.get("delta").cloned().unwrap_or(Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = delta.get("text").and_then(Value::as_str).unwrap_or_default();
                        if !text.is_empty() {
                            self.text.push_str(text);
                            return Ok(Some(text.to_string()));
                        }
                    }
                    Some("input_json_delta") => {
                        let piece = delta.get("partial_json").and_then(Value::as_str).unwrap_or_default();
                        if let Some(StreamBlock::ToolUse { json, .. }) = self.block(index) {
                            json.push_str(piece);
                        }
                    }
                    // Thinking and signature deltas are not surfaced.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                // The counts here are cumulative, so they replace what message_start said.
                if let Some(usage) = event.get("usage").and_then(Value::as_object) {
                    self.merge_usage(usage);
                }
            }
            "message_stop" => self.done = true,
            "error" => return Err(classify(None, None, &event.to_string())),
            // ping, content_block_stop and event kinds added later need no handling.
            _ => {}
        }
        Ok(None)
    }

    fn merge_usage(&mut self, usage: &Map<String, Value>) {
        if !self.usage.is_object() {
            self.usage = Value::Object(Map::new());
        }
        for (k, v) in usage {
            if !v.is_null() {
                self.usage[k] = v.clone();
            }
        }
    }

    fn finish(self) -> ChatResponse {
        let tool_calls = self
            .blocks
            .into_iter()
            .filter_map(|(_, b)| match b {
                StreamBlock::ToolUse { id, name, input, json } => {
                    Some(ToolCallRequest { id, name, arguments: arguments_text(&json, &input) })
                }
                StreamBlock::Text | StreamBlock::Other => None,
            })
            .collect();
        ChatResponse {
            text: self.text,
            tool_calls,
            finish_reason: finish_reason(self.stop_reason.as_deref()),
            usage: parse_usage(&self.usage),
        }
    }
}

#[async_trait]
impl ChatProvider for AnthropicMessages {
    async fn complete(&self, req: &ChatRequest, deltas: Option<&mpsc::Sender<String>>) -> Result<ChatResponse, ProviderError> {
        let mut headers = HeaderMap::new();
        headers.insert("anthropic-version", HeaderValue::from_static(ANTHROPIC_VERSION));
        if let Some(key) = &req.model.api_key {
            // The error names no value: the key must not reach a log line.
            let mut value = HeaderValue::from_str(key)
                .map_err(|_| ProviderError::Auth("the API key contains characters not allowed in an HTTP header".into()))?;
            value.set_sensitive(true);
            headers.insert("x-api-key", value);
        }
        let response = self
            .client
            .get()?
            .post(endpoint(&req.model.base_url))
            .headers(headers)
            .json(&request_body(req))
            .send()
            .await
            .map_err(transport_error)?;
        let status = response.status();
        if !status.is_success() {
            let after = retry_after(response.headers());
            let body = response.text().await.unwrap_or_default();
            return Err(classify(Some(status.as_u16()), after, &body));
        }
        if !req.stream {
            let body: Value =
                response.json().await.map_err(|e| ProviderError::Transient(format!("unreadable response: {}", e.without_url())))?;
            return Ok(parse_message(&body));
        }

        let mut state = StreamState::default();
        let mut decoder = SseDecoder::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| ProviderError::Transient(format!("stream interrupted: {}", e.without_url())))?;
            for data in decoder.feed(&chunk) {
                let Ok(event) = serde_json::from_str::<Value>(&data) else {
                    tracing::debug!("skipping an unparsable stream event");
                    continue;
                };
                if let Some(text) = state.apply(&event)?
                    && let Some(tx) = deltas
                {
                    // The consumer may have gone (client disconnected); the turn goes on.
                    let _ = tx.send(text).await;
                }
            }
        }
        // Anthropic always ends a complete message with message_stop; without it the stream was
        // cut, and a cut tool_use would run with truncated arguments.
        if !state.done {
            return Err(ProviderError::Transient("the stream ended before message_stop".into()));
        }
        Ok(state.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::providers::ModelSpec;
    use crate::agent::tools::ToolSchema;
    use std::sync::Arc;

    fn spec() -> ModelSpec {
        ModelSpec {
            model: "claude-sonnet-4-5".into(),
            provider: Some("anthropic".into()),
            base_url: "https://api.anthropic.com".into(),
            api_key: Some("sk-ant-secret".into()),
        }
    }

    fn request(messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest { model: spec(), messages, tools: Vec::new(), stream: false }
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCallRequest {
        ToolCallRequest { id: id.into(), name: name.into(), arguments: arguments.into() }
    }

    fn tool_result(id: &str, content: &str) -> ChatMessage {
        ChatMessage { tool_call_id: Some(id.into()), tool_name: Some("terminal".into()), ..ChatMessage::new(Role::Tool, content) }
    }

    fn assistant_calls(text: &str, calls: Vec<ToolCallRequest>) -> ChatMessage {
        ChatMessage { tool_calls: calls, ..ChatMessage::assistant(text) }
    }

    /// Every `cache_control` in the body, as JSON pointers.
    fn breakpoints(body: &Value) -> Vec<String> {
        fn walk(v: &Value, path: String, out: &mut Vec<String>) {
            match v {
                Value::Object(map) => {
                    if map.contains_key("cache_control") {
                        out.push(path.clone());
                    }
                    for (k, child) in map {
                        walk(child, format!("{path}/{k}"), out);
                    }
                }
                Value::Array(items) => {
                    for (i, child) in items.iter().enumerate() {
                        walk(child, format!("{path}/{i}"), out);
                    }
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(body, String::new(), &mut out);
        out
    }

    fn picture(data: Option<&str>) -> crate::agent::ImagePart {
        crate::agent::ImagePart::test_picture(data)
    }

    /// The last message's blocks without their cache breakpoints.
    fn last_blocks(body: &Value) -> Vec<Value> {
        let blocks = body["messages"].as_array().unwrap().last().unwrap()["content"].as_array().unwrap().clone();
        blocks
            .into_iter()
            .map(|mut b| {
                b.as_object_mut().unwrap().remove("cache_control");
                b
            })
            .collect()
    }

    #[test]
    fn a_users_picture_goes_as_an_image_block_before_the_text() {
        let asked = ChatMessage { images: vec![picture(Some("/9j/4AAQ"))], ..ChatMessage::user("what is this?") };
        let body = request_body(&request(vec![asked]));
        assert_eq!(
            last_blocks(&body),
            vec![
                json!({"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}}),
                json!({"type": "text", "text": "what is this?"}),
            ]
        );
    }

    #[test]
    fn a_picture_without_data_is_named_in_text() {
        let earlier = ChatMessage { images: vec![picture(None), picture(Some("AAAA"))], ..ChatMessage::user("compare these") };
        let body = request_body(&request(vec![earlier]));
        assert_eq!(
            last_blocks(&body),
            vec![
                json!({"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}}),
                json!({"type": "text", "text": "compare these\n[an image the user sent earlier (1568x1176), no longer attached]"}),
            ]
        );
    }

    #[test]
    fn endpoint_does_not_double_v1() {
        assert_eq!(endpoint("https://api.anthropic.com"), "https://api.anthropic.com/v1/messages");
        assert_eq!(endpoint("https://api.anthropic.com/"), "https://api.anthropic.com/v1/messages");
        assert_eq!(endpoint("https://api.anthropic.com/v1"), "https://api.anthropic.com/v1/messages");
        assert_eq!(endpoint("https://api.minimax.io/anthropic/v1/"), "https://api.minimax.io/anthropic/v1/messages");
        assert_eq!(endpoint("https://api.minimax.io/anthropic"), "https://api.minimax.io/anthropic/v1/messages");
    }

    #[test]
    fn system_messages_become_one_cached_system_block() {
        let body =
            request_body(&request(vec![ChatMessage::system("You are Hermes."), ChatMessage::system("Memory: x"), ChatMessage::user("hi")]));
        assert_eq!(
            body["system"],
            json!([{ "type": "text", "text": "You are Hermes.\n\nMemory: x", "cache_control": { "type": "ephemeral" } }])
        );
        assert_eq!(body["model"], "claude-sonnet-4-5");
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(body["stream"], false);
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(1));
        assert!(body["messages"].as_array().into_iter().flatten().all(|m| m["role"] != "system"));
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn no_system_field_without_system_messages() {
        let body = request_body(&request(vec![ChatMessage::user("hi")]));
        assert!(body.get("system").is_none());
        assert_eq!(breakpoints(&body), vec!["/messages/0/content/0"]);
    }

    #[test]
    fn caches_system_and_last_three_messages_at_most_four() {
        let mut messages = vec![ChatMessage::system("sys")];
        for i in 0..5 {
            messages.push(ChatMessage::user(format!("q{i}")));
            messages.push(ChatMessage::assistant(format!("a{i}")));
        }
        messages.push(ChatMessage::user("last"));
        let body = request_body(&request(messages));
        assert_eq!(
            breakpoints(&body),
            vec!["/messages/8/content/0", "/messages/9/content/0", "/messages/10/content/0", "/system/0"]
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>()
        );
        assert_eq!(body["messages"][10]["content"][0]["text"], "last");
    }

    #[test]
    fn breakpoint_goes_on_the_last_block_of_a_merged_turn() {
        let body = request_body(&request(vec![
            ChatMessage::system("sys"),
            ChatMessage::user("q"),
            assistant_calls("", vec![call("a", "terminal", "{}"), call("b", "terminal", "{}")]),
            tool_result("a", "1"),
            tool_result("b", "2"),
        ]));
        let points = breakpoints(&body);
        assert!(points.len() <= MAX_CACHE_BREAKPOINTS);
        assert!(points.contains(&"/messages/1/content/1".to_string()), "{points:?}");
        assert!(points.contains(&"/messages/2/content/1".to_string()), "{points:?}");
        assert!(!points.contains(&"/messages/2/content/0".to_string()), "{points:?}");
    }

    #[test]
    fn tool_calls_and_results_map_to_blocks_and_merge() {
        let body = request_body(&request(vec![
            ChatMessage::system("sys"),
            ChatMessage::user("list and read"),
            assistant_calls(
                "Let me look.",
                vec![call("call_1", "terminal", r#"{"command":"ls"}"#), call("call_2", "read_file", "not json")],
            ),
            tool_result("call_1", "a.txt"),
            tool_result("call_2", "contents"),
            ChatMessage::assistant("Done."),
        ]));
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        assert_eq!(messages.len(), 4);
        assert_eq!(messages[1]["role"], "assistant");
        assert_eq!(messages[1]["content"][0]["text"], "Let me look.");
        assert_eq!(messages[1]["content"][1]["type"], "tool_use");
        assert_eq!(messages[1]["content"][1]["id"], "call_1");
        assert_eq!(messages[1]["content"][1]["name"], "terminal");
        assert_eq!(messages[1]["content"][1]["input"], json!({ "command": "ls" }));
        assert_eq!(messages[1]["content"][2]["input"], json!({}), "malformed arguments become {{}}");
        assert_eq!(messages[2]["role"], "user");
        let results = messages[2]["content"].as_array().cloned().unwrap_or_default();
        assert_eq!(results.len(), 2, "consecutive tool results share one user turn");
        assert_eq!(results[0]["type"], "tool_result");
        assert_eq!(results[0]["tool_use_id"], "call_1");
        assert_eq!(results[0]["content"], "a.txt");
        assert_eq!(results[1]["tool_use_id"], "call_2");
        assert_eq!(messages[3]["role"], "assistant");
    }

    #[test]
    fn later_system_message_is_a_user_note_after_tool_results() {
        let body = request_body(&request(vec![
            ChatMessage::system("sys"),
            ChatMessage::user("go"),
            assistant_calls("", vec![call("c1", "terminal", "{}")]),
            tool_result("c1", "ok"),
            ChatMessage::system("You have 2 iterations left."),
        ]));
        assert_eq!(body["system"][0]["text"], "sys");
        let last = &body["messages"][2];
        assert_eq!(last["role"], "user");
        assert_eq!(last["content"][0]["type"], "tool_result");
        assert_eq!(
            last["content"][1],
            json!({ "type": "text", "text": "[System note] You have 2 iterations left.", "cache_control": { "type": "ephemeral" } })
        );
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn tool_results_stay_ahead_of_text_in_a_merged_user_turn() {
        let body = request_body(&request(vec![
            ChatMessage::user("go"),
            assistant_calls("", vec![call("c1", "terminal", "{}")]),
            ChatMessage::system("note"),
            tool_result("c1", "ok"),
        ]));
        let content = &body["messages"][2]["content"];
        assert_eq!(content[0]["type"], "tool_result");
        assert_eq!(content[1]["text"], "[System note] note");
    }

    #[test]
    fn roles_alternate_after_merging() {
        let body = request_body(&request(vec![
            ChatMessage::system("sys"),
            ChatMessage::user("one"),
            ChatMessage::user("two"),
            ChatMessage::assistant("a"),
            ChatMessage::assistant(""),
            ChatMessage::assistant("b"),
            ChatMessage::user(""),
            ChatMessage::user("three"),
        ]));
        let roles: Vec<&str> = body["messages"].as_array().into_iter().flatten().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, vec!["user", "assistant", "user"]);
        assert_eq!(body["messages"][0]["content"][1]["text"], "two");
        assert_eq!(body["messages"][1]["content"].as_array().map(Vec::len), Some(2), "empty text is dropped");
    }

    #[test]
    fn tool_ids_are_normalized_on_both_sides() {
        let body = request_body(&request(vec![
            ChatMessage::user("go"),
            assistant_calls("", vec![call("functions.terminal:0", "terminal", "{}")]),
            tool_result("functions.terminal:0", "ok"),
        ]));
        assert_eq!(body["messages"][1]["content"][0]["id"], "functions_terminal_0");
        assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "functions_terminal_0");
    }

    #[test]
    fn tools_and_stream_flag() {
        let mut req = request(vec![ChatMessage::user("hi")]);
        req.stream = true;
        req.tools = vec![
            Arc::new(ToolSchema {
                name: "terminal".into(),
                description: "Run".into(),
                parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
            }),
            Arc::new(ToolSchema { name: "noargs".into(), description: "None".into(), parameters: Value::Null }),
        ];
        let body = request_body(&req);
        assert_eq!(body["stream"], true);
        assert_eq!(body["tools"][0]["name"], "terminal");
        assert_eq!(body["tools"][0]["description"], "Run");
        assert_eq!(body["tools"][0]["input_schema"]["properties"]["command"]["type"], "string");
        assert_eq!(body["tools"][1]["input_schema"], json!({"type": "object", "properties": {}}));
        assert!(body["tools"][0].get("type").is_none(), "no OpenAI function wrapper");
    }

    #[test]
    fn usage_counts_cache_parts_into_the_prompt() {
        let usage = parse_usage(
            &json!({"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20}),
        );
        assert_eq!(usage, Usage { prompt_tokens: 130, completion_tokens: 5, cached_tokens: 100, cache_write_tokens: 20 });
        assert_eq!(
            parse_usage(&json!({"input_tokens": 3, "output_tokens": 1})),
            Usage { prompt_tokens: 3, completion_tokens: 1, ..Default::default() }
        );
    }

    #[test]
    fn stop_reasons_map_to_finish_reasons() {
        for (stop, finish) in [
            (Some("end_turn"), "stop"),
            (Some("stop_sequence"), "stop"),
            (Some("tool_use"), "tool_calls"),
            (Some("max_tokens"), "length"),
            (None, "stop"),
        ] {
            assert_eq!(finish_reason(stop), finish, "{stop:?}");
        }
    }

    #[test]
    fn non_stream_message_parses_text_and_tool_use() {
        let body = json!({
            "type": "message", "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "x"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "terminal", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "toolu_2", "name": "noargs", "input": {}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 4, "output_tokens": 2},
        });
        let r = parse_message(&body);
        assert_eq!(r.text, "Checking.");
        assert_eq!(r.finish_reason, "tool_calls");
        assert_eq!(r.tool_calls, vec![call("toolu_1", "terminal", r#"{"command":"ls"}"#), call("toolu_2", "noargs", "{}")]);
        assert_eq!(r.usage.prompt_tokens, 4);
    }

    #[test]
    fn stream_events_assemble_text_tools_and_usage() {
        let events = [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 5, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 0, "output_tokens": 1}}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_a", "name": "terminal", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"comm"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "and\":\"ls\"}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_b", "name": "noargs", "input": {}}}),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 9}}),
            json!({"type": "message_stop"}),
        ];
        let mut state = StreamState::default();
        let mut deltas = Vec::new();
        for e in &events {
            if let Some(d) = state.apply(e).map_err(|e| e.to_string()).unwrap() {
                deltas.push(d);
            }
        }
        assert!(state.done);
        let r = state.finish();
        assert_eq!(deltas, vec!["Hel", "lo"]);
        assert_eq!(r.text, "Hello");
        assert_eq!(r.finish_reason, "tool_calls");
        assert_eq!(r.tool_calls, vec![call("toolu_a", "terminal", r#"{"command":"ls"}"#), call("toolu_b", "noargs", "{}")]);
        assert_eq!(r.usage, Usage { prompt_tokens: 12, completion_tokens: 9, cached_tokens: 7, cache_write_tokens: 0 });
    }

    #[test]
    fn stream_error_event_is_classified() {
        let mut state = StreamState::default();
        let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert!(matches!(state.apply(&overloaded), Err(ProviderError::Transient(_))));
        let limited = json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}});
        assert!(matches!(state.apply(&limited), Err(ProviderError::RateLimited { retry_after: None })));
    }

    #[test]
    fn http_errors_are_classified() {
        let body = |kind: &str, message: &str| json!({"type": "error", "error": {"type": kind, "message": message}}).to_string();
        let secs = Some(Duration::from_secs(3));
        assert!(matches!(
            classify(Some(429), secs, &body("rate_limit_error", "slow")),
            ProviderError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(3)
        ));
        assert!(matches!(classify(Some(401), None, &body("authentication_error", "invalid x-api-key")), ProviderError::Auth(_)));
        assert!(matches!(classify(Some(403), None, &body("permission_error", "no")), ProviderError::Auth(_)));
        assert!(matches!(classify(Some(529), None, &body("overloaded_error", "Overloaded")), ProviderError::Transient(_)));
        assert!(matches!(classify(Some(500), None, &body("api_error", "oops")), ProviderError::Transient(_)));
        assert!(matches!(classify(Some(503), None, "upstream connect error"), ProviderError::Transient(_)));
        assert!(matches!(
            classify(Some(400), None, &body("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum")),
            ProviderError::ContextOverflow(_)
        ));
        assert!(matches!(
            classify(Some(400), None, &body("invalid_request_error", "input length and `max_tokens` exceed context limit")),
            ProviderError::ContextOverflow(_)
        ));
        assert!(matches!(classify(Some(400), None, &body("invalid_request_error", "messages: field required")), ProviderError::Fatal(_)));
        assert!(matches!(classify(Some(404), None, &body("not_found_error", "model: claude-x")), ProviderError::Fatal(_)));
        match classify(Some(400), None, &body("invalid_request_error", "bad")) {
            ProviderError::Fatal(detail) => assert!(detail.contains("bad") && detail.contains("400"), "{detail}"),
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// The provider against the fake's Anthropic route over loopback HTTP.
#[cfg(test)]
mod wire_tests {
    use super::*;
    use crate::agent::providers::ModelSpec;
    use hermes_fakes::{FakeLlm, Reply, ToolCall};

    const KEY: &str = "sk-ant-test-key";

    fn request(llm: &FakeLlm, stream: bool, messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            model: ModelSpec {
                model: "claude-test".into(),
                provider: Some("anthropic".into()),
                base_url: llm.base_url(),
                api_key: Some(KEY.into()),
            },
            messages,
            tools: Vec::new(),
            stream,
        }
    }

    fn hello(llm: &FakeLlm, stream: bool) -> ChatRequest {
        request(llm, stream, vec![ChatMessage::system("You are a test."), ChatMessage::user("hello")])
    }

    fn provider() -> AnthropicMessages {
        AnthropicMessages::new(Duration::from_secs(10))
    }

    /// Runs a streaming completion and returns it with every delta sent.
    async fn stream(req: &ChatRequest) -> (Result<ChatResponse, ProviderError>, Vec<String>) {
        let (tx, mut rx) = mpsc::channel(64);
        let result = provider().complete(req, Some(&tx)).await;
        drop(tx);
        let mut deltas = Vec::new();
        while let Some(d) = rx.recv().await {
            deltas.push(d);
        }
        (result, deltas)
    }

    #[tokio::test]
    async fn non_stream_text_and_headers() {
        let llm = FakeLlm::start().await;
        llm.push(Reply::text("Hi there"));
        let r = provider().complete(&hello(&llm, false), None).await.map_err(|e| e.to_string()).unwrap();
        assert_eq!(r.text, "Hi there");
        assert_eq!(r.finish_reason, "stop");
        assert!(r.tool_calls.is_empty());
        assert!(r.usage.completion_tokens > 0);
        assert!(r.usage.prompt_tokens > 0);
        let recorded = &llm.requests()[0];
        assert_eq!(recorded.wire(), "anthropic");
        assert_eq!(recorded.header("x-api-key"), Some(KEY));
        assert_eq!(recorded.header("anthropic-version"), Some(ANTHROPIC_VERSION));
        assert_eq!(recorded.authorization, None, "no bearer token on the Anthropic API");
        assert_eq!(recorded.system_text().as_deref(), Some("You are a test."));
        assert_eq!(recorded.last_user_text().as_deref(), Some("hello"));
        assert!(!recorded.stream);
    }

    #[tokio::test]
    async fn streaming_text_deltas_arrive_in_order() {
        let llm = FakeLlm::start().await;
        llm.push(Reply::chunks(["One ", "two ", "three."]));
        let (result, deltas) = stream(&hello(&llm, true)).await;
        let r = result.map_err(|e| e.to_string()).unwrap();
        assert_eq!(deltas, vec!["One ", "two ", "three."]);
        assert_eq!(r.text, "One two three.");
        assert_eq!(r.finish_reason, "stop");
        assert!(r.usage.completion_tokens > 0);
        assert!(llm.requests()[0].stream);
    }

    #[tokio::test]
    async fn tool_call_non_stream() {
        let llm = FakeLlm::start().await;
        llm.push(Reply::tool_call("toolu_1", "terminal", r#"{"command":"ls -la"}"#));
        let r = provider().complete(&hello(&llm, false), None).await.map_err(|e| e.to_string()).unwrap();
        assert_eq!(r.finish_reason, "tool_calls");
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].id, "toolu_1");
        assert_eq!(r.tool_calls[0].name, "terminal");
        let args: Value = serde_json::from_str(&r.tool_calls[0].arguments).map_err(|e| e.to_string()).unwrap();
        assert_eq!(args, json!({"command": "ls -la"}));
    }

    #[tokio::test]
    async fn tool_call_stream_reassembles_input_json_deltas() {
        let llm = FakeLlm::start().await;
        llm.push(Reply::tool_call("toolu_1", "terminal", r#"{"command":"echo hello world"}"#));
        let (result, deltas) = stream(&hello(&llm, true)).await;
        let r = result.map_err(|e| e.to_string()).unwrap();
        assert!(deltas.is_empty(), "tool input is not text");
        assert_eq!(r.finish_reason, "tool_calls");
        assert_eq!(
            r.tool_calls,
            vec![ToolCallRequest { id: "toolu_1".into(), name: "terminal".into(), arguments: r#"{"command":"echo hello world"}"#.into() }]
        );
    }

    #[tokio::test]
    async fn two_parallel_tool_uses_in_both_modes() {
        let llm = FakeLlm::start().await;
        let calls = vec![
            ToolCall::new("toolu_a", "terminal", r#"{"command":"ls"}"#),
            ToolCall::new("toolu_b", "read_file", r#"{"path":"notes.md"}"#),
        ];
        llm.push(Reply::ToolCalls(calls.clone()));
        llm.push(Reply::ToolCalls(calls));
        let whole = provider().complete(&hello(&llm, false), None).await.map_err(|e| e.to_string()).unwrap();
        let (streamed, _) = stream(&hello(&llm, true)).await;
        let streamed = streamed.map_err(|e| e.to_string()).unwrap();
        for r in [whole, streamed] {
            let got: Vec<(String, String, Value)> = r
                .tool_calls
                .iter()
                .map(|c| (c.id.clone(), c.name.clone(), serde_json::from_str(&c.arguments).unwrap_or(Value::Null)))
                .collect();
            assert_eq!(
                got,
                vec![
                    ("toolu_a".to_string(), "terminal".to_string(), json!({"command": "ls"})),
                    ("toolu_b".to_string(), "read_file".to_string(), json!({"path": "notes.md"})),
                ]
            );
        }
    }

    #[tokio::test]
    async fn tool_round_trip_is_accepted_by_the_fake() {
        // The fake validates tool_use/tool_result pairing like the API, so a full round trip proves
        // the mapping is one the service accepts.
        let llm = FakeLlm::start().await;
        llm.push(Reply::text("done"));
        let messages = vec![
            ChatMessage::system("sys"),
            ChatMessage::user("go"),
            ChatMessage {
                tool_calls: vec![
                    ToolCallRequest { id: "toolu_a".into(), name: "terminal".into(), arguments: r#"{"command":"ls"}"#.into() },
                    ToolCallRequest { id: "toolu_b".into(), name: "terminal".into(), arguments: "{".into() },
                ],
                ..ChatMessage::assistant("")
            },
            ChatMessage { tool_call_id: Some("toolu_a".into()), ..ChatMessage::new(Role::Tool, "a.txt") },
            ChatMessage { tool_call_id: Some("toolu_b".into()), ..ChatMessage::new(Role::Tool, "") },
            ChatMessage::system("1 iteration left"),
        ];
        let r = provider().complete(&request(&llm, false, messages), None).await.map_err(|e| e.to_string()).unwrap();
        assert_eq!(r.text, "done");
        let recorded = &llm.requests()[0];
        let roles: Vec<String> = recorded.messages().into_iter().map(|(role, _)| role).collect();
        assert_eq!(roles, vec!["system", "user", "assistant", "tool", "tool", "user"]);
        assert_eq!(recorded.last_user_text().as_deref(), Some("[System note] 1 iteration left"));
    }

    #[tokio::test]
    async fn rate_limit_carries_retry_after() {
        let llm = FakeLlm::start().await;
        llm.push(Reply::rate_limited(7));
        let err = provider().complete(&hello(&llm, false), None).await.err();
        assert!(matches!(err, Some(ProviderError::RateLimited { retry_after: Some(d) }) if d == Duration::from_secs(7)), "{err:?}");
    }

    #[tokio::test]
    async fn unauthorized_is_auth_and_never_shows_the_key() {
        let llm = FakeLlm::start().await;
        llm.push(Reply::error(401, "invalid x-api-key"));
        let err = provider().complete(&hello(&llm, true), None).await.err();
        assert!(matches!(&err, Some(ProviderError::Auth(m)) if m.contains("invalid x-api-key")), "{err:?}");
        let shown = err.map(|e| format!("{e} {e:?}")).unwrap_or_default();
        assert!(!shown.contains(KEY), "{shown}");
        assert!(!format!("{:?}", hello(&llm, false)).contains(KEY));
    }

    #[tokio::test]
    async fn overloaded_is_transient() {
        let llm = FakeLlm::start().await;
        llm.push(Reply::error(529, "Overloaded"));
        let err = provider().complete(&hello(&llm, false), None).await.err();
        assert!(matches!(&err, Some(ProviderError::Transient(m)) if m.contains("overloaded_error")), "{err:?}");
        assert!(err.is_some_and(|e| e.is_retryable()));
    }

    #[tokio::test]
    async fn prompt_too_long_is_context_overflow() {
        let llm = FakeLlm::start().await;
        llm.push(Reply::error(400, "prompt is too long: 210000 tokens > 200000 maximum"));
        let err = provider().complete(&hello(&llm, false), None).await.err();
        assert!(matches!(err, Some(ProviderError::ContextOverflow(_))), "{err:?}");
    }

    #[tokio::test]
    async fn cache_read_on_second_identical_prefix() {
        let llm = FakeLlm::start().await;
        let first = provider().complete(&hello(&llm, false), None).await.map_err(|e| e.to_string()).unwrap();
        assert_eq!(first.usage.cached_tokens, 0);
        assert!(first.usage.cache_write_tokens > 0);
        let (second, _) = stream(&hello(&llm, true)).await;
        let second = second.map_err(|e| e.to_string()).unwrap();
        assert_eq!(second.usage.cached_tokens, first.usage.cache_write_tokens);
        assert_eq!(second.usage.cache_write_tokens, 0);
        assert_eq!(second.usage.prompt_tokens, first.usage.prompt_tokens, "cached tokens still count as prompt");
    }

    #[tokio::test]
    async fn next_turn_reads_the_previous_turns_prefix() {
        let llm = FakeLlm::start().await;
        llm.push(Reply::text("first answer"));
        let mut messages = vec![ChatMessage::system("You are a test."), ChatMessage::user("question one")];
        let first = provider().complete(&request(&llm, false, messages.clone()), None).await.map_err(|e| e.to_string()).unwrap();
        messages.push(ChatMessage::assistant(first.text));
        messages.push(ChatMessage::user("question two"));
        let second = provider().complete(&request(&llm, false, messages), None).await.map_err(|e| e.to_string()).unwrap();
        assert_eq!(second.usage.cached_tokens, first.usage.cache_write_tokens, "system + first question come from the cache");
        assert!(second.usage.cache_write_tokens > 0, "the new tail is written");
    }
}
