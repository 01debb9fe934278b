//! The fake's Anthropic Messages route over real HTTP: message bodies, named SSE events, tool
//! use, Anthropic error envelopes, request validation, the simulated prompt cache, and the script
//! and recording it shares with the OpenAI route.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

use hermes_fakes::{FakeLlm, Reply, ToolCall};
use serde_json::{Value, json};
use std::time::Duration;

async fn post_with(llm: &FakeLlm, body: &Value, version: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().post(format!("{}/messages", llm.base_url())).header("x-api-key", "sk-ant-test").json(body);
    if let Some(v) = version {
        request = request.header("anthropic-version", v);
    }
    request.send().await.unwrap()
}

async fn post(llm: &FakeLlm, body: &Value) -> reqwest::Response {
    post_with(llm, body, Some("2023-06-01")).await
}

fn user(text: &str, stream: bool) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 64,
        "stream": stream,
        "system": [{"type": "text", "text": "You are a test.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]}],
    })
}

/// `(event name, data)` of every event of an SSE body.
async fn sse_events(response: reqwest::Response) -> Vec<(String, Value)> {
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let name = block.lines().find_map(|l| l.strip_prefix("event: ")).unwrap().to_string();
            let data = block.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            (name, serde_json::from_str(data).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn echo_message_and_records_anthropic_request() {
    let llm = FakeLlm::start().await;
    let answer: Value = post(&llm, &user("hello", false)).await.json().await.unwrap();
    assert_eq!(answer["type"], "message");
    assert_eq!(answer["role"], "assistant");
    assert_eq!(answer["model"], "claude-test");
    assert_eq!(answer["content"], json!([{"type": "text", "text": "echo: hello"}]));
    assert_eq!(answer["stop_reason"], "end_turn");
    assert!(answer["id"].as_str().unwrap().starts_with("msg_"));
    assert!(answer["usage"]["output_tokens"].as_u64().unwrap() > 0);
    let recorded = &llm.requests()[0];
    assert_eq!(recorded.wire(), "anthropic");
    assert_eq!(recorded.path, "/v1/messages");
    assert_eq!(recorded.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(recorded.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(recorded.authorization, None);
    assert_eq!(recorded.system_text().as_deref(), Some("You are a test."));
    assert_eq!(recorded.last_user_text().as_deref(), Some("hello"));
    assert_eq!(recorded.messages()[0], ("system".to_string(), "You are a test.".to_string()));
}

#[tokio::test]
async fn streams_named_events_with_scripted_deltas() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::chunks(["Hel", "lo ", "there"]));
    let events = sse_events(post(&llm, &user("hi", true)).await).await;
    assert!(events.iter().all(|(name, data)| data["type"] == name.as_str()));
    assert_eq!(events.first().map(|(n, _)| n.as_str()), Some("message_start"));
    assert_eq!(events.last().map(|(n, _)| n.as_str()), Some("message_stop"));
    assert!(events.iter().any(|(n, _)| n == "ping"));
    let deltas: Vec<&str> = events.iter().filter_map(|(_, d)| d["delta"]["text"].as_str()).collect();
    assert_eq!(deltas, vec!["Hel", "lo ", "there"], "one text_delta per scripted chunk, in order");
    let start = &events[0].1["message"];
    assert!(start["usage"]["input_tokens"].as_u64().unwrap() > 0);
    let delta = events.iter().find(|(n, _)| n == "message_delta").unwrap();
    assert_eq!(delta.1["delta"]["stop_reason"], "end_turn");
    assert!(delta.1["usage"]["output_tokens"].as_u64().unwrap() > 0);
    assert!(llm.requests()[0].stream);
}

#[tokio::test]
async fn tool_use_in_both_modes() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::ToolCalls(vec![
        ToolCall::new("toolu_1", "terminal", r#"{"command":"ls"}"#),
        ToolCall::new("toolu_2", "read_file", r#"{"path":"a"}"#),
    ]));
    let whole: Value = post(&llm, &user("x", false)).await.json().await.unwrap();
    assert_eq!(whole["stop_reason"], "tool_use");
    assert_eq!(whole["content"][0], json!({"type": "tool_use", "id": "toolu_1", "name": "terminal", "input": {"command": "ls"}}));
    assert_eq!(whole["content"][1]["input"], json!({"path": "a"}));

    llm.push(Reply::ToolCalls(vec![
        ToolCall::new("toolu_3", "terminal", r#"{"command":"echo hi"}"#),
        ToolCall::new("toolu_4", "read_file", r#"{"path":"b.txt"}"#),
    ]));
    let events = sse_events(post(&llm, &user("x", true)).await).await;
    let starts: Vec<&Value> = events.iter().filter(|(n, _)| n == "content_block_start").map(|(_, d)| d).collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[1]["index"], 1);
    assert_eq!(starts[1]["content_block"]["id"], "toolu_4");
    assert_eq!(starts[1]["content_block"]["name"], "read_file");
    for (index, expected) in [(0, r#"{"command":"echo hi"}"#), (1, r#"{"path":"b.txt"}"#)] {
        let pieces: Vec<&str> = events
            .iter()
            .filter(|(_, d)| d["index"] == index && d["delta"]["type"] == "input_json_delta")
            .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
            .collect();
        assert!(pieces.len() >= 2, "arguments arrive in pieces");
        assert_eq!(pieces.concat(), expected);
    }
    assert!(events.iter().any(|(_, d)| d["delta"]["stop_reason"] == "tool_use"));
}

#[tokio::test]
async fn errors_use_the_anthropic_envelope() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::rate_limited(7));
    llm.push(Reply::error(401, "invalid x-api-key"));
    llm.push(Reply::error(529, "Overloaded"));
    llm.push(Reply::error(500, "Internal server error"));
    llm.push(Reply::error(400, "prompt is too long: 300000 tokens > 200000 maximum"));

    let limited = post(&llm, &user("x", false)).await;
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["retry-after"], "7");
    let body: Value = limited.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "rate_limit_error");

    for (status, kind, message) in [
        (401, "authentication_error", "invalid x-api-key"),
        (529, "overloaded_error", "Overloaded"),
        (500, "api_error", "Internal server error"),
        (400, "invalid_request_error", "prompt is too long: 300000 tokens > 200000 maximum"),
    ] {
        let response = post(&llm, &user("x", false)).await;
        assert_eq!(response.status(), status);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body, json!({"type": "error", "error": {"type": kind, "message": message}}));
    }
    let ok: Value = post(&llm, &user("again", false)).await.json().await.unwrap();
    assert_eq!(ok["content"][0]["text"], "echo: again");
}

