//! MCP servers' tools on the wire: the real gateway with real MCP servers (server-everything and
//! server-filesystem over stdio, installed by `tests/peers/run.sh`) and the scripted fake LLM.
//! What must hold is what the model sees and gets: the prefixed tools in the request's `tools[]`
//! (include/exclude and `no_mcp` applied, a disabled server never started), the server's real
//! answer in the next request's tool message, and an untrusted write from the API server refused
//! cleanly (nobody there can approve it) with nothing written, while a read runs.

use crate::support::{API_KEY, Setup, free_port, peer, unfenced, wait_mcp_connected};
use hermes_fakes::{FakeLlm, Reply, ToolCall};
use serde_json::{Value, json};
use std::time::Duration;

/// The names in one LLM request's `tools[]`.
fn offered(request: &hermes_fakes::RecordedRequest) -> Vec<String> {
    let tools = request.body["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().filter_map(|t| t["function"]["name"].as_str().map(str::to_string)).collect()
}

/// One non-streamed chat completion on the API server.
async fn ask(setup: &Setup, text: &str) -> Value {
    let body = json!({"model": "hermes-agent", "messages": [{"role": "user", "content": text}]});
    let response = reqwest::Client::new()
        .post(setup.api("/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .timeout(Duration::from_secs(60))
        .json(&body)
        .send()
        .await
        .expect("chat completion");
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// The tool messages of every LLM request so far, unfenced.
fn tool_messages(llm: &FakeLlm) -> Vec<String> {
    llm.requests().iter().flat_map(|r| r.messages()).filter(|(role, _)| role == "tool").map(|(_, text)| unfenced(&text)).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_model_is_offered_mcp_tools_and_reads_the_servers_real_answer() {
    let everything = peer("HERMES_TEST_MCP_EVERYTHING");
    let filesystem = peer("HERMES_TEST_MCP_FILESYSTEM");
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let admin_port = free_port();
    let root = tempfile::tempdir().unwrap();
    let never_started = setup.home.path().join("disabled-server-ran");
    setup.write_config(&format!(
        "gateway:\n  admin_port: {admin_port}\n\
         platform_toolsets:\n  telegram: [terminal, no_mcp]\n\
         mcp_servers:\n\
         \x20 everything:\n    command: node\n    args: [{everything:?}, stdio]\n    tools:\n      exclude: ['trigger-*', 'toggle-*']\n\
         \x20 fs:\n    command: node\n    args: [{filesystem:?}, {root:?}]\n    tools:\n      include: [read_text_file, list_directory]\n\
         \x20 off:\n    command: /bin/sh\n    args: ['-c', 'touch {never:?}; sleep 30']\n    enabled: false\n",
        root = root.path().display().to_string(),
        never = never_started.display().to_string(),
    ));
    let gateway = setup.start().await;
    wait_mcp_connected(admin_port, "everything", &gateway).await;
    wait_mcp_connected(admin_port, "fs", &gateway).await;

    llm.push(Reply::ToolCalls(vec![ToolCall::new("c1", "mcp__everything__get_sum", json!({"a": 2, "b": 40}).to_string())]));
    llm.push(Reply::text("the sum is 42"));
    let answer = ask(&setup, "add 2 and 40").await;
    assert_eq!(answer["choices"][0]["message"]["content"], "the sum is 42");

    let requests = llm.requests();
    let tools = offered(&requests[0]);
    for name in ["mcp__everything__get_sum", "mcp__everything__echo", "mcp__fs__read_text_file", "mcp__fs__list_directory", "terminal"] {
        assert!(tools.iter().any(|t| t == name), "{name} is offered: {tools:?}");
    }
    assert!(
        !tools.iter().any(|t| t.starts_with("mcp__everything__trigger_") || t.starts_with("mcp__everything__toggle_")),
        "excluded: {tools:?}"
    );
    assert!(!tools.iter().any(|t| t == "mcp__fs__write_file" || t == "mcp__fs__edit_file"), "not included: {tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("mcp__off__")), "a disabled server has no tools: {tools:?}");
    let results = tool_messages(&llm);
    assert!(results.iter().any(|r| r.contains("42")), "the server's own answer reached the model: {results:#?}");
    assert!(requests[1].messages().iter().any(|(role, text)| role == "tool" && text.contains("<untrusted-data ")), "fenced");
    assert!(!never_started.exists(), "a disabled server is never started");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_mcp_takes_every_mcp_tool_off_that_platform() {
    let everything = peer("HERMES_TEST_MCP_EVERYTHING");
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let admin_port = free_port();
    setup.write_config(&format!(
        "gateway:\n  admin_port: {admin_port}\n\
         platform_toolsets:\n  api_server: [terminal, file, no_mcp]\n\
         mcp_servers:\n  everything:\n    command: node\n    args: [{everything:?}, stdio]\n"
    ));
    let gateway = setup.start().await;
    wait_mcp_connected(admin_port, "everything", &gateway).await;
    ask(&setup, "hello").await;
    let tools = offered(&llm.requests()[0]);
    assert!(tools.iter().any(|t| t == "terminal"), "{tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("mcp__")), "no_mcp: {tools:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_untrusted_write_from_the_api_session_stream_is_refused_cleanly_and_a_read_runs() {
    let filesystem = peer("HERMES_TEST_MCP_FILESYSTEM");
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let admin_port = free_port();
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), "remember the milk").unwrap();
    let root_text = root.path().display().to_string();
    setup.write_config(&format!(
        "gateway:\n  admin_port: {admin_port}\napprovals:\n  mode: manual\n\
         mcp_servers:\n  fs:\n    command: node\n    args: [{filesystem:?}, {root_text:?}]\n    trust: untrusted\n"
    ));
    let gateway = setup.start().await;
    wait_mcp_connected(admin_port, "fs", &gateway).await;

    let written = root.path().join("written.txt");
    let write = json!({"path": written.display().to_string(), "content": "hello"}).to_string();
    let read = json!({"path": root.path().join("notes.txt").display().to_string()}).to_string();
    llm.push(Reply::ToolCalls(vec![
        ToolCall::new("w1", "mcp__fs__write_file", write),
        ToolCall::new("r1", "mcp__fs__read_text_file", read),
    ]));
    llm.push(Reply::text("done"));

    let client = reqwest::Client::new();
    let created: Value = client.post(setup.api("/api/sessions")).bearer_auth(API_KEY).send().await.unwrap().json().await.unwrap();
    let id = created["session_id"].as_str().expect("session_id");
    let streamed = client
        .post(setup.api(&format!("/api/sessions/{id}/messages")))
        .bearer_auth(API_KEY)
        .timeout(Duration::from_secs(60))
        .json(&json!({"input": "save a note and read the old one", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 200);
    let events = crate::api_server::read_sse(streamed).await;
    assert_eq!(events.last().map(|e| e.0.as_str()), Some("done"), "the stream ends, never hangs: {events:?}");

    let results = tool_messages(&llm);
    assert!(
        results.iter().any(|r| r.contains("BLOCKED") && r.contains("mcp__fs__write_file") && r.contains("Nothing was sent")),
        "the write is refused with a reason the model can read: {results:#?}"
    );
    assert!(results.iter().any(|r| r.contains("remember the milk")), "a read-only tool needs nobody: {results:#?}");
    assert!(!written.exists(), "nothing reached the server");
}
