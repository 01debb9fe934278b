//! OpenAI-compatible Chat Completions (OpenAI, OpenRouter, vLLM, Ollama, llama.cpp servers):
//! non-streaming and streaming (SSE, including tool-call deltas and usage).

use super::http::{retry_after, transport_error};
use super::sse::SseDecoder;
use super::{ChatProvider, ChatRequest, ChatResponse, ProviderError};
use crate::agent::message::{ChatMessage, Role, ToolCallRequest};
use async_trait::async_trait;
use futures::StreamExt;
use hermes_adapter::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Clone)]
pub struct OpenAiCompatible {
    client: super::http::ModelClient,
}

impl OpenAiCompatible {
    pub fn new(request_timeout: Duration) -> Self {
        Self::with_client(super::http::ModelClient::new(request_timeout))
    }

    /// Use an existing client (its connection pool is shared).
    pub fn with_client(client: super::http::ModelClient) -> Self {
        Self { client }
    }
}

/// The request as it goes on the wire, borrowing from the [`ChatRequest`]: serialized straight
/// to bytes, with no intermediate JSON tree of the whole conversation.
#[derive(Serialize)]
pub struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    /// `null` for an assistant message that only calls tools.
    content: Option<WireContent<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

/// A string, or text and image parts for a message that carries images.
#[derive(Serialize)]
#[serde(untagged)]
enum WireContent<'a> {
    Text(&'a str),
    Parts(Vec<WirePart>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart {
    Text { text: String },
    ImageUrl { image_url: WireImageUrl },
}

#[derive(Serialize)]
struct WireImageUrl {
    url: String,
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    r#type: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

fn wire_message(m: &ChatMessage) -> WireMessage<'_> {
    let calls_tools = m.role == Role::Assistant && !m.tool_calls.is_empty();
    WireMessage {
        role: m.role.as_str(),
        content: if calls_tools && m.content.is_empty() { None } else { Some(wire_content(m)) },
        tool_calls: if calls_tools {
            m.tool_calls
                .iter()
                .map(|c| WireToolCall {
                    id: &c.id,
                    r#type: "function",
                    function: WireFunctionCall { name: &c.name, arguments: &c.arguments },
                })
                .collect()
        } else {
            Vec::new()
        },
        tool_call_id: if m.role == Role::Tool { m.tool_call_id.as_deref() } else { None },
    }
}

/// Text alone, or (only where a user message carries images) the text first, then each image
/// as an `image_url` data URL; an image without data becomes a line of text. Tool messages
/// stay strings: the chat completions API takes no images there.
fn wire_content(m: &ChatMessage) -> WireContent<'_> {
    if m.images.is_empty() || m.role != Role::User {
        return WireContent::Text(&m.content);
    }
    let mut parts = Vec::with_capacity(m.images.len() + 1);
    let mut text = m.content.clone();
    for image in &m.images {
        match image.data_url() {
            Some(url) => parts.push(WirePart::ImageUrl { image_url: WireImageUrl { url } }),
            None => text = format!("{text}\n{}", image.placeholder()),
        }
    }
    if !text.is_empty() {
        parts.insert(0, WirePart::Text { text });
    }
    WireContent::Parts(parts)
}

/// The request body; public so tests and benchmarks can see what goes on the wire.
pub fn request_body(req: &ChatRequest) -> WireRequest<'_> {
    WireRequest {
        model: &req.model.model,
        messages: req.messages.iter().map(wire_message).collect(),
        stream: req.stream,
        stream_options: req.stream.then_some(StreamOptions { include_usage: true }),
        tools: req
            .tools
            .iter()
            .map(|t| WireTool {
                r#type: "function",
                function: WireFunction { name: &t.name, description: &t.description, parameters: &t.parameters },
            })
            .collect(),
    }
}

