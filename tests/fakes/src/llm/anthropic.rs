//! The Anthropic Messages wire format: `message` bodies, the named SSE
//! events of a streamed message, Anthropic error envelopes, request
//! validation and a deterministic prompt-cache simulation.
//!
//! The same scripted [`Answer`]s as the OpenAI route are rendered here, so a
//! test can switch wire formats without rewriting its script. Pure functions
//! plus one small cache, so the exact bytes a client sees can be unit-tested
//! without a server.

use std::collections::HashSet;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use serde_json::{Map, Value, json};

use super::reply::ToolCall;
use super::wire::{Answer, estimate_tokens};

/// The API rejects requests with more `cache_control` blocks than this.
const MAX_CACHE_BREAKPOINTS: usize = 4;

/// How many blocks before a breakpoint the API looks for an earlier cache
/// entry, so a prefix written at a slightly different breakpoint still hits.
const CACHE_LOOKBACK_BLOCKS: usize = 20;

/// Entries kept by [`PromptCache`] before it forgets everything; bounds
/// memory in long benchmark runs.
const CACHE_CAPACITY: usize = 100_000;

/// The Anthropic error envelope with the `type` Anthropic uses for `status`.
pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        402..=499 => "invalid_request_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// A scripted error body as Anthropic would send it. Scripts are usually
/// written with the OpenAI envelope ([`Reply::error`](super::Reply::error));
/// its message is re-wrapped with the Anthropic `type` for the status. A body
/// that already is an Anthropic envelope is sent untouched.
pub(crate) fn error_from_script(status: u16, scripted: &Value) -> Value {
    if scripted.get("type").and_then(Value::as_str) == Some("error") {
        return scripted.clone();
    }
    let message = scripted
        .pointer("/error/message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| scripted.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("scripted error {status}"));
    error_body(status, &message)
}

/// Token counts of a request's prompt, split the way Anthropic reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PromptUsage {
    pub input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

/// Per-response identity shared by every event of one stream.
#[derive(Debug, Clone)]
pub(crate) struct MessageMeta {
    pub id: String,
    pub model: String,
    pub usage: PromptUsage,
}

/// A deterministic model of Anthropic prompt caching.
///
/// The prompt is the sequence of blocks `tools`, `system`, `messages` in
/// that order. Each block carrying `cache_control` writes a cache entry for
/// the prefix ending at it; a later request reads the longest cached prefix
/// that ends at one of its breakpoints or up to 20 blocks before one. Tokens
/// are counted with the fake's usual four-characters rule. Unlike the real
/// service there is no minimum cacheable length and no expiry, so tests see
/// cache hits with tiny prompts.
#[derive(Debug, Default)]
pub(crate) struct PromptCache {
    entries: HashSet<u64>,
}

impl PromptCache {
    /// The usage of `body` given the earlier requests, and the entries it
    /// writes for the later ones.
    pub(crate) fn usage(&mut self, body: &Value) -> PromptUsage {
        let blocks = prompt_blocks(body);
        // prefixes[i] = (hash, chars) of blocks[..=i]; cache_control itself is
        // not part of the content, so moving a breakpoint keeps the hash.
        let mut hasher = DefaultHasher::new();
        let mut chars = 0;
        let mut prefixes = Vec::with_capacity(blocks.len());
        for block in &blocks {
            block.key.hash(&mut hasher);
            chars += block.chars;
            prefixes.push((hasher.finish(), chars));
        }
        let breakpoints: Vec<usize> = blocks.iter().enumerate().filter(|(_, b)| b.breakpoint).map(|(i, _)| i).collect();

        let read_chars = breakpoints
            .iter()
            .flat_map(|&bp| (bp.saturating_sub(CACHE_LOOKBACK_BLOCKS)..=bp).rev())
            .filter(|&i| self.entries.contains(&prefixes[i].0))
            .map(|i| prefixes[i].1)
            .max()
            .unwrap_or(0);
        let cached_chars = breakpoints.last().map_or(0, |&i| prefixes[i].1).max(read_chars);

        if self.entries.len() + breakpoints.len() > CACHE_CAPACITY {
            self.entries.clear();
        }
        self.entries.extend(breakpoints.iter().map(|&i| prefixes[i].0));

        let tokens = |c: usize| c.div_ceil(4) as u64;
        PromptUsage {
            input_tokens: estimate_tokens(chars - cached_chars),
            cache_creation_input_tokens: tokens(cached_chars) - tokens(read_chars),
            cache_read_input_tokens: tokens(read_chars),
        }
    }
}

/// One block of the prompt, for caching purposes.
struct PromptBlock {
    /// Identity of the block (its role and content without `cache_control`).
    key: String,
    chars: usize,
    breakpoint: bool,
}

fn prompt_block(role: &str, block: &Value) -> PromptBlock {
    let mut stripped = block.clone();
    if let Some(map) = stripped.as_object_mut() {
        map.remove("cache_control");
    }
    PromptBlock { key: format!("{role}:{stripped}"), chars: block_chars(block), breakpoint: block.get("cache_control").is_some() }
}

/// Characters of the text a block holds, the basis of every token count.
fn block_chars(block: &Value) -> usize {
    let len = |v: Option<&Value>| v.and_then(Value::as_str).map_or(0, |s| s.chars().count());
    match block.get("type").and_then(Value::as_str) {
        Some("text") => len(block.get("text")),
        Some("tool_use") => len(block.get("name")) + block.get("input").map_or(0, |i| i.to_string().chars().count()),
        Some("tool_result") => content_text(block.get("content")).chars().count(),
        _ => match block {
            Value::String(s) => s.chars().count(),
            other => other.to_string().chars().count(),
        },
    }
}

fn prompt_blocks(body: &Value) -> Vec<PromptBlock> {
    let mut blocks = Vec::new();
    for tool in body.get("tools").and_then(Value::as_array).into_iter().flatten() {
        blocks.push(prompt_block("tool", tool));
    }
    match body.get("system") {
        Some(Value::String(s)) => blocks.push(prompt_block("system", &json!({"type": "text", "text": s}))),
        Some(Value::Array(parts)) => blocks.extend(parts.iter().map(|p| prompt_block("system", p))),
        _ => {}
    }
    for message in body.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        match message.get("content") {
            Some(Value::String(s)) => blocks.push(prompt_block(role, &json!({"type": "text", "text": s}))),
            Some(Value::Array(parts)) => blocks.extend(parts.iter().map(|p| prompt_block(role, p))),
            _ => {}
        }
    }
    blocks
}

