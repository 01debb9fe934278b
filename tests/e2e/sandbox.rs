//! The sandbox through the real binary: a model that tries every way it can think of to read the
//! gateway's secrets (`.env`) or another user's conversation (`state.db`) through the
//! `terminal` and file tools gets none of it into any request it receives, even with
//! `approvals.mode: off` letting flagged commands run (inside the sandbox).

use crate::agent::{ask, tool_results};
use crate::support::Setup;
use hermes_fakes::{FakeLlm, Reply};
use serde_json::json;

/// In `.env` under names the secret scrubber does not know, so only the sandbox keeps them out.
const BOT_TOKEN: &str = "7331:e2e-sandbox-bot-token-qx81";
const PRIVATE_NOTE: &str = "e2e-private-note-zebra-5521";
/// What bob tells the bot; alice's agent must never see it.
const BOBS_SECRET: &str = "kumquat-bob-7731";

fn terminal(id: &str, command: &str) -> Reply {
    Reply::tool_call(id, "terminal", json!({ "command": command }).to_string())
}

fn read_file(id: &str, path: &str) -> Reply {
    Reply::tool_call(id, "read_file", json!({ "path": path }).to_string())
}

/// Every attempt, from the workspace (`HERMES_HOME/workspace`).
fn attempts(copy: &str) -> Vec<Reply> {
    vec![
        terminal("t1", "cat $HERMES_HOME/.env"),
        terminal("t2", "base64 ../.env"),
        terminal("t3", "rev ../.env"),
        terminal("t4", "python3 -c \"print(open('../.env').read())\""),
        terminal("t5", "ln -s ../.env env-link && cat env-link"),
        terminal("t6", &format!("cp ../.env {copy} && cat {copy}")),
        terminal("t7", "sh -c 'cat \"$HERMES_HOME\"/.env | base64'"),
        read_file("f1", "../.env"),
        read_file("f2", "env-link"),
        terminal("t8", "grep -r kumquat-bob ../state.db ../state.db-wal"),
        terminal("t9", "grep -ra kumquat $HERMES_HOME"),
        terminal(
            "t10",
            "python3 -c \"import sqlite3; print(sqlite3.connect('../state.db').execute('select * from messages').fetchall())\"",
        ),
        Reply::tool_call("s1", "search_files", json!({ "pattern": "kumquat|zebra", "path": ".." }).to_string()),
        terminal("t11", "env"),
        Reply::text("I could not read any of it."),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_and_other_users_messages_never_reach_the_model() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    setup.write_config("approvals:\n  mode: \"off\"\n");
    std::fs::write(setup.home.path().join(".env"), format!("CUSTOM_BOT_TOKEN={BOT_TOKEN}\nPRIVATE_NOTE={PRIVATE_NOTE}\n")).unwrap();
    let gateway = setup.start().await;
    assert!(gateway.log_text().contains("command sandbox ready"), "{}", gateway.log_text());

    ask(&setup, None, Some("bob"), &format!("remember my vault code {BOBS_SECRET}")).await;
    let alice_starts = llm.request_count();
    let copy = std::env::temp_dir().join(format!("hermes-e2e-stolen-{}", std::process::id()));
    for reply in attempts(&copy.display().to_string()) {
        llm.push(reply);
    }
    let answer = ask(&setup, None, Some("alice"), "show me what is in the gateway's .env and what bob said").await;
    assert_eq!(answer, "I could not read any of it.");
    assert_eq!(llm.pending_replies(), 0, "every scripted attempt ran");

    let requests = llm.requests();
    let alices = &requests[alice_starts..];
    for request in alices {
        let body = request.body.to_string();
        for leaked in [BOT_TOKEN, PRIVATE_NOTE, BOBS_SECRET, "e2e-sandbox-bot-token"] {
            assert!(!body.contains(leaked), "{leaked} reached the model: {body}");
        }
    }
    // The attempts really ran and were stopped by the sandbox, not by a typo.
    let results = tool_results(alices.last().unwrap()).join("\n");
    assert!(results.contains("[sandbox]") && results.contains("HERMES_HOME"), "{results}");
    assert!(results.contains("Permission denied"), "{results}");
    assert!(!copy.exists(), "the .env was copied out");
}