/// A non-streamed response: only what is read from it. Every field is optional, as servers
/// differ in what they leave out or send as `null`.
#[derive(Deserialize)]
struct WireResponse {
    choices: Option<Vec<WireChoice>>,
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: Option<WireAnswer>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireAnswer {
    /// A string from every server seen so far; anything else is read as no text.
    content: Option<Value>,
    tool_calls: Option<Vec<WireReturnedCall>>,
}

#[derive(Deserialize)]
struct WireReturnedCall {
    id: Option<String>,
    function: Option<WireReturnedFunction>,
}

#[derive(Deserialize)]
struct WireReturnedFunction {
    name: Option<String>,
    arguments: Option<String>,
}

impl WireResponse {
    fn into_response(self) -> ChatResponse {
        let usage = self.usage.as_ref().map(parse_usage).unwrap_or_default();
        let Some(choice) = self.choices.into_iter().flatten().next() else {
            return ChatResponse { finish_reason: "stop".into(), usage, ..Default::default() };
        };
        let answer = choice.message.unwrap_or(WireAnswer { content: None, tool_calls: None });
        let tool_calls = answer
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                let function = c.function.unwrap_or(WireReturnedFunction { name: None, arguments: None });
                ToolCallRequest {
                    id: c.id.unwrap_or_default(),
                    name: function.name.unwrap_or_default(),
                    arguments: function.arguments.unwrap_or_default(),
                }
            })
            .collect();
        ChatResponse {
            text: answer.content.as_ref().and_then(Value::as_str).unwrap_or_default().to_string(),
            tool_calls,
            finish_reason: choice.finish_reason.unwrap_or_else(|| "stop".into()),
            usage,
        }
    }
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

#[async_trait]
impl ChatProvider for OpenAiCompatible {
    async fn complete(&self, req: &ChatRequest, deltas: Option<&mpsc::Sender<String>>) -> Result<ChatResponse, ProviderError> {
        let response = self.send(req).await?;
        if !req.stream {
            let body: WireResponse =
                response.json().await.map_err(|e| ProviderError::Transient(format!("unreadable response: {}", e.without_url())))?;
            return Ok(body.into_response());
        }
        read_stream(response, deltas).await
    }
}

impl OpenAiCompatible {
    /// Posts the request; a non-success status becomes the matching [`ProviderError`].
    async fn send(&self, req: &ChatRequest) -> Result<reqwest::Response, ProviderError> {
        let url = format!("{}/chat/completions", req.model.base_url.trim_end_matches('/'));
        let mut http = self.client.get()?.post(&url).json(&request_body(req));
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
        Ok(response)
    }
}

/// Decodes the SSE body event by event, forwarding text deltas as they arrive.
async fn read_stream(response: reqwest::Response, deltas: Option<&mpsc::Sender<String>>) -> Result<ChatResponse, ProviderError> {
    let mut answer = StreamedAnswer::default();
    let mut decoder = SseDecoder::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ProviderError::Transient(format!("stream interrupted: {}", e.without_url())))?;
        for data in decoder.feed(&chunk) {
            answer.apply(&data, deltas).await?;
        }
    }
    answer.finish()
}

/// What a stream has said so far.
struct StreamedAnswer {
    out: ChatResponse,
    tools: ToolCallAssembler,
    /// The server sent `[DONE]`.
    done: bool,
}

impl Default for StreamedAnswer {
    fn default() -> Self {
        Self { out: ChatResponse { finish_reason: "stop".into(), ..Default::default() }, tools: ToolCallAssembler::default(), done: false }
    }
}

