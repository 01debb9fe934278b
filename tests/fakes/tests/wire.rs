//! The fakes over real HTTP, as the gateway's tests rely on them: OpenAI's JSON and SSE shapes,
//! tool calls, errors, hangs, the echo default, and the receiver's recording and injected failures.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

use hermes_fakes::{FakeLlm, Receiver, Reply, ToolCall};
use serde_json::{Value, json};
use std::time::Duration;

async fn post(llm: &FakeLlm, body: Value) -> reqwest::Response {
    reqwest::Client::new().post(format!("{}/chat/completions", llm.base_url())).bearer_auth("sk-test").json(&body).send().await.unwrap()
}

fn user(text: &str, stream: bool) -> Value {
    json!({"model": "m", "stream": stream, "stream_options": {"include_usage": true}, "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": text}]})
}

/// The `data:` payloads of an SSE body.
async fn sse_data(response: reqwest::Response) -> Vec<String> {
    let text = response.text().await.unwrap();
    text.lines().filter_map(|l| l.strip_prefix("data: ")).map(str::to_string).collect()
}

#[tokio::test]
async fn echo_by_default_and_records_the_request() {
    let llm = FakeLlm::start().await;
    let answer: Value = post(&llm, user("hello", false)).await.json().await.unwrap();
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["choices"][0]["message"]["content"], "echo: hello");
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");
    assert!(answer["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    let recorded = &llm.requests()[0];
    assert_eq!(recorded.authorization.as_deref(), Some("Bearer sk-test"));
    assert!(!recorded.stream);
    assert_eq!(recorded.last_user_text().as_deref(), Some("hello"));
    assert_eq!(recorded.messages()[0], ("system".to_string(), "s".to_string()));
    let models: Value = reqwest::get(format!("{}/models", llm.base_url())).await.unwrap().json().await.unwrap();
    assert_eq!(models["object"], "list");
}

#[tokio::test]
async fn streams_scripted_chunks_then_usage_then_done() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::chunks(["Hel", "lo ", "there"]));
    let data = sse_data(post(&llm, user("hi", true)).await).await;
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    let text: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, "Hello there");
    let deltas = chunks.iter().filter(|c| c["choices"][0]["delta"]["content"].is_string()).count();
    assert_eq!(deltas, 3, "one delta per scripted chunk");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"].as_array().unwrap().len(), 0, "include_usage ends with an empty-choices usage chunk");
    assert!(usage["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert!(llm.requests()[0].stream);
}

#[tokio::test]
async fn tool_calls_in_both_modes() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::ToolCalls(vec![
        ToolCall::new("call_1", "terminal", r#"{"command":"ls"}"#),
        ToolCall::new("call_2", "read_file", r#"{"path":"a"}"#),
    ]));
    let whole: Value = post(&llm, user("x", false)).await.json().await.unwrap();
    assert_eq!(whole["choices"][0]["finish_reason"], "tool_calls");
    let calls = whole["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["function"]["name"], "terminal");
    assert_eq!(calls[1]["id"], "call_2");

    llm.push(Reply::tool_call("call_9", "terminal", r#"{"command":"echo hi"}"#));
    let data = sse_data(post(&llm, user("x", true)).await).await;
    let chunks: Vec<Value> = data.iter().filter(|d| *d != "[DONE]").map(|d| serde_json::from_str(d).unwrap()).collect();
    let deltas: Vec<&Value> = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array()).flatten().collect();
    assert_eq!(deltas[0]["id"], "call_9");
    assert_eq!(deltas[0]["function"]["name"], "terminal");
    let arguments: String = deltas.iter().filter_map(|d| d["function"]["arguments"].as_str()).collect();
    assert_eq!(arguments, r#"{"command":"echo hi"}"#, "argument pieces join to the whole");
    assert!(deltas.iter().all(|d| d["index"] == 0));
    assert!(chunks.iter().any(|c| c["choices"][0]["finish_reason"] == "tool_calls"));
}

#[tokio::test]
async fn errors_carry_status_openai_body_and_retry_after() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::rate_limited(7));
    llm.push(Reply::error(401, "bad key"));
    let limited = post(&llm, user("x", false)).await;
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["retry-after"], "7");
    let body: Value = limited.json().await.unwrap();
    assert!(body["error"]["message"].is_string());
    let auth = post(&llm, user("x", false)).await;
    assert_eq!(auth.status(), 401);
    let body: Value = auth.json().await.unwrap();
    assert_eq!(body["error"]["message"], "bad key");
    // The script is used up: back to the default.
    let ok: Value = post(&llm, user("again", false)).await.json().await.unwrap();
    assert_eq!(ok["choices"][0]["message"]["content"], "echo: again");
}

#[tokio::test]
async fn hang_is_recorded_before_hanging_and_released_by_shutdown() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::Hang);
    let request = tokio::spawn({
        let llm = llm.clone();
        async move { post(&llm, user("wait", false)).await.status() }
    });
    assert!(llm.wait_for_requests(1, Duration::from_secs(5)).await);
    assert_eq!(llm.requests()[0].last_user_text().as_deref(), Some("wait"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!request.is_finished(), "a hung request gets no answer");
    llm.shutdown();
    let status = tokio::time::timeout(Duration::from_secs(5), request).await.expect("shutdown releases the hang").unwrap();
    assert_eq!(status, 503);
}

#[tokio::test]
async fn delay_and_default_reply_apply() {
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::text("fixed"));
    llm.push(Reply::text("late").delayed(Duration::from_millis(200)));
    let started = std::time::Instant::now();
    let late: Value = post(&llm, user("x", false)).await.json().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(late["choices"][0]["message"]["content"], "late");
    let fixed: Value = post(&llm, user("x", false)).await.json().await.unwrap();
    assert_eq!(fixed["choices"][0]["message"]["content"], "fixed");
    assert_eq!(llm.request_count(), 2);
}

#[tokio::test]
async fn receiver_records_posts_and_injects_failures() {
    let receiver = Receiver::start().await;
    receiver.fail_next(503, 1);
    let client = reqwest::Client::new();
    let failed = client.post(receiver.url("/hook?token=a")).header("X-Test", "1").json(&json!({"n": 1})).send().await.unwrap();
    assert_eq!(failed.status(), 503);
    let ok = client.post(receiver.url("/hook")).json(&json!({"n": 2})).send().await.unwrap();
    assert!(ok.status().is_success());
    assert!(receiver.wait_for(2, Duration::from_secs(5)).await);
    let got = receiver.received();
    assert_eq!(got[0].path, "/hook");
    assert_eq!(got[0].query.as_deref(), Some("token=a"));
    assert_eq!(got[0].header("x-test"), Some("1"));
    assert_eq!(got[0].status, 503);
    assert_eq!(got[1].body["n"], 2);
    assert_eq!(got[1].status, 200);
}
