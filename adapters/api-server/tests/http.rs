//! The API server over real loopback HTTP, with a fake gateway answering through the adapter.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

mod support;

use hermes_adapter::{ChatTarget, ChatType, OutboundMessage, Platform, PlatformAdapter, SendError, StreamEvent};
use hermes_api_server::{ApiServerAdapter, ApiServerError, ApiServerSettings};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;
use support::{Harness, KEY, chat, parse_sse, settings};

const SESSION_HEADER: &str = "x-hermes-session-id";

fn assert_error_shape(body: &Value) {
    let error = &body["error"];
    assert!(error["message"].is_string(), "{body}");
    assert!(error["type"].is_string(), "{body}");
    assert!(error.get("param").is_some() && error.get("code").is_some(), "{body}");
}

fn outbound(reply_to: &str, text: &str) -> OutboundMessage {
    OutboundMessage {
        target: ChatTarget { platform: Platform::new("api_server"), chat_id: "x".into(), thread_id: None },
        text: text.into(),
        reply_to: Some(reply_to.into()),
        idempotency_key: "k".into(),
        is_final: true,
        usage: None,
        finish_reason: Some("stop".into()),
        buttons: Vec::new(),
        file: None,
    }
}

#[tokio::test]
async fn auth_is_required_except_for_health() {
    let h = Harness::start().await;
    for path in ["/health", "/v1/health"] {
        let res = h.client.get(h.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.json::<Value>().await.unwrap(), json!({"status": "ok", "platform": "api_server"}));
    }
    let expected = json!({"error": {
        "message": "Invalid API key. Pass it as 'Authorization: Bearer <API_SERVER_KEY>'.",
        "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}});
    let no_key = h.client.get(h.url("/v1/models")).send().await.unwrap();
    assert_eq!(no_key.status(), 401);
    assert_eq!(no_key.json::<Value>().await.unwrap(), expected);
    let wrong = h.client.post(h.url("/v1/chat/completions")).bearer_auth("nope").json(&chat("hi")).send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let unknown = h.client.get(h.url("/nowhere")).send().await.unwrap();
    assert_eq!(unknown.status(), 401, "unknown routes are guarded too");
    assert!(h.events().is_empty());

    let models = h.get("/v1/models").send().await.unwrap();
    assert_eq!(models.status(), 200);
    let models: Value = models.json().await.unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "hermes-test");
    assert_eq!(models["data"][0]["object"], "model");
    assert_eq!(models["data"][0]["owned_by"], "hermes");
    assert!(models["data"][0]["created"].as_i64().unwrap() > 1_600_000_000);

    let missing = h.get("/nowhere").send().await.unwrap();
    assert_eq!(missing.status(), 404);
    assert_error_shape(&missing.json().await.unwrap());
    let wrong_method = h.get("/v1/chat/completions").send().await.unwrap();
    assert_eq!(wrong_method.status(), 405);
    assert_error_shape(&wrong_method.json().await.unwrap());
    assert!(h.health.is_connected());
    assert!(h.health.last_progress_ms() > 0);
}

#[tokio::test]
async fn non_stream_completion_round_trip() {
    let h = Harness::start().await;
    let res = h.post("/v1/chat/completions", chat("hi")).header(SESSION_HEADER, "conv-1").send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()[SESSION_HEADER], "conv-1");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["choices"][0]["message"], json!({"role": "assistant", "content": "echo: hi"}));
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["usage"], json!({"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}));

    let event = h.last_event();
    let request_id = event.message_id.clone().unwrap();
    assert_eq!(event.event_id, format!("api_server:{request_id}"));
    assert!(event.authorized_upstream);
    assert_eq!(event.source.platform.as_str(), "api_server");
    assert_eq!(event.source.chat_type, ChatType::Dm);
    assert_eq!(event.source.chat_id, "conv-1");
    assert_eq!(event.source.user_id.as_deref(), Some("api"));
    assert_eq!(event.text, "hi");
}

#[tokio::test]
async fn model_defaults_and_parts_are_joined() {
    let h = Harness::start().await;
    let body = json!({"messages": [{"role": "user", "content": "parts"}]});
    let res: Value = h.post("/v1/chat/completions", body).send().await.unwrap().json().await.unwrap();
    assert_eq!(res["model"], "hermes-test");
    assert_eq!(res["choices"][0]["message"]["content"], "part one\n\npart two");
}

#[tokio::test]
async fn stream_completion_has_openai_chunks_without_duplicated_text() {
    let h = Harness::start().await;
    let mut body = chat("stream");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let res = h.post("/v1/chat/completions", body).header(SESSION_HEADER, "s1").send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    assert_eq!(res.headers()[SESSION_HEADER], "s1");
    let events = parse_sse(&res.text().await.unwrap());
    assert!(events.iter().all(|e| e.event.is_none()), "no named events here: {events:?}");
    let (last, chunks) = events.split_last().unwrap();
    assert_eq!(last.data, "[DONE]");
    let chunks: Vec<Value> = chunks.iter().map(|e| e.json()).collect();
    let id = chunks[0]["id"].clone();
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["id"], id);
        assert_eq!(chunk["model"], "gpt-test");
    }
    assert_eq!(chunks[0]["choices"][0]["delta"], json!({"role": "assistant"}));
    let n = chunks.len();
    let text: String = chunks[1..n - 2].iter().map(|c| c["choices"][0]["delta"]["content"].as_str().expect("content delta")).collect();
    assert_eq!(text, "Hello there friend");
    assert_eq!(chunks[n - 2]["choices"][0]["delta"], json!({}));
    assert_eq!(chunks[n - 2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[n - 1]["choices"], json!([]));
    assert_eq!(chunks[n - 1]["usage"]["total_tokens"], 16);
}

#[tokio::test]
async fn stream_without_usage_ends_with_finish_then_done() {
    let h = Harness::start().await;
    let mut body = chat("hello");
    body["stream"] = json!(true);
    let events = parse_sse(&h.post("/v1/chat/completions", body).send().await.unwrap().text().await.unwrap());
    let data: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
    assert_eq!(data.last(), Some(&"[DONE]"));
    let finish = events[events.len() - 2].json();
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert!(finish.get("usage").is_none());
    assert_eq!(events[1].json()["choices"][0]["delta"]["content"], "echo: hello");
}

#[tokio::test]
async fn tool_progress_is_sent_as_named_events() {
    let h = Harness::start().await;
    let mut body = chat("tools");
    body["stream"] = json!(true);
    let events = parse_sse(&h.post("/v1/chat/completions", body).send().await.unwrap().text().await.unwrap());
    let progress: Vec<Value> = events.iter().filter(|e| e.event.as_deref() == Some("hermes.tool.progress")).map(|e| e.json()).collect();
    assert_eq!(
        progress,
        vec![
            json!({"type": "tool_call", "id": "call_1", "name": "terminal", "arguments": "{\"cmd\":\"date\"}"}),
            json!({"type": "tool_result", "id": "call_1", "name": "terminal", "content": "noon"}),
        ]
    );
    let text: String = events
        .iter()
        .filter(|e| e.event.is_none() && e.data != "[DONE]")
        .filter_map(|e| e.json()["choices"][0]["delta"]["content"].as_str().map(str::to_string))
        .collect();
    assert_eq!(text, "It is noon.");
}

#[tokio::test]
async fn conversation_identity() {
    let h = Harness::start().await;
    let mut chat_ids = Vec::new();
    for _ in 0..2 {
        let mut body = chat("hi");
        body["user"] = json!("alice");
        let res = h.post("/v1/chat/completions", body).send().await.unwrap();
        assert_eq!(res.headers()[SESSION_HEADER], "user:alice");
        res.bytes().await.unwrap();
        let event = h.last_event();
        assert_eq!(event.source.user_id.as_deref(), Some("alice"));
        chat_ids.push(event.source.chat_id);
    }
    assert_eq!(chat_ids, vec!["user:alice", "user:alice"]);

    let mut body = chat("hi");
    body["user"] = json!("alice");
    let res = h.post("/v1/chat/completions", body).header(SESSION_HEADER, "mine").send().await.unwrap();
    assert_eq!(res.headers()[SESSION_HEADER], "mine");
    res.bytes().await.unwrap();
    assert_eq!(h.last_event().source.chat_id, "mine");

    let mut fresh = HashSet::new();
    for _ in 0..2 {
        let res = h.post("/v1/chat/completions", chat("hi")).send().await.unwrap();
        let header = res.headers()[SESSION_HEADER].to_str().unwrap().to_string();
        res.bytes().await.unwrap();
        assert_eq!(h.last_event().source.chat_id, header);
        fresh.insert(header);
    }
    assert_eq!(fresh.len(), 2, "stateless requests get distinct conversations");
}

#[tokio::test]
async fn context_and_system_messages_are_carried() {
    let h = Harness::start().await;
    let body = json!({"messages": [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": [{"type": "text", "text": "Hi Ada."}]},
        {"role": "system", "content": "Answer in English."},
        {"role": "user", "content": "What is my name?"},
    ]});
    assert_eq!(h.post("/v1/chat/completions", body).send().await.unwrap().status(), 200);
    let event = h.last_event();
    assert_eq!(event.text, "What is my name?");
    assert_eq!(event.channel_prompt.as_deref(), Some("Be terse.\n\nAnswer in English."));
    let context: Vec<(String, String)> = event.context.into_iter().map(|m| (m.role, m.content)).collect();
    assert_eq!(context, vec![("user".to_string(), "My name is Ada.".to_string()), ("assistant".to_string(), "Hi Ada.".to_string()),]);
}

#[tokio::test]
async fn bad_bodies_are_400_naming_the_field() {
    let h = Harness::start().await;
    let cases = [
        (json!({"model": "m"}), "messages"),
        (json!({"messages": [{"content": "x"}]}), "messages[0].role"),
        (json!({"messages": [{"role": "assistant", "content": "x"}]}), "messages[-1].role"),
        (json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}), "image_url"),
        (json!({"messages": "nope"}), "messages"),
    ];
    for (body, named) in cases {
        let res = h.post("/v1/chat/completions", body.clone()).send().await.unwrap();
        assert_eq!(res.status(), 400, "{body}");
        let err: Value = res.json().await.unwrap();
        assert_error_shape(&err);
        assert_eq!(err["error"]["type"], "invalid_request_error");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{message} should name {named}");
    }
    let malformed = h
        .client
        .post(h.url("/v1/chat/completions"))
        .bearer_auth(KEY)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), 400);
    assert_error_shape(&malformed.json().await.unwrap());
    assert!(h.events().is_empty());
}

