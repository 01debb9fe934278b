//! Approving MCP tool calls from chat, end to end: the real gateway, the fake Telegram, the
//! scripted model and a real server-filesystem (`trust: untrusted`, installed by
//! `tests/peers/run.sh`). A write prompts with the server, the tool and its arguments; `/deny`
//! leaves no file (nothing reached the server); `/approve` writes it; a read runs unasked; and a
//! platform under `no_mcp` is offered no MCP tool at all.

use crate::peer::Chat;
use crate::suite::{Run, launch_with};
use crate::telegram::TelegramPeer;
use hermes_fakes::telegram::{SentMessage, TgUser};
use hermes_fakes::{Reply, ToolCall};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const OWNER: i64 = 5001;
const PROMPT: &str = "MCP tool call requires approval";

fn owner() -> TgUser {
    TgUser::named(OWNER, "Owner", None)
}

fn dm() -> Chat {
    Chat { chat_id: OWNER.to_string(), thread_id: None }
}

/// The path a peer variable of `tests/peers/run.sh` names.
fn peer(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set: run the MCP tests under tests/peers/run.sh"))
}

/// A gateway on the fake Telegram for [`OWNER`], with server-filesystem on `root` as `fs`,
/// untrusted, connected before the test goes on.
async fn launch(root: &Path, extra: &str) -> Run<TelegramPeer> {
    let filesystem = peer("HERMES_TEST_MCP_FILESYSTEM");
    let admin_port = crate::support::free_port();
    let yaml = format!(
        "gateway:\n  admin_port: {admin_port}\napprovals:\n  mode: manual\n{extra}\
         mcp_servers:\n  fs:\n    command: node\n    args: [{filesystem:?}, {root:?}]\n    trust: untrusted\n",
        root = root.display().to_string()
    );
    let run = launch_with::<TelegramPeer>(&yaml, &[("TELEGRAM_ALLOWED_USERS", &OWNER.to_string())]).await;
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let health: Value = match client.get(format!("http://127.0.0.1:{admin_port}/health")).send().await {
            Ok(r) => r.json().await.unwrap_or_default(),
            Err(_) => Value::Null,
        };
        if health["mcp"].as_array().is_some_and(|s| s.iter().any(|s| s["name"] == "fs" && s["state"] == "connected")) {
            return run;
        }
        assert!(Instant::now() < deadline, "fs did not connect: {health}\n{}", run.gateway.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn write_call(id: &str, path: &Path) -> ToolCall {
    ToolCall::new(id, "mcp__fs__write_file", json!({"path": path.display().to_string(), "content": "approved text"}).to_string())
}

fn tool_results(run: &Run<TelegramPeer>) -> Vec<String> {
    run.llm.requests().iter().flat_map(|r| r.messages()).filter(|(role, _)| role == "tool").map(|(_, text)| text).collect()
}

async fn nth_prompt(run: &Run<TelegramPeer>, n: usize) -> SentMessage {
    run.wait(&dm(), &format!("MCP approval prompt {n}"), |p| p.iter().filter(|m| m.text.contains(PROMPT)).count() >= n).await;
    run.peer.fake.sent_to(OWNER).into_iter().filter(|m| m.text.contains(PROMPT)).nth(n - 1).expect("the prompt")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_write_waits_for_approve_and_deny_leaves_nothing() {
    let root = tempfile::tempdir().unwrap();
    let run = launch(root.path(), "").await;
    let denied = root.path().join("denied.txt");
    run.llm.push(Reply::ToolCalls(vec![write_call("w1", &denied)]));
    run.llm.push(Reply::text("left it alone"));
    run.peer.fake.dm(&owner(), "write the denied note");
    let prompt = nth_prompt(&run, 1).await;
    assert!(prompt.text.contains("Server fs wants to run mcp__fs__write_file"), "rendered from Markdown: {}", prompt.text);
    assert!(prompt.text.contains("approved text") && prompt.text.contains("untrusted"), "{}", prompt.text);
    assert!(prompt.reply_markup.is_some(), "buttons");
    assert!(tool_results(&run).is_empty(), "the agent waits");
    run.peer.fake.dm(&owner(), "/deny");
    run.wait_text(&dm(), "❌ Command denied.").await;
    run.wait(&dm(), "the agent's answer", |p| p.iter().any(|m| m.text.contains("left it alone"))).await;
    assert!(!denied.exists(), "a denied write never reaches the server");
    let results = tool_results(&run);
    assert!(results.iter().any(|r| r.contains("BLOCKED") && r.contains("denied by user")), "{results:#?}");

    let approved = root.path().join("approved.txt");
    let read = json!({"path": root.path().join("approved.txt").display().to_string()}).to_string();
    run.llm.push(Reply::ToolCalls(vec![write_call("w2", &approved)]));
    run.llm.push(Reply::ToolCalls(vec![ToolCall::new("r1", "mcp__fs__read_text_file", read)]));
    run.llm.push(Reply::text("written and checked"));
    run.peer.fake.dm(&owner(), "write the approved note");
    nth_prompt(&run, 2).await;
    run.peer.fake.dm(&owner(), "/approve");
    run.wait(&dm(), "the agent's answer", |p| p.iter().any(|m| m.text.contains("written and checked"))).await;
    assert_eq!(std::fs::read_to_string(&approved).unwrap(), "approved text", "the approved write ran");
    let prompts = run.peer.fake.sent_to(OWNER).into_iter().filter(|m| m.text.contains(PROMPT)).count();
    assert_eq!(prompts, 2, "the read ran without a prompt");
    assert!(tool_results(&run).iter().any(|r| r.contains("approved text")), "the read's result reached the model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_mcp_on_telegram_offers_no_mcp_tool_there() {
    let root = tempfile::tempdir().unwrap();
    let run = launch(root.path(), "platform_toolsets:\n  telegram: [terminal, no_mcp]\n").await;
    run.peer.fake.dm(&owner(), "hello");
    run.wait(&dm(), "the echo", |p| p.iter().any(|m| m.text.contains("echo: hello"))).await;
    let tools: Vec<String> = run.llm.requests()[0].body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(tools.iter().any(|t| t == "terminal"), "{tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("mcp__")), "{tools:?}");
}
