//! The OpenAI-compatible API and the sessions API, end to end.

use crate::support::{API_KEY, LLM_KEY, Setup, count, open_db};
use futures::StreamExt;
use hermes_fakes::{FakeLlm, Reply};
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn chat(setup: &Setup, body: Value, session: Option<&str>) -> reqwest::Response {
    let mut request = client().post(setup.api("/v1/chat/completions")).bearer_auth(API_KEY).json(&body);
    if let Some(id) = session {
        request = request.header("X-Hermes-Session-Id", id);
    }
    request.send().await.expect("request")
}

/// Read an SSE body into `(event, id, data)` triples.
pub(crate) async fn read_sse(response: reqwest::Response) -> Vec<(String, Option<String>, String)> {
    let mut text = String::new();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.expect("body chunk")));
    }
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let (mut event, mut id, mut data) = ("message".to_string(), None, String::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_string());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            (event, id, data)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_completions_answer_remember_authenticate_and_store() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let mut gateway = setup.start().await;

    // Non-streaming answer.
    let first =
        chat(&setup, json!({"model": "hermes-agent", "messages": [{"role": "user", "content": "my name is Ada"}]}), Some("conv-1")).await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers().get("x-hermes-session-id").and_then(|v| v.to_str().ok()), Some("conv-1"));
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["object"], "chat.completion");
    assert_eq!(first["choices"][0]["message"]["role"], "assistant");
    assert_eq!(first["choices"][0]["message"]["content"], "echo: my name is Ada");
    assert_eq!(first["choices"][0]["finish_reason"], "stop");
    assert!(first["usage"]["total_tokens"].as_u64().unwrap() > 0);
    // The provider got our key, not the client's.
    assert_eq!(llm.requests()[0].authorization.as_deref(), Some(format!("Bearer {LLM_KEY}").as_str()));

    // Same conversation, streamed: the model sees the earlier exchange.
    llm.push(Reply::chunks(["Your name ", "is Ada."]));
    let second = chat(
        &setup,
        json!({"model": "hermes-agent", "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "what is my name?"}]}),
        Some("conv-1"),
    )
    .await;
    assert_eq!(second.status(), 200);
    assert!(second.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let events = read_sse(second).await;
    assert_eq!(events.last().map(|e| e.2.as_str()), Some("[DONE]"));
    let chunks: Vec<Value> = events.iter().filter(|e| e.2 != "[DONE]").map(|e| serde_json::from_str(&e.2).unwrap()).collect();
    let text: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, "Your name is Ada.");
    assert!(chunks.iter().any(|c| c["choices"][0]["finish_reason"] == "stop"));
    assert!(chunks.iter().any(|c| c["usage"]["total_tokens"].as_u64().unwrap_or(0) > 0), "include_usage gives a usage chunk");

    let recorded = llm.requests();
    assert_eq!(recorded.len(), 2);
    let history = recorded[1].messages();
    let roles_and_text: Vec<(&str, &str)> = history.iter().map(|(r, c)| (r.as_str(), c.as_str())).filter(|(r, _)| *r != "system").collect();
    assert_eq!(
        roles_and_text,
        [("user", "my name is Ada"), ("assistant", "echo: my name is Ada"), ("user", "what is my name?")],
        "the second request carries the conversation so far"
    );
    assert_eq!(recorded[0].messages()[0].0, "system", "a system prompt leads every request");

    // A different conversation does not see it.
    let other = chat(&setup, json!({"messages": [{"role": "user", "content": "hello"}]}), Some("conv-2")).await;
    assert_eq!(other.status(), 200);
    let other_history = llm.requests()[2].messages();
    assert!(!other_history.iter().any(|(_, c)| c.contains("Ada")), "conversations are isolated: {other_history:?}");

    // Authentication.
    let wrong = client()
        .post(setup.api("/v1/chat/completions"))
        .bearer_auth("not-the-key")
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let wrong: Value = wrong.json().await.unwrap();
    assert!(wrong["error"]["message"].as_str().unwrap().contains("API key"), "{wrong}");
    let missing = client().get(setup.api("/v1/models")).send().await.unwrap();
    assert_eq!(missing.status(), 401);
    assert_eq!(llm.request_count(), 3, "rejected requests never reach the model");

    let models: Value = client().get(setup.api("/v1/models")).bearer_auth(API_KEY).send().await.unwrap().json().await.unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "hermes-agent");

    // A malformed request gets an OpenAI-shaped error naming the problem.
    let bad = chat(&setup, json!({"messages": "not a list"}), None).await;
    assert_eq!(bad.status(), 400);
    let bad: Value = bad.json().await.unwrap();
    assert!(bad["error"]["message"].as_str().is_some(), "{bad}");

    // Everything is in state.db and searchable with FTS5.
    let db = open_db(&setup.state_db());
    let found: Vec<String> = db
        .prepare(
            "SELECT m.content FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid WHERE messages_fts MATCH ?1 ORDER BY m.id",
        )
        .unwrap()
        .query_map(["Ada"], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(found, ["my name is Ada", "echo: my name is Ada", "Your name is Ada."]);
    assert_eq!(count(&db, "SELECT count(*) FROM inbox WHERE state != 'done'", []), 0, "every accepted request finished");
    assert_eq!(count(&db, "SELECT count(*) FROM sessions WHERE platform = 'api_server'", []), 2);

    // `hermes gateway status` sees it running; SIGTERM stops it cleanly with exit 0.
    let (status, stdout, _) = setup.run(&["gateway", "status"]);
    assert!(status.success(), "{stdout}");
    assert!(stdout.contains("gateway: running"), "{stdout}");
    assert!(stdout.contains("api_server"), "{stdout}");
    let exit = gateway.signal(libc::SIGTERM).await;
    assert_eq!(exit.code(), Some(0), "{}", gateway.log_text());
    assert!(!gateway.log_text().contains(API_KEY), "the API key never reaches the log");
    assert!(!gateway.log_text().contains(LLM_KEY), "the provider key never reaches the log");
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_api_answers_in_json_and_sse_and_lists_and_deletes() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let _gateway = setup.start().await;
    let c = client();

    let created: Value = c.post(setup.api("/api/sessions")).bearer_auth(API_KEY).send().await.unwrap().json().await.unwrap();
    let id = created["session_id"].as_str().expect("session_id").to_string();

    let answer = c
        .post(setup.api(&format!("/api/sessions/{id}/messages")))
        .bearer_auth(API_KEY)
        .json(&json!({"input": "first question"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(answer["content"], "echo: first question");
    assert_eq!(answer["finish_reason"], "stop");

    llm.push(Reply::chunks(["alpha ", "beta ", "gamma"]));
    let streamed = c
        .post(setup.api(&format!("/api/sessions/{id}/messages")))
        .bearer_auth(API_KEY)
        .json(&json!({"input": "second question", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 200);
    let events = read_sse(streamed).await;
    let tokens: String = events
        .iter()
        .filter(|e| e.0 == "token")
        .map(|e| serde_json::from_str::<Value>(&e.2).unwrap()["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tokens, "alpha beta gamma");
    let ids: Vec<u64> = events.iter().map(|e| e.1.as_deref().expect("every event has an id").parse().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids order the events: {ids:?}");
    let done = events.last().unwrap();
    assert_eq!(done.0, "done");
    let done: Value = serde_json::from_str(&done.2).unwrap();
    assert_eq!(done["finish_reason"], "stop");
    assert!(done["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    // The session remembers the first exchange.
    assert!(llm.requests()[1].messages().iter().any(|(_, c)| c == "echo: first question"));

    let listed: Value =
        c.get(setup.api(&format!("/api/sessions/{id}/messages?limit=3"))).bearer_auth(API_KEY).send().await.unwrap().json().await.unwrap();
    let contents: Vec<&str> = listed["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["echo: first question", "second question", "alpha beta gamma"], "the latest 3, oldest first");

    let deleted = c.delete(setup.api(&format!("/api/sessions/{id}"))).bearer_auth(API_KEY).send().await.unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let gone = c.get(setup.api(&format!("/api/sessions/{id}/messages"))).bearer_auth(API_KEY).send().await.unwrap();
    assert_eq!(gone.status(), 404);
    let unauthorized = c.post(setup.api("/api/sessions")).send().await.unwrap();
    assert_eq!(unauthorized.status(), 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_a_web_page_can_make_are_refused_before_the_model_runs() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let _gateway = setup.start().await;
    let body = json!({"messages": [{"role": "user", "content": "delete my files"}]});

    // A form or `text/plain` POST needs no CORS preflight, so any page could send it.
    let text_plain = client()
        .post(setup.api("/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .header("Content-Type", "text/plain;charset=UTF-8")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(text_plain.status(), 415);
    let refused: Value = text_plain.json().await.unwrap();
    assert!(refused["error"]["message"].as_str().unwrap().contains("application/json"), "{refused}");
    let form = client()
        .post(setup.api("/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("q={body}"))
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 415);
    let from_page = client()
        .post(setup.api("/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .header("Origin", "https://evil.example")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(from_page.status(), 403);
    assert_eq!(llm.request_count(), 0, "no turn reached the model");

    // A program (no Origin, JSON, loopback Host) is served.
    let served = chat(&setup, body, None).await;
    let status = served.status();
    assert_eq!(status, 200, "{}", served.text().await.unwrap_or_default());
    assert_eq!(llm.request_count(), 1);
}
