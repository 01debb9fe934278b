//! Approving MCP tool calls from chat, end to end on every chat platform: the real gateway, the
//! platform's peer (fake Telegram, Discord and Slack; real Synapse; real Dovecot and Postfix),
//! the scripted model and a real server-filesystem (`trust: untrusted`, installed by
//! `tests/peers/run.sh`). A write prompts in the user's DM with the server, the tool and its
//! arguments; a typed deny leaves no file (nothing reached the server) and tells the model; a
//! typed approve writes it; a read runs unasked. On Telegram the prompt also carries buttons, and
//! a platform under `no_mcp` is offered no MCP tool at all.

use crate::discord::DiscordPeer;
use crate::email_peer::EmailPeer;
use crate::matrix_peer::MatrixPeer;
use crate::peer::{Chat, ChatPeer, Posted};
use crate::slack::SlackPeer;
use crate::suite::{Run, launch};
use crate::support::{eventually, peer};
use crate::telegram::TelegramPeer;
use hermes_fakes::{Reply, ToolCall};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const PROMPT: &str = "MCP tool call requires approval";
/// The user of every scenario (each peer allows users 1..=50).
const USER: u32 = 1;
/// A deadline for what the user waits for, not a measure: email's answers go through Postfix and
/// come back over IMAP, Matrix's through Synapse's sync.
const WAIT: Duration = Duration::from_secs(60);

/// A gateway on `P`'s platform with server-filesystem on `root` as `fs`, untrusted, approvals
/// asked in the chat, connected before the test goes on.
async fn launch_with_fs<P: ChatPeer>(root: &Path, extra: &str) -> Run<P> {
    let filesystem = peer("HERMES_TEST_MCP_FILESYSTEM");
    let admin_port = crate::support::free_port();
    let yaml = format!(
        "gateway:\n  admin_port: {admin_port}\napprovals:\n  mode: manual\n{extra}\
         mcp_servers:\n  fs:\n    command: node\n    args: [{filesystem:?}, {root:?}]\n    trust: untrusted\n",
        root = root.display().to_string()
    );
    let run = launch::<P>(&yaml).await;
    crate::support::wait_mcp_connected(admin_port, "fs", &run.gateway).await;
    run
}

/// A command as a user of `P` types it: Slack keeps `/` for its own commands, so its users type
/// `!` (what the Slack adapter reads as a command).
fn typed<P: ChatPeer>(command: &str) -> String {
    if P::PLATFORM == "slack" { format!("!{command}") } else { format!("/{command}") }
}

fn write_call(id: &str, path: &Path) -> ToolCall {
    ToolCall::new(id, "mcp__fs__write_file", json!({"path": path.display().to_string(), "content": "approved text"}).to_string())
}

/// The tool messages the model got, each once, in the order they first came (every request
/// repeats the history before it).
fn tool_results<P: ChatPeer>(run: &Run<P>) -> Vec<String> {
    let mut told: Vec<String> = Vec::new();
    for (_, text) in run.llm.requests().iter().flat_map(|r| r.messages()).filter(|(role, _)| role == "tool") {
        if !told.contains(&text) {
            told.push(text);
        }
    }
    told
}

fn prompts(posted: &[Posted]) -> Vec<Posted> {
    posted.iter().filter(|m| m.text.contains(PROMPT)).cloned().collect()
}

/// Wait for the `n`th prompt in `chat`, or for the model to be told something instead (the call
/// was decided without asking); failing, say what it was told.
async fn wait_prompts<P: ChatPeer>(run: &Run<P>, chat: &Chat, n: usize) -> Vec<Posted> {
    let told = tool_results(run).len();
    eventually(WAIT, || prompts(&run.peer.posted(chat)).len() >= n || tool_results(run).len() > told).await;
    assert!(
        prompts(&run.peer.posted(chat)).len() >= n,
        "{}: no MCP approval prompt {n} in {chat:?}; posted: {:#?}\nthe model was told: {:#?}\n--- gateway log ---\n{}",
        P::PLATFORM,
        run.peer.posted(chat),
        tool_results(run),
        run.gateway.log_text()
    );
    prompts(&run.peer.posted(chat))
}

async fn wait_answer<P: ChatPeer>(run: &Run<P>, chat: &Chat, answer: &str) {
    run.wait_for(WAIT, chat, &format!("the agent's answer {answer:?}"), |p| p.iter().any(|m| m.text.contains(answer))).await;
}

/// What a test of one platform keeps after the scenario, to check what only that platform shows.
struct Approved<P: ChatPeer> {
    run: Run<P>,
    chat: Chat,
    _root: tempfile::TempDir,
}