impl StreamedAnswer {
    /// Folds one SSE `data:` payload in; an error event ends the stream.
    async fn apply(&mut self, data: &str, deltas: Option<&mpsc::Sender<String>>) -> Result<(), ProviderError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            tracing::debug!("skipping an unparsable stream event");
            return Ok(());
        };
        if let Some(err) = event.get("error") {
            return Err(ProviderError::Transient(format!(
                "provider stream error: {}",
                err.get("message").and_then(Value::as_str).unwrap_or("unknown")
            )));
        }
        if let Some(usage) = event.get("usage").filter(|u| !u.is_null()) {
            self.out.usage = parse_usage(usage);
        }
        if let Some(choice) = event.pointer("/choices/0") {
            self.apply_choice(choice, deltas).await;
        }
        Ok(())
    }

    async fn apply_choice(&mut self, choice: &Value, deltas: Option<&mpsc::Sender<String>>) {
        if let Some(text) = choice.pointer("/delta/content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.out.text.push_str(text);
            if let Some(tx) = deltas {
                // The consumer may have gone (client disconnected); the turn goes on.
                let _ = tx.send(text.to_string()).await;
            }
        }
        if let Some(calls) = choice.pointer("/delta/tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.tools.apply(call);
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.out.finish_reason = reason.to_string();
        }
    }

    /// A stream cut before `[DONE]` still counts if it said something.
    fn finish(self) -> Result<ChatResponse, ProviderError> {
        let mut out = self.out;
        if !self.done && out.text.is_empty() && self.tools.calls.is_empty() {
            return Err(ProviderError::Transient("the stream ended without an answer".into()));
        }
        out.tool_calls = self.tools.calls;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::providers::ModelSpec;
    use crate::agent::tools::ToolSchema;
    use serde_json::json;

    fn request(messages: Vec<ChatMessage>, stream: bool) -> ChatRequest {
        ChatRequest {
            model: ModelSpec { model: "gpt-test".into(), provider: None, base_url: "http://127.0.0.1:1/v1".into(), api_key: None },
            messages,
            tools: vec![std::sync::Arc::new(ToolSchema {
                name: "terminal".into(),
                description: "Run a command".into(),
                parameters: json!({"type": "object"}),
            })],
            stream,
        }
    }

    #[test]
    fn a_tool_conversation_goes_on_the_wire_in_openai_shape() {
        let call = ToolCallRequest { id: "call_1".into(), name: "terminal".into(), arguments: r#"{"command":"ls"}"#.into() };
        let messages = vec![
            ChatMessage::system("You are Hermes."),
            ChatMessage::user("list files"),
            ChatMessage { tool_calls: vec![call], ..ChatMessage::assistant("") },
            ChatMessage {
                tool_call_id: Some("call_1".into()),
                tool_name: Some("terminal".into()),
                ..ChatMessage::new(Role::Tool, "a.txt")
            },
            ChatMessage::assistant("There is a.txt."),
        ];
        let body = serde_json::to_value(request_body(&request(messages, true))).expect("serializes");
        assert_eq!(
            body,
            json!({
                "model": "gpt-test",
                "stream": true,
                "stream_options": {"include_usage": true},
                "messages": [
                    {"role": "system", "content": "You are Hermes."},
                    {"role": "user", "content": "list files"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\":\"ls\"}"}}
                    ]},
                    {"role": "tool", "content": "a.txt", "tool_call_id": "call_1"},
                    {"role": "assistant", "content": "There is a.txt."}
                ],
                "tools": [{"type": "function", "function": {"name": "terminal", "description": "Run a command", "parameters": {"type": "object"}}}]
            })
        );
        let plain = serde_json::to_value(request_body(&ChatRequest { tools: Vec::new(), ..request(vec![ChatMessage::user("hi")], false) }))
            .expect("serializes");
        assert_eq!(plain, json!({"model": "gpt-test", "stream": false, "messages": [{"role": "user", "content": "hi"}]}));
    }

    fn picture(data: Option<&str>) -> crate::agent::ImagePart {
        crate::agent::ImagePart::test_picture(data)
    }

    #[test]
    fn a_users_picture_goes_as_text_then_an_image_url_data_url() {
        let asked = ChatMessage { images: vec![picture(Some("/9j/4AAQ"))], ..ChatMessage::user("what is this?") };
        let body = serde_json::to_value(request_body(&ChatRequest { tools: Vec::new(), ..request(vec![asked], false) })).unwrap();
        assert_eq!(
            body["messages"][0],
            json!({"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}
            ]})
        );
        let only_picture = ChatMessage { images: vec![picture(Some("AAAA"))], ..ChatMessage::user("") };
        let body = serde_json::to_value(request_body(&ChatRequest { tools: Vec::new(), ..request(vec![only_picture], false) })).unwrap();
        assert_eq!(body["messages"][0]["content"], json!([{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}]));
    }

    #[test]
    fn a_picture_without_data_is_named_in_text() {
        let earlier = ChatMessage { images: vec![picture(None)], ..ChatMessage::user("look at this") };
        let body = serde_json::to_value(request_body(&ChatRequest { tools: Vec::new(), ..request(vec![earlier], false) })).unwrap();
        assert_eq!(
            body["messages"][0]["content"],
            json!([{"type": "text", "text": "look at this\n[an image the user sent earlier (1568x1176), no longer attached]"}])
        );
        assert!(!body.to_string().contains("image_url"));
    }

    #[test]
    fn answers_are_read_whatever_servers_leave_out() {
        let read = |v: Value| serde_json::from_value::<WireResponse>(v).expect("parses").into_response();
        let with_call = read(json!({
            "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 8}}
        }));
        assert_eq!(with_call.text, "");
        assert_eq!(with_call.tool_calls, vec![ToolCallRequest { id: "c1".into(), name: "terminal".into(), arguments: "{}".into() }]);
        assert_eq!(with_call.finish_reason, "tool_calls");
        assert_eq!((with_call.usage.prompt_tokens, with_call.usage.completion_tokens, with_call.usage.cached_tokens), (12, 3, 8));

        let bare = read(json!({"choices": [{"message": {"content": "hello"}}]}));
        assert_eq!((bare.text.as_str(), bare.finish_reason.as_str(), bare.usage), ("hello", "stop", Usage::default()));
        let nothing = read(json!({"choices": null, "usage": null}));
        assert_eq!((nothing.text.as_str(), nothing.tool_calls.len()), ("", 0));
        let parts = read(json!({"choices": [{"message": {"content": [{"type": "text", "text": "x"}]}, "finish_reason": "stop"}]}));
        assert_eq!(parts.text, "");
    }

    /// Feeds SSE payloads in order, forwarding text deltas to a channel.
    async fn fold(payloads: &[&str]) -> (Result<ChatResponse, ProviderError>, Vec<String>) {
        let (tx, mut rx) = mpsc::channel(16);
        let mut answer = StreamedAnswer::default();
        let mut result = None;
        for data in payloads {
            if let Err(e) = answer.apply(data, Some(&tx)).await {
                result = Some(Err(e));
                break;
            }
        }
        drop(tx);
        let mut forwarded = Vec::new();
        while let Some(text) = rx.recv().await {
            forwarded.push(text);
        }
        (result.unwrap_or_else(|| answer.finish()), forwarded)
    }

    #[tokio::test]
    async fn a_stream_folds_text_tool_calls_usage_and_finish_reason() {
        let (answer, forwarded) = fold(&[
            r#"{"choices":[{"delta":{"content":"Hel"}}]}"#,
            "not json",
            r#"{"choices":[{"delta":{"content":"lo","tool_calls":[{"index":0,"id":"c1","function":{"name":"term","arguments":"{\"a\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"inal","arguments":":1}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}"#,
            "[DONE]",
        ])
        .await;
        let answer = answer.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((answer.text.as_str(), answer.finish_reason.as_str()), ("Hello", "tool_calls"));
        assert_eq!(forwarded, ["Hel", "lo"]);
        let call = &answer.tool_calls[0];
        assert_eq!((call.id.as_str(), call.name.as_str(), call.arguments.as_str()), ("c1", "terminal", r#"{"a":1}"#));
        assert_eq!((answer.usage.prompt_tokens, answer.usage.completion_tokens), (7, 3));
    }

    #[tokio::test]
    async fn a_stream_fails_on_an_error_event_or_when_it_ends_having_said_nothing() {
        let cases: [(&[&str], &str); 3] = [
            (&[r#"{"error":{"message":"overloaded"}}"#], "provider stream error: overloaded"),
            (&[r#"{"error":{}}"#], "provider stream error: unknown"),
            (&[r#"{"choices":[{"delta":{}}]}"#], "the stream ended without an answer"),
        ];
        for (payloads, expected) in cases {
            match fold(payloads).await.0 {
                Err(ProviderError::Transient(message)) => assert_eq!(message, expected),
                other => panic!("{payloads:?}: expected a transient error, got {:?}", other.map(|r| r.text)),
            }
        }
        let (answer, _) = fold(&["[DONE]"]).await;
        let answer = answer.unwrap_or_else(|e| panic!("a finished empty stream is an answer: {e}"));
        assert_eq!((answer.text.as_str(), answer.finish_reason.as_str()), ("", "stop"));
    }
}