/// Flattens a `content` or `tool_result.content` field: a string, or the
/// text blocks of an array joined by `\n`.
pub(crate) fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// Checks what the real API rejects with a 400, so provider bugs surface in
/// tests instead of in production. `Err` carries the message to send back.
pub(crate) fn validate(anthropic_version: Option<&str>, body: &Value) -> Result<(), String> {
    if anthropic_version.is_none_or(str::is_empty) {
        return Err("anthropic-version: header is required".into());
    }
    if !body.get("model").is_some_and(Value::is_string) {
        return Err("model: Field required".into());
    }
    if body.get("max_tokens").and_then(Value::as_u64).is_none_or(|n| n == 0) {
        return Err("max_tokens: Field required (a positive integer)".into());
    }
    let messages = body.get("messages").and_then(Value::as_array).ok_or("messages: Field required")?;
    if messages.is_empty() {
        return Err("messages: at least one message is required".into());
    }
    match body.get("system") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(parts)) if parts.iter().all(|p| p["type"] == "text" && p["text"].is_string()) => {}
        Some(_) => return Err("system: Input should be a string or a list of text blocks".into()),
    }
    for (i, tool) in body.get("tools").and_then(Value::as_array).into_iter().flatten().enumerate() {
        if !tool.get("name").is_some_and(Value::is_string) || !tool.get("input_schema").is_some_and(Value::is_object) {
            return Err(format!("tools.{i}: name and input_schema are required"));
        }
    }

    let empty = Vec::new();
    let blocks_of = |m: &Value| m.get("content").and_then(Value::as_array).cloned().unwrap_or_else(|| empty.clone());
    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        if role != "user" && role != "assistant" {
            return Err(format!("messages.{i}.role: Input should be 'user' or 'assistant'"));
        }
        match message.get("content") {
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(Value::Array(parts)) if !parts.is_empty() => {}
            _ => return Err(format!("messages.{i}: content must be a non-empty string or list of blocks")),
        }
        let blocks = blocks_of(message);
        if blocks.iter().any(|b| b["type"] == "text" && b["text"].as_str().is_none_or(str::is_empty)) {
            return Err(format!("messages.{i}: text content blocks must be non-empty"));
        }
        let results: Vec<&str> = blocks.iter().filter(|b| b["type"] == "tool_result").filter_map(|b| b["tool_use_id"].as_str()).collect();
        if !results.is_empty() {
            if role != "user" {
                return Err(format!("messages.{i}: tool_result blocks are only allowed in user messages"));
            }
            let leading = blocks.iter().take_while(|b| b["type"] == "tool_result").count();
            if leading != blocks.iter().filter(|b| b["type"] == "tool_result").count() {
                return Err(format!("messages.{i}: tool_result blocks must come before any other content"));
            }
            let previous = i.checked_sub(1).map(|p| blocks_of(&messages[p])).unwrap_or_default();
            let uses: Vec<&str> = previous.iter().filter(|b| b["type"] == "tool_use").filter_map(|b| b["id"].as_str()).collect();
            if let Some(orphan) = results.iter().find(|id| !uses.contains(id)) {
                return Err(format!(
                    "messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: {orphan}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                ));
            }
        }
        if role == "assistant"
            && let Some(next) = messages.get(i + 1)
        {
            let answered = blocks_of(next);
            let answered: Vec<&str> =
                answered.iter().filter(|b| b["type"] == "tool_result").filter_map(|b| b["tool_use_id"].as_str()).collect();
            let unanswered =
                blocks.iter().filter(|b| b["type"] == "tool_use").filter_map(|b| b["id"].as_str()).find(|id| !answered.contains(id));
            if let Some(id) = unanswered {
                return Err(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {id}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                ));
            }
        }
    }

    let breakpoints = prompt_blocks(body).iter().filter(|b| b.breakpoint).count();
    if breakpoints > MAX_CACHE_BREAKPOINTS {
        return Err(format!("A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}."));
    }
    Ok(())
}