#[tokio::test]
async fn oversized_body_is_413() {
    let h = Harness::start().await;
    let big = "x".repeat(5 * 1024 * 1024);
    let res = h.post("/v1/chat/completions", chat(&big)).send().await.unwrap();
    assert_eq!(res.status(), 413);
    assert_error_shape(&res.json().await.unwrap());
}

#[tokio::test]
async fn idempotency_key_duplicate_is_409() {
    let h = Harness::start().await;
    let first = h.post("/v1/chat/completions", chat("hi")).header("Idempotency-Key", "abc").send().await.unwrap();
    assert_eq!(first.status(), 200);
    first.bytes().await.unwrap();
    assert_eq!(h.last_event().event_id, "api_server:idem:abc");
    let again = h.post("/v1/chat/completions", chat("hi")).header("Idempotency-Key", "abc").send().await.unwrap();
    assert_eq!(again.status(), 409);
    assert_error_shape(&again.json().await.unwrap());
    assert_eq!(h.events().len(), 1);
}

#[tokio::test]
async fn inbox_shutting_down_is_503() {
    let h = Harness::start().await;
    h.inbox.shutting_down.store(true, Ordering::SeqCst);
    let res = h.post("/v1/chat/completions", chat("hi")).send().await.unwrap();
    assert_eq!(res.status(), 503);
    assert_error_shape(&res.json().await.unwrap());
}