/// The scenario every platform must show: a write by an untrusted server waits for the user, who
/// denies it by typing (no file, the model told) and approves the next by typing (the file
/// written); a read-only tool runs without asking.
async fn untrusted_write_waits_for_a_typed_approval<P: ChatPeer>() -> Approved<P> {
    let root = tempfile::tempdir().unwrap();
    let run = launch_with_fs::<P>(root.path(), "").await;
    let denied = root.path().join("denied.txt");
    run.llm.push(Reply::ToolCalls(vec![write_call("w1", &denied)]));
    run.llm.push(Reply::text("left it alone"));
    let chat = run.peer.dm(USER, "write the denied note").await;
    let prompt = wait_prompts(&run, &chat, 1).await.remove(0);
    // Where the platform parses Markdown the user sees names, not backticks.
    let shown = if P::PARSES_FORMATTING { prompt.text.clone() } else { prompt.text.replace('`', "") };
    assert!(shown.contains("Server fs wants to run mcp__fs__write_file"), "{}: the server and the tool: {}", P::PLATFORM, prompt.text);
    assert!(prompt.text.contains("approved text") && prompt.text.contains("untrusted"), "{}: {}", P::PLATFORM, prompt.text);
    assert!(tool_results(&run).is_empty(), "{}: the agent waits for the user", P::PLATFORM);

    run.peer.dm(USER, &typed::<P>("deny")).await;
    wait_answer(&run, &chat, "Command denied").await;
    wait_answer(&run, &chat, "left it alone").await;
    assert!(!denied.exists(), "{}: a denied write never reaches the server", P::PLATFORM);
    let results = tool_results(&run);
    assert!(
        results.first().is_some_and(|r| r.contains("BLOCKED") && r.contains("denied by user")),
        "{}: the model's next request holds the denial: {results:#?}",
        P::PLATFORM
    );

    let approved = root.path().join("approved.txt");
    let read = json!({"path": approved.display().to_string()}).to_string();
    run.llm.push(Reply::ToolCalls(vec![write_call("w2", &approved)]));
    run.llm.push(Reply::ToolCalls(vec![ToolCall::new("r1", "mcp__fs__read_text_file", read)]));
    run.llm.push(Reply::text("written and checked"));
    run.peer.dm(USER, "write the approved note").await;
    wait_prompts(&run, &chat, 2).await;
    assert!(!approved.exists(), "{}: nothing written before the approval", P::PLATFORM);
    run.peer.dm(USER, &typed::<P>("approve")).await;
    wait_answer(&run, &chat, "written and checked").await;
    assert_eq!(std::fs::read_to_string(&approved).ok().as_deref(), Some("approved text"), "{}: the approved write ran", P::PLATFORM);
    assert_eq!(prompts(&run.peer.posted(&chat)).len(), 2, "{}: the read ran without a prompt", P::PLATFORM);
    let results = tool_results(&run);
    assert!(results.iter().any(|r| r.contains("approved text")), "{}: the read's result reached the model: {results:#?}", P::PLATFORM);
    Approved { run, chat, _root: root }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_an_untrusted_write_waits_for_approve_and_deny_leaves_nothing() {
    let Approved { run, chat, .. } = untrusted_write_waits_for_a_typed_approval::<TelegramPeer>().await;
    let sent = run.peer.fake.sent_to(chat.chat_id.parse().unwrap());
    let prompts: Vec<_> = sent.iter().filter(|m| m.text.contains(PROMPT)).collect();
    assert!(prompts.iter().all(|m| m.reply_markup.is_some()), "each prompt has buttons: {prompts:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_an_untrusted_write_waits_for_approve_and_deny_leaves_nothing() {
    untrusted_write_waits_for_a_typed_approval::<DiscordPeer>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_an_untrusted_write_waits_for_approve_and_deny_leaves_nothing() {
    untrusted_write_waits_for_a_typed_approval::<SlackPeer>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_an_untrusted_write_waits_for_approve_and_deny_leaves_nothing() {
    untrusted_write_waits_for_a_typed_approval::<MatrixPeer>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_an_untrusted_write_waits_for_approve_and_deny_leaves_nothing() {
    untrusted_write_waits_for_a_typed_approval::<EmailPeer>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_mcp_on_telegram_offers_no_mcp_tool_there() {
    let root = tempfile::tempdir().unwrap();
    let run = launch_with_fs::<TelegramPeer>(root.path(), "platform_toolsets:\n  telegram: [terminal, no_mcp]\n").await;
    let chat = run.peer.dm(USER, "hello").await;
    run.wait(&chat, "the echo", |p| p.iter().any(|m| m.text.contains("echo: hello"))).await;
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
