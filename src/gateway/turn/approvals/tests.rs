//! The policy's decisions that need no chat round trip: cron runs, conversations nobody can be
//! asked in, and deny rules that even `/yolo` cannot pass. Each goes through the tool context a
//! real turn gets, so what is checked is what the terminal tool would be told.

use super::board::{Answer, Reach};
use crate::agent::approval::{CommandDecision, CommandRequest, ToolCallDecision, ToolCallRequest};
use crate::agent::fence::Fence;
use crate::agent::tools::SessionScope;
use crate::config::Config;
use crate::gateway::tests::support::RecordingChat;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

async fn decide(yaml: &str, platform: &str, interactive: bool, command: &str) -> (CommandDecision, Vec<String>, tempfile::TempDir) {
    let env = crate::config::Env::from_pairs(Vec::<(String, String)>::new());
    let config: Config = crate::config::load_str(yaml, Path::new("config.yaml"), &env).unwrap().config;
    let chat = RecordingChat::new();
    let (dir, gateway) =
        crate::gateway::tests::support::gateway(config, chat.clone(), Arc::new(crate::gateway::tests::support::NoModel)).await;
    gateway.actors.commands.approvals.board.set_yolo("k", yaml.contains("# yolo"));
    let scope = tool_scope(platform, interactive);
    let context = gateway.turns().tools.context(scope, "turn-1", Arc::new(Fence::default()), CancellationToken::new());
    let request = CommandRequest { command, workdir: Path::new(&context.paths.workdir), sandboxed: true, leave_sandbox: None };
    let decision = context.approval.check_command(&context.scope, &request, &context.cancel).await;
    assert!(gateway.store.approval_close_orphans("test", None).await.unwrap().is_empty(), "nothing was put to a person");
    let sent = chat.sent.lock().unwrap().clone();
    (decision, sent, dir)
}

#[tokio::test]
async fn a_cron_run_is_denied_without_a_prompt_unless_cron_mode_approves() {
    let (decision, sent, _dir) = decide("approvals:\n  mode: manual\n", "cron", false, "rm -rf build").await;
    assert!(
        matches!(&decision, CommandDecision::Deny(why) if why.contains("scheduled job") && why.contains("cron_mode is deny")),
        "{decision:?}"
    );
    assert!(sent.is_empty(), "no prompt: {sent:?}");
    let (decision, _, _dir) = decide("approvals:\n  mode: manual\n  cron_mode: approve\n", "cron", false, "rm -rf build").await;
    assert_eq!(decision, CommandDecision::CONFINED);
}

#[tokio::test]
async fn a_conversation_nobody_can_be_asked_in_is_refused_at_once() {
    let (decision, sent, _dir) = decide("approvals:\n  mode: manual\n", "api_server", false, "rm -rf build").await;
    assert!(matches!(&decision, CommandDecision::Deny(why) if why.contains("Nobody can approve")), "{decision:?}");
    assert!(sent.is_empty());
}

#[tokio::test]
async fn deny_rules_beat_yolo_and_safe_commands_need_nobody() {
    let yaml = "approvals:\n  mode: manual\n  deny: ['git push*']\n# yolo\n";
    let (decision, _, _dir) = decide(yaml, "chat", true, "git push origin main").await;
    assert!(matches!(&decision, CommandDecision::Deny(why) if why.contains("deny rule `git push*`")), "{decision:?}");
    let (decision, _, _dir) = decide(yaml, "chat", true, "rm -rf build").await;
    assert_eq!(decision, CommandDecision::CONFINED, "yolo runs a flagged command inside the sandbox");
    let (decision, _, _dir) = decide("approvals:\n  mode: manual\n", "chat", true, "ls -la").await;
    assert_eq!(decision, CommandDecision::CONFINED);
}

#[tokio::test]
async fn approvals_a_restart_left_open_are_denied_and_their_chat_is_told() {
    let chat = RecordingChat::new();
    let (_dir, gateway) =
        crate::gateway::tests::support::gateway(Config::default(), chat.clone(), Arc::new(crate::gateway::tests::support::NoModel)).await;
    let target = hermes_adapter::ChatTarget { platform: hermes_adapter::Platform::new("chat"), chat_id: "c1".into(), thread_id: None };
    let pending = crate::store::PendingApproval {
        id: "#0rphan01".into(),
        session_key: "k".into(),
        target,
        command: "rm -rf build".into(),
        created_at: chrono::Utc::now(),
    };
    gateway.store.approval_open(&pending).await.unwrap();
    super::deny_left_open(gateway.store.as_ref(), gateway.turns().deliverer.clone(), None).await;
    assert!(gateway.store.approval_close_orphans("test", None).await.unwrap().is_empty(), "closed before start goes on");
    // The chat is told in the background.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while chat.sent.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let sent = chat.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].contains("The gateway restarted while this waited for approval") && sent[0].contains("rm -rf build"), "{sent:?}");
}

/// An MCP tool call put to the `chat` platform's policy, on a task; the gateway and its chat.
async fn tool_call_rig(yaml: &str) -> (tempfile::TempDir, crate::gateway::tests::support::Wiring, Arc<RecordingChat>) {
    let env = crate::config::Env::from_pairs(Vec::<(String, String)>::new());
    let config: Config = crate::config::load_str(yaml, Path::new("config.yaml"), &env).unwrap().config;
    let chat = RecordingChat::new();
    let (dir, gateway) =
        crate::gateway::tests::support::gateway(config, chat.clone(), Arc::new(crate::gateway::tests::support::NoModel)).await;
    (dir, gateway, chat)
}