#[tokio::test]
async fn invalid_requests_get_400_without_eating_the_script() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::text("kept"));
    let no_version = post_with(&llm, &user("x", false), None).await;
    assert_eq!(no_version.status(), 400);
    let body: Value = no_version.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("anthropic-version"));

    let system_role =
        json!({"model": "m", "max_tokens": 8, "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]});
    assert_eq!(post(&llm, &system_role).await.status(), 400);

    let ok: Value = post(&llm, &user("x", false)).await.json().await.unwrap();
    assert_eq!(ok["content"][0]["text"], "kept");
    assert_eq!(llm.request_count(), 3, "rejected requests are still recorded");
}

#[tokio::test]
async fn cache_written_first_and_read_on_the_identical_prefix() {
    let llm = FakeLlm::start().await;
    let first: Value = post(&llm, &user("same question", false)).await.json().await.unwrap();
    assert_eq!(first["usage"]["cache_read_input_tokens"], 0);
    let written = first["usage"]["cache_creation_input_tokens"].as_u64().unwrap();
    assert!(written > 0);

    let events = sse_events(post(&llm, &user("same question", true)).await).await;
    let usage = &events[0].1["message"]["usage"];
    assert_eq!(usage["cache_read_input_tokens"].as_u64(), Some(written));
    assert_eq!(usage["cache_creation_input_tokens"], 0);

    // Without breakpoints nothing is cached.
    let mut plain = user("same question", false);
    plain["system"] = json!("You are a test.");
    plain["messages"] = json!([{"role": "user", "content": "same question"}]);
    let uncached: Value = post(&llm, &plain).await.json().await.unwrap();
    assert_eq!(uncached["usage"]["cache_read_input_tokens"], 0);
    assert_eq!(uncached["usage"]["cache_creation_input_tokens"], 0);
}

#[tokio::test]
async fn both_routes_share_script_and_recording() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::text("first"));
    llm.push(Reply::text("second"));
    let openai: Value = reqwest::Client::new()
        .post(format!("{}/chat/completions", llm.base_url()))
        .json(&json!({"model": "m", "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(openai["choices"][0]["message"]["content"], "first");
    let anthropic: Value = post(&llm, &user("hi", false)).await.json().await.unwrap();
    assert_eq!(anthropic["content"][0]["text"], "second");
    let wires: Vec<String> = llm.requests().iter().map(|r| r.wire().to_string()).collect();
    assert_eq!(wires, vec!["openai", "anthropic"]);
    assert_eq!(llm.requests()[0].system_text().as_deref(), Some("sys"));
}

#[tokio::test]
async fn hang_is_released_by_shutdown_with_an_anthropic_error() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::Hang);
    let request = tokio::spawn({
        let llm = llm.clone();
        async move {
            let response = post(&llm, &user("wait", false)).await;
            (response.status(), response.json::<Value>().await.unwrap())
        }
    });
    assert!(llm.wait_for_requests(1, Duration::from_secs(5)).await);
    llm.shutdown();
    let (status, body) = tokio::time::timeout(Duration::from_secs(5), request).await.expect("shutdown releases the hang").unwrap();
    assert_eq!(status, 503);
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "api_error");
}