fn stop_reason(answer: &Answer) -> &'static str {
    match answer {
        Answer::Text { .. } => "end_turn",
        Answer::ToolCalls(_) => "tool_use",
    }
}

fn output_tokens(answer: &Answer) -> u64 {
    let chars = match answer {
        Answer::Text { content, .. } => content.chars().count(),
        Answer::ToolCalls(calls) => calls.iter().map(|c| c.name.chars().count() + c.arguments.chars().count()).sum(),
    };
    estimate_tokens(chars)
}

fn usage_json(usage: &PromptUsage, output_tokens: u64) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": output_tokens,
    })
}

/// A non-streaming body can only carry arguments that are a JSON object;
/// anything else (a script testing malformed arguments) becomes `{}`.
fn tool_input(call: &ToolCall) -> Value {
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

fn tool_use_block(call: &ToolCall, input: Value) -> Value {
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}

/// A complete non-streaming `message` body.
pub(crate) fn message(meta: &MessageMeta, answer: &Answer) -> Value {
    let content: Vec<Value> = match answer {
        Answer::Text { content, .. } if content.is_empty() => Vec::new(),
        Answer::Text { content, .. } => vec![json!({"type": "text", "text": content})],
        Answer::ToolCalls(calls) => calls.iter().map(|c| tool_use_block(c, tool_input(c))).collect(),
    };
    json!({
        "id": meta.id,
        "type": "message",
        "role": "assistant",
        "model": meta.model,
        "content": content,
        "stop_reason": stop_reason(answer),
        "stop_sequence": null,
        "usage": usage_json(&meta.usage, output_tokens(answer)),
    })
}

/// Every SSE event of a streamed message, each framed as
/// `event: <type>\ndata: …\n\n`, from `message_start` to `message_stop`.
pub(crate) fn stream_events(meta: &MessageMeta, answer: &Answer) -> Vec<String> {
    let mut events = vec![
        json!({"type": "message_start", "message": {
            "id": meta.id,
            "type": "message",
            "role": "assistant",
            "model": meta.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage_json(&meta.usage, 1),
        }}),
        // The real API sends a ping early; clients must skip it.
        json!({"type": "ping"}),
    ];
    match answer {
        Answer::Text { deltas, .. } => {
            events.push(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}));
            events.extend(
                deltas.iter().map(|d| json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": d}})),
            );
            events.push(json!({"type": "content_block_stop", "index": 0}));
        }
        Answer::ToolCalls(calls) => {
            for (index, call) in calls.iter().enumerate() {
                // The block starts with an empty input and the arguments follow
                // as raw JSON text in pieces (the first one empty, as the API
                // does), so clients must concatenate before parsing.
                events.push(json!({"type": "content_block_start", "index": index, "content_block": tool_use_block(call, json!({}))}));
                let mut pieces = vec![String::new()];
                pieces.extend(split_arguments(&call.arguments));
                events.extend(pieces.into_iter().map(|piece| {
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}})
                }));
                events.push(json!({"type": "content_block_stop", "index": index}));
            }
        }
    }
    events.push(json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(answer), "stop_sequence": null},
        "usage": {"output_tokens": output_tokens(answer)},
    }));
    events.push(json!({"type": "message_stop"}));
    events.iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("message"))).collect()
}

