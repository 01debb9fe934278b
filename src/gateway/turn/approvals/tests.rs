//! The policy's decisions that need no chat round trip: cron runs, conversations nobody can be
//! asked in, and deny rules that even `/yolo` cannot pass. Each goes through the tool context a
//! real turn gets, so what is checked is what the terminal tool would be told.

use crate::agent::approval::{CommandDecision, CommandRequest};
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
    let scope = SessionScope {
        session_key: "k".into(),
        platform: platform.into(),
        chat_id: "c1".into(),
        interactive,
        // What a cron run's scope will say (the policy reads the flag, not the platform name).
        scheduled: platform == "cron",
        ..SessionScope::default()
    };
    let context = gateway.turns().tools.context(scope, "turn-1", Arc::new(Fence::default()), CancellationToken::new());
    let request = CommandRequest { command, workdir: Path::new(&context.paths.workdir), sandboxed: true, leave_sandbox: None };
    let decision = context.approval.check_command(&context.scope, &request, &context.cancel).await;
    assert!(gateway.store.approval_close_orphans("test").await.unwrap().is_empty(), "nothing was put to a person");
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
    super::deny_left_open(gateway.store.as_ref(), gateway.turns().deliverer.clone()).await;
    assert!(gateway.store.approval_close_orphans("test").await.unwrap().is_empty(), "closed before start goes on");
    // The chat is told in the background.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while chat.sent.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let sent = chat.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].contains("The gateway restarted while this waited for approval") && sent[0].contains("rm -rf build"), "{sent:?}");
}