#[tokio::test]
async fn silent_agent_times_out_with_504_and_late_answer_is_gone() {
    let mut s = settings();
    s.request_timeout = Duration::from_millis(300);
    let h = Harness::with(s).await;
    let res = h.post("/v1/chat/completions", chat("silent")).send().await.unwrap();
    assert_eq!(res.status(), 504);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["type"], "server_error");
    let request_id = h.last_event().message_id.unwrap();
    let late = h.adapter.send(&outbound(&request_id, "too late")).await;
    assert!(matches!(late, Err(SendError::Gone(_))), "{late:?}");
}

#[tokio::test]
async fn unknown_request_ids_are_gone() {
    let h = Harness::start().await;
    assert!(matches!(h.adapter.send(&outbound("nope", "x")).await, Err(SendError::Gone(_))));
    let target = ChatTarget { platform: Platform::new("api_server"), chat_id: "x".into(), thread_id: None };
    let token = StreamEvent::Token { text: "x".into() };
    assert!(matches!(h.adapter.stream(&target, Some("nope"), &token).await, Err(SendError::Gone(_))));
    assert!(matches!(h.adapter.stream(&target, None, &token).await, Err(SendError::Gone(_))));
}

#[tokio::test]
async fn a_disconnected_stream_client_is_gone() {
    let h = Harness::start().await;
    let mut body = chat("silent");
    body["stream"] = json!(true);
    let mut res = h.post("/v1/chat/completions", body).send().await.unwrap();
    assert!(res.chunk().await.unwrap().is_some(), "role chunk arrives first");
    drop(res);
    let request_id = h.last_event().message_id.unwrap();
    let target = ChatTarget { platform: Platform::new("api_server"), chat_id: "x".into(), thread_id: None };
    let token = StreamEvent::Token { text: "x".into() };
    let mut gone = false;
    for _ in 0..100 {
        if let Err(SendError::Gone(_)) = h.adapter.stream(&target, Some(&request_id), &token).await {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "the adapter noticed the client left");
}

#[tokio::test]
async fn sessions_api() {
    let h = Harness::start().await;
    let created = h.client.post(h.url("/api/sessions")).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(created.status(), 201);
    let id = created.json::<Value>().await.unwrap()["session_id"].as_str().unwrap().to_string();
    assert!(h.sessions.map.lock().unwrap().contains_key(&id), "opened through the directory");
    let messages = format!("/api/sessions/{id}/messages");

    let reply = h.post(&messages, json!({"input": "hello"})).send().await.unwrap();
    assert_eq!(reply.status(), 200);
    let reply: Value = reply.json().await.unwrap();
    assert_eq!(
        reply,
        json!({
        "session_id": id, "role": "assistant", "content": "echo: hello", "finish_reason": "stop",
        "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}})
    );
    let event = h.last_event();
    assert_eq!(event.source.chat_id, id);
    assert!(event.authorized_upstream);

    let streamed = h.post(&messages, json!({"input": "tools", "stream": true})).send().await.unwrap();
    assert_eq!(streamed.status(), 200);
    let events = parse_sse(&streamed.text().await.unwrap());
    let ids: Vec<String> = events.iter().map(|e| e.id.clone().unwrap()).collect();
    let expected: Vec<String> = (1..=events.len()).map(|n| n.to_string()).collect();
    assert_eq!(ids, expected);
    let names: Vec<&str> = events.iter().map(|e| e.event.as_deref().unwrap()).collect();
    assert_eq!(names, vec!["tool_call", "tool_result", "token", "done"]);
    assert_eq!(events[0].json(), json!({"id": "call_1", "name": "terminal", "arguments": "{\"cmd\":\"date\"}"}));
    assert_eq!(events[1].json(), json!({"id": "call_1", "name": "terminal", "content": "noon"}));
    assert_eq!(events[2].json(), json!({"text": "It is noon."}));
    let done = events[3].json();
    assert_eq!(done["content"], "It is noon.");
    assert_eq!(done["finish_reason"], "stop");
    assert_eq!(done["usage"]["total_tokens"], 16);

    // Chat completions reach the same conversation through the session header.
    let res = h.post("/v1/chat/completions", chat("via openai")).header(SESSION_HEADER, &id).send().await.unwrap();
    assert_eq!(res.status(), 200);
    res.bytes().await.unwrap();

    let all: Value = h.get(&messages).send().await.unwrap().json().await.unwrap();
    assert_eq!(all["session_id"], id.as_str());
    assert_eq!(all["messages"].as_array().unwrap().len(), 6);
    let last_two: Value = h.get(&format!("{messages}?limit=2")).send().await.unwrap().json().await.unwrap();
    let last_two = last_two["messages"].as_array().unwrap().clone();
    assert_eq!(last_two.len(), 2);
    assert_eq!(last_two[0]["role"], "user");
    assert_eq!(last_two[0]["content"], "via openai");
    assert_eq!(last_two[1]["content"], "echo: via openai");
    assert!(last_two[1]["timestamp"].is_string());
    let bad_limit = h.get(&format!("{messages}?limit=abc")).send().await.unwrap();
    assert_eq!(bad_limit.status(), 400);

    assert_eq!(h.delete(&format!("/api/sessions/{id}")).send().await.unwrap().status(), 204);
    let again = h.delete(&format!("/api/sessions/{id}")).send().await.unwrap();
    assert_eq!(again.status(), 404);
    assert_error_shape(&again.json().await.unwrap());
    assert_eq!(h.get(&messages).send().await.unwrap().status(), 404);
    let events_before = h.events().len();
    let post = h.post(&messages, json!({"input": "hi"})).send().await.unwrap();
    assert_eq!(post.status(), 404);
    assert_eq!(h.events().len(), events_before, "nothing submitted for an unknown session");
    let missing_input = h.post("/api/sessions/whatever/messages", json!({})).send().await.unwrap();
    assert_eq!(missing_input.status(), 400);
    assert!(missing_input.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap().contains("input"));
}

#[tokio::test]
async fn new_refuses_unsafe_settings() {
    let public_no_key = ApiServerSettings { host: "0.0.0.0".into(), key: None, allow_no_auth: true, ..ApiServerSettings::default() };
    let err = ApiServerAdapter::new(public_no_key).unwrap_err();
    assert!(matches!(err, ApiServerError::NoKeyOnPublicHost { .. }));
    assert!(err.to_string().contains("API_SERVER_KEY"));

    let loopback_no_opt_in =
        ApiServerSettings { host: "127.0.0.1".into(), key: None, allow_no_auth: false, ..ApiServerSettings::default() };
    let err = ApiServerAdapter::new(loopback_no_opt_in).unwrap_err();
    assert!(err.to_string().contains("platforms.api_server.allow_no_auth"));

    let public_with_key =
        ApiServerSettings { host: "0.0.0.0".into(), key: Some("9c1f4e2a7b3d8e6f5a0b".into()), ..ApiServerSettings::default() };
    let adapter = ApiServerAdapter::new(public_with_key).unwrap();
    assert_eq!(adapter.platform().as_str(), "api_server");
    assert_eq!(adapter.capabilities().streaming, hermes_adapter::StreamStyle::Events);
    assert!(!adapter.capabilities().supports_async_delivery);
    assert!(adapter.local_addr().is_none());
}

#[tokio::test]
async fn loopback_opt_in_serves_without_a_key() {
    let mut s = settings();
    s.key = None;
    s.allow_no_auth = true;
    let h = Harness::with(s).await;
    let res = h.client.get(h.url("/v1/models")).send().await.unwrap();
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn bind_failure_is_retryable_and_names_the_address() {
    let h = Harness::start().await;
    let port = h.adapter.local_addr().unwrap().port();
    let mut s = settings();
    s.port = port;
    let second = ApiServerAdapter::new(s).unwrap();
    let ctx = hermes_adapter::AdapterContext::new(
        h.inbox.clone(),
        h.sessions.clone(),
        hermes_adapter::HealthReporter::new(),
        tokio_util::sync::CancellationToken::new(),
    );
    let err = second.run(ctx).await.unwrap_err();
    assert!(err.is_retryable());
    assert!(err.to_string().contains(&format!("127.0.0.1:{port}")), "{err}");
}

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish_and_run_returns_ok() {
    let h = Harness::start().await;
    let client = h.client.clone();
    let url = h.url("/v1/chat/completions");
    let in_flight = tokio::spawn(async move { client.post(url).bearer_auth(KEY).json(&chat("slow")).send().await?.json::<Value>().await });
    // Let the request reach the gateway before shutting down.
    for _ in 0..100 {
        if !h.events().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    h.shutdown.cancel();
    let body = in_flight.await.unwrap().unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "slow answer");
    let result = tokio::time::timeout(Duration::from_secs(5), h.run).await.expect("run returns after shutdown");
    assert!(result.unwrap().is_ok());
    assert!(!h.health.is_connected());
    assert!(h.adapter.local_addr().is_none());
}

#[tokio::test]
async fn a_disconnected_plain_client_is_gone() {
    let h = Harness::start().await;
    let client = reqwest::Client::builder().timeout(Duration::from_millis(200)).build().unwrap();
    let res = client.post(h.url("/v1/chat/completions")).bearer_auth(KEY).json(&chat("silent")).send().await;
    assert!(res.is_err(), "the client gave up");
    let request_id = h.last_event().message_id.unwrap();
    let target = ChatTarget { platform: Platform::new("api_server"), chat_id: "x".into(), thread_id: None };
    let token = StreamEvent::Token { text: "x".into() };
    let mut gone = false;
    for _ in 0..100 {
        if let Err(SendError::Gone(_)) = h.adapter.stream(&target, Some(&request_id), &token).await {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "the adapter noticed the client left before the request timeout");
}
