//! hermes as an MCP server, driven by the official MCP Python SDK (PyPI `mcp` 2.x, installed by
//! `tests/peers/run.sh`): the real gateway talks to a user through the fake Telegram, and an MCP
//! client lists its conversations, reads one and sends a message that arrives in the fake,
//! over stdio (`hermes mcp serve`, relaying to the gateway) and over streamable HTTP; the same
//! idempotency key sent again posts nothing new; a client without the key gets nothing; and a
//! dangerous command waiting for approval in the chat is approved from the MCP client.

use crate::peer::{Chat, ChatPeer};
use crate::suite::{Run, launch};
use crate::support::free_port;
use crate::telegram::TelegramPeer;
use hermes_fakes::{Reply, ToolCall};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

const USER: u32 = 1;
const KEY: &str = "3b9f2d7c41e0a86f5c2e19d4";

/// A python with the MCP SDK (`tests/peers/run.sh` sets it).
fn python() -> String {
    std::env::var("HERMES_TEST_MCP_PYTHON")
        .unwrap_or_else(|_| panic!("HERMES_TEST_MCP_PYTHON is not set: run the MCP tests under tests/peers/run.sh"))
}

/// The client script's report, or a panic with what it printed.
fn client(args: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/serve_client.py");
    let output = Command::new(python()).arg(script).args(args).output().expect("run the MCP client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("the client printed no report: {stdout}\nstderr: {}", String::from_utf8_lossy(&output.stderr)));
    report
}

fn binary() -> String {
    std::env::var("HERMES_TEST_BINARY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_hermes").to_string())
}

/// A gateway on the fake Telegram serving MCP on `port`, after one exchange with the user.
async fn talked(port: u16) -> (Run<TelegramPeer>, Chat) {
    let run = launch::<TelegramPeer>(&format!("mcp_serve:\n  port: {port}\n  key: {KEY}\n")).await;
    // `hermes mcp serve` reads HERMES_HOME's config and .env as the gateway does; the suite
    // hands the gateway its variables directly, so write them where a user keeps them.
    let dotenv: String = run._setup.env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(run._setup.home.path().join(".env"), dotenv).unwrap();
    let chat = run.peer.dm(USER, "hello from telegram").await;
    run.wait_text(&chat, "echo: hello from telegram").await;
    (run, chat)
}

/// What every client run must have seen of the conversation.
fn assert_saw_the_conversation(report: &Value, chat: &Chat) {
    assert!(report.get("error").is_none(), "the client failed: {report}");
    assert_eq!(report["server"], "hermes");
    let tools: Vec<&str> = report["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    for tool in ["conversations_list", "messages_read", "events_wait", "messages_send", "permissions_list_open", "permissions_respond"] {
        assert!(tools.contains(&tool), "{tool} is offered: {tools:?}");
    }
    let conversation = &report["conversations"][0];
    assert_eq!((conversation["platform"].as_str(), conversation["chat_id"].as_str()), (Some("telegram"), Some(chat.chat_id.as_str())));
    assert_eq!(conversation["can_send"], true);
    let said: Vec<(&str, &str)> =
        report["messages"].as_array().unwrap().iter().map(|m| (m["role"].as_str().unwrap(), m["text"].as_str().unwrap())).collect();
    assert_eq!(said, [("user", "hello from telegram"), ("assistant", "echo: hello from telegram")]);
    let events: Vec<&str> = report["events"].as_array().unwrap().iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert!(events.contains(&"hello from telegram"), "events from the start: {events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_over_stdio_lists_reads_and_sends_into_telegram_once_per_key() {
    let port = free_port();
    let (run, chat) = talked(port).await;
    let home = run._setup.home.path().display().to_string();
    let report = client(&["stdio", &binary(), &home, "telegram", "sent from an MCP client", "py-stdio-1"]);
    assert_saw_the_conversation(&report, &chat);
    assert_eq!(report["sent"]["status"], "delivered", "{report}");
    run.wait_text(&chat, "sent from an MCP client").await;

    let again = client(&["stdio", &binary(), &home, "telegram", "sent from an MCP client", "py-stdio-1"]);
    assert_eq!(again["sent"]["status"], "delivered", "{again}");
    let copies = run.peer.posted(&chat).iter().filter(|p| p.text == "sent from an MCP client").count();
    assert_eq!(copies, 1, "the same idempotency key posts once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_over_streamable_http_needs_the_key_and_sends_into_telegram() {
    let port = free_port();
    let (run, chat) = talked(port).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let refused = client(&["http", &url, "", "telegram", "never sent", "py-http-0"]);
    // The SDK reports the 401 as an error response; the status itself is asserted in the unit tests.
    assert!(refused["error"].as_str().is_some_and(|e| e.contains("error")), "no key, nothing served: {refused}");

    let report = client(&["http", &url, KEY, "telegram", "sent over HTTP", "py-http-1"]);
    assert_saw_the_conversation(&report, &chat);
    run.wait_text(&chat, "sent over HTTP").await;
    assert!(run.peer.posted(&chat).iter().all(|p| p.text != "never sent"));
    assert!(!run.gateway.log_text().contains(KEY), "the key never reaches the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_waiting_in_telegram_is_approved_from_the_mcp_client_and_the_chat_is_told() {
    let port = free_port();
    let yaml = format!("approvals:\n  mode: manual\nmcp_serve:\n  port: {port}\n  key: {KEY}\n");
    let run = launch::<TelegramPeer>(&yaml).await;
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::create_dir_all(victim.join("inner")).unwrap();
    let command = format!("rm -rf {}", victim.display());
    run.llm.push(Reply::ToolCalls(vec![ToolCall::new("t1", "terminal", json!({"command": command}).to_string())]));
    run.llm.push(Reply::text("cleaned up"));
    let chat = run.peer.dm(USER, "clean up the old data").await;
    run.wait(&chat, "the approval prompt", |p| p.iter().any(|m| m.text.contains("requires approval"))).await;
    assert!(victim.exists(), "nothing runs before an answer");

    let report = client(&["approve", &format!("http://127.0.0.1:{port}/mcp"), KEY]);
    assert!(report.get("error").is_none(), "the client failed: {report}");
    assert_eq!(report["open"][0]["request"], command.as_str(), "the operator sees exactly what would run");
    assert_eq!(report["answered"]["decision"], "approved");
    run.wait(&chat, "the agent's answer", |p| p.iter().any(|m| m.text.contains("cleaned up"))).await;
    assert!(!victim.exists(), "the approved command ran");
    let told = run.peer.posted(&chat);
    assert!(told.iter().any(|m| m.text.contains("Command approved") && m.text.contains("MCP client")), "the chat is told who answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hermes_mcp_serve_without_a_key_exits_78_naming_it() {
    let llm = hermes_fakes::FakeLlm::start().await;
    let setup = crate::support::Setup::new(&llm.base_url());
    setup.write_config("");
    let (status, _, stderr) = setup.run(&["mcp", "serve"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("mcp_serve.key") && stderr.contains("MCP_SERVE_KEY"), "{stderr}");
}