/// The scope of a turn in chat `c1` of `platform` (`cron`: a scheduled run; the policy reads
/// the flag, not the platform name).
fn tool_scope(platform: &str, interactive: bool) -> SessionScope {
    SessionScope {
        session_key: "k".into(),
        platform: platform.into(),
        chat_id: "c1".into(),
        interactive,
        scheduled: platform == "cron",
        ..SessionScope::default()
    }
}

async fn check_tool_call(
    gateway: &crate::gateway::tests::support::Wiring,
    scope: SessionScope,
) -> tokio::task::JoinHandle<ToolCallDecision> {
    let context = gateway.turns().tools.context(scope, "turn-1", Arc::new(Fence::default()), CancellationToken::new());
    tokio::spawn(async move {
        let request = ToolCallRequest { server: "fs", tool: "mcp__fs__write_file", arguments: r#"{"path":"out.txt","content":"hi"}"# };
        context.approval.check_tool_call(&context.scope, &request, &context.cancel).await
    })
}

async fn wait_sent(chat: &RecordingChat, n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while chat.sent.lock().unwrap().len() < n && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    chat.sent.lock().unwrap().clone()
}

#[tokio::test]
async fn an_untrusted_tool_call_is_put_to_the_chat_and_runs_only_once_approved() {
    let (_dir, gateway, chat) = tool_call_rig("approvals:\n  mode: off\n").await;
    let board = gateway.actors.commands.approvals.board.clone();
    gateway.actors.commands.approvals.board.set_yolo("k", true);
    let call = check_tool_call(&gateway, tool_scope("chat", true)).await;
    let sent = wait_sent(&chat, 1).await;
    assert!(sent[0].contains("MCP tool call requires approval"), "neither /yolo nor mode off spares it: {sent:?}");
    assert!(sent[0].contains("Server `fs` wants to run `mcp__fs__write_file`") && sent[0].contains(r#""path":"out.txt""#), "{sent:?}");
    assert!(!call.is_finished(), "the call waits for the answer");
    board.answer_oldest("k", &Answer::Deny { reason: Some("not now".into()) }).unwrap();
    let decision = call.await.unwrap();
    assert!(matches!(&decision, ToolCallDecision::Deny(why) if why.contains("denied by user") && why.contains("not now")), "{decision:?}");

    let call = check_tool_call(&gateway, tool_scope("chat", true)).await;
    wait_sent(&chat, 2).await;
    board.answer_oldest("k", &Answer::Approve(Reach::Always)).unwrap();
    assert_eq!(call.await.unwrap(), ToolCallDecision::Allow);
    // "always" for a tool call is this session: the next call needs nobody.
    let decision = check_tool_call(&gateway, tool_scope("chat", true)).await.await.unwrap();
    assert_eq!(decision, ToolCallDecision::Allow);
    assert_eq!(chat.sent.lock().unwrap().len(), 2, "no third prompt");
    assert!(gateway.store.approval_close_orphans("test", None).await.unwrap().is_empty(), "every approval was closed");
    let allowlist = std::fs::read_to_string(_dir.path().join("config.yaml")).unwrap_or_default();
    assert!(!allowlist.contains("mcp__fs__write_file"), "a tool call never reaches command_allowlist");
}

#[tokio::test]
async fn a_tool_call_nobody_can_answer_is_refused_at_once_and_cron_follows_cron_mode() {
    let (_dir, gateway, chat) = tool_call_rig("approvals:\n  mode: manual\n").await;
    let decision = check_tool_call(&gateway, tool_scope("api_server", false)).await.await.unwrap();
    assert!(matches!(&decision, ToolCallDecision::Deny(why) if why.contains("nobody can approve it")), "{decision:?}");
    let decision = check_tool_call(&gateway, tool_scope("cron", false)).await.await.unwrap();
    assert!(matches!(&decision, ToolCallDecision::Deny(why) if why.contains("cron_mode is deny")), "{decision:?}");
    assert!(chat.sent.lock().unwrap().is_empty(), "no prompt");
    let (_dir, gateway, _chat) = tool_call_rig("approvals:\n  mode: manual\n  cron_mode: approve\n").await;
    assert_eq!(check_tool_call(&gateway, tool_scope("cron", false)).await.await.unwrap(), ToolCallDecision::Allow);
}

#[tokio::test]
async fn a_stopped_turn_ends_the_wait_with_a_refusal() {
    let (_dir, gateway, chat) = tool_call_rig("approvals:\n  mode: manual\n").await;
    let cancel = CancellationToken::new();
    let context = gateway.turns().tools.context(tool_scope("chat", true), "turn-1", Arc::new(Fence::default()), cancel.clone());
    let call = tokio::spawn(async move {
        let request = ToolCallRequest { server: "fs", tool: "mcp__fs__write_file", arguments: "{}" };
        context.approval.check_tool_call(&context.scope, &request, &context.cancel).await
    });
    wait_sent(&chat, 1).await;
    cancel.cancel();
    let decision = call.await.unwrap();
    assert!(matches!(&decision, ToolCallDecision::Deny(why) if why.contains("turn was stopped")), "{decision:?}");
    assert_eq!(gateway.actors.commands.approvals.board.pending("k"), 0);
}