/// Arguments in three pieces of near-equal char count (fewer when shorter).
fn split_arguments(arguments: &str) -> Vec<String> {
    let chars: Vec<char> = arguments.chars().collect();
    let size = chars.len().div_ceil(3).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> MessageMeta {
        MessageMeta {
            id: "msg_fake_1".into(),
            model: "claude-test".into(),
            usage: PromptUsage { input_tokens: 3, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
        }
    }

    fn events(answer: &Answer) -> Vec<(String, Value)> {
        stream_events(&meta(), answer)
            .iter()
            .map(|e| {
                let (head, data) = e.trim_end().split_once('\n').unwrap();
                (head.trim_start_matches("event: ").to_owned(), serde_json::from_str(data.trim_start_matches("data: ")).unwrap())
            })
            .collect()
    }

    fn body(system: &str, user: &[&str]) -> Value {
        let messages: Vec<Value> = user
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                json!({"role": role, "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]})
            })
            .collect();
        json!({"model": "m", "max_tokens": 10, "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}], "messages": messages})
    }

    #[test]
    fn error_types_follow_the_status() {
        for (status, kind) in [
            (400, "invalid_request_error"),
            (401, "authentication_error"),
            (403, "permission_error"),
            (429, "rate_limit_error"),
            (500, "api_error"),
            (529, "overloaded_error"),
        ] {
            assert_eq!(error_body(status, "m")["error"]["type"], kind, "{status}");
            assert_eq!(error_body(status, "m")["type"], "error");
        }
    }

    #[test]
    fn scripted_openai_errors_are_rewrapped_and_anthropic_ones_kept() {
        let openai = json!({"error": {"message": "bad key", "type": "invalid_request_error", "param": null, "code": null}});
        assert_eq!(
            error_from_script(401, &openai),
            json!({"type": "error", "error": {"type": "authentication_error", "message": "bad key"}})
        );
        let own = json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}});
        assert_eq!(error_from_script(500, &own), own);
    }

    #[test]
    fn message_body_shapes() {
        let text = message(&meta(), &Answer::text("hello".into()));
        assert_eq!(text["content"], json!([{"type": "text", "text": "hello"}]));
        assert_eq!(text["stop_reason"], "end_turn");
        assert_eq!(text["usage"]["output_tokens"], 2);
        assert_eq!(text["usage"]["input_tokens"], 3);
        let tools = message(
            &meta(),
            &Answer::ToolCalls(vec![ToolCall::new("t1", "terminal", r#"{"command":"ls"}"#), ToolCall::new("t2", "x", "oops")]),
        );
        assert_eq!(tools["stop_reason"], "tool_use");
        assert_eq!(tools["content"][0], json!({"type": "tool_use", "id": "t1", "name": "terminal", "input": {"command": "ls"}}));
        assert_eq!(tools["content"][1]["input"], json!({}));
    }

    #[test]
    fn stream_event_sequence() {
        let got = events(&Answer::chunks(vec!["a".into(), "b".into()]));
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert!(got.iter().all(|(name, data)| data["type"] == name.as_str()), "event name matches the data type");
        assert_eq!(got[3].1["delta"]["text"], "a");
        assert_eq!(got[6].1["delta"]["stop_reason"], "end_turn");
    }

    #[test]
    fn streamed_tool_arguments_join_to_the_whole() {
        let got =
            events(&Answer::ToolCalls(vec![ToolCall::new("t1", "terminal", r#"{"command":"ls -la"}"#), ToolCall::new("t2", "n", "{}")]));
        for index in 0..2 {
            let joined: String = got
                .iter()
                .filter(|(_, d)| d["index"] == index && d["delta"]["type"] == "input_json_delta")
                .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
                .collect();
            assert_eq!(joined, if index == 0 { r#"{"command":"ls -la"}"# } else { "{}" });
        }
        assert_eq!(got.iter().filter(|(n, _)| n == "content_block_start").count(), 2);
        assert_eq!(got.iter().rev().nth(1).map(|(_, d)| d["delta"]["stop_reason"].clone()), Some(json!("tool_use")));
    }

    #[test]
    fn cache_writes_first_then_reads_the_same_prefix() {
        let mut cache = PromptCache::default();
        let first = cache.usage(&body("system prompt!", &["hello there"]));
        assert_eq!(first.cache_read_input_tokens, 0);
        assert!(first.cache_creation_input_tokens > 0);
        let second = cache.usage(&body("system prompt!", &["hello there"]));
        assert_eq!(second.cache_read_input_tokens, first.cache_creation_input_tokens);
        assert_eq!(second.cache_creation_input_tokens, 0);
        // A longer conversation reads the old prefix and writes only its tail.
        let third = cache.usage(&body("system prompt!", &["hello there", "hi", "more"]));
        assert_eq!(third.cache_read_input_tokens, first.cache_creation_input_tokens);
        assert!(third.cache_creation_input_tokens > 0);
        // A different system prompt shares nothing.
        let other = cache.usage(&body("another system", &["hello there"]));
        assert_eq!(other.cache_read_input_tokens, 0);
    }

    #[test]
    fn no_breakpoints_no_cache() {
        let mut cache = PromptCache::default();
        let plain = json!({"model": "m", "max_tokens": 1, "system": "s", "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(cache.usage(&plain), PromptUsage { input_tokens: 1, ..Default::default() });
        assert_eq!(cache.usage(&plain), PromptUsage { input_tokens: 1, ..Default::default() });
    }

    #[test]
    fn validation_catches_what_the_api_rejects() {
        let ok = body("s", &["hi"]);
        assert_eq!(validate(Some("2023-06-01"), &ok), Ok(()));
        assert!(validate(None, &ok).unwrap_err().contains("anthropic-version"));
        let mut no_max = ok.clone();
        no_max.as_object_mut().unwrap().remove("max_tokens");
        assert!(validate(Some("v"), &no_max).unwrap_err().contains("max_tokens"));
        let system_role = json!({"model": "m", "max_tokens": 1, "messages": [{"role": "system", "content": "x"}]});
        assert!(validate(Some("v"), &system_role).unwrap_err().contains("role"));
        let five = body("s", &["a", "b", "c", "d"]);
        assert!(validate(Some("v"), &five).unwrap_err().contains("maximum of 4"));
        let orphan = json!({"model": "m", "max_tokens": 1, "messages": [
            {"role": "user", "content": "go"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}]},
        ]});
        assert!(validate(Some("v"), &orphan).unwrap_err().contains("tool_use_id"));
        let unanswered = json!({"model": "m", "max_tokens": 1, "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
            {"role": "user", "content": "what?"},
        ]});
        assert!(validate(Some("v"), &unanswered).unwrap_err().contains("without `tool_result`"));
        let text_first = json!({"model": "m", "max_tokens": 1, "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
            {"role": "user", "content": [{"type": "text", "text": "note"}, {"type": "tool_result", "tool_use_id": "t1"}]},
        ]});
        assert!(validate(Some("v"), &text_first).unwrap_err().contains("before any other content"));
        let empty_text = json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]});
        assert!(validate(Some("v"), &empty_text).unwrap_err().contains("non-empty"));
    }
}
