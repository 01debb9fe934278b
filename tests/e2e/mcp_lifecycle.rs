//! MCP children never outlive the gateway, and a slow server never holds it up: the real gateway
//! binary with real servers over stdio (npm server-everything, and the Python fixture told to
//! sleep 10 s before it serves). The gateway answers `/health` while the slow server is still
//! connecting; after SIGTERM, and after `kill -9` (the children's parent-death signal), none of
//! its MCP children is left running.

use crate::support::{Setup, free_port, peer};
use hermes_fakes::FakeLlm;
use serde_json::Value;
use std::time::{Duration, Instant};

/// `pid`'s parent and state letter, from /proc (None once it is gone).
fn parent_and_state(pid: u32) -> Option<(u32, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields after the last `)` are fixed.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((parent, state))
}

/// Every living process below `root` (children, grandchildren: `node` under a shell, …).
fn descendants(root: u32) -> Vec<u32> {
    let all: Vec<u32> =
        std::fs::read_dir("/proc").map(|dir| dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect()).unwrap_or_default();
    let mut found = vec![root];
    let mut grew = true;
    while grew {
        grew = false;
        for &pid in &all {
            if !found.contains(&pid)
                && let Some((parent, state)) = parent_and_state(pid)
                && state != 'Z'
                && found.contains(&parent)
            {
                found.push(pid);
                grew = true;
            }
        }
    }
    found.retain(|&p| p != root);
    found
}

/// Whether `pid` still runs (a zombie no longer does: it only waits to be reaped).
fn alive(pid: u32) -> bool {
    parent_and_state(pid).is_some_and(|(_, state)| state != 'Z')
}

async fn mcp_states(admin_port: u16) -> Vec<(String, String)> {
    let health: Value = match reqwest::get(format!("http://127.0.0.1:{admin_port}/health")).await {
        Ok(r) => r.json().await.unwrap_or_default(),
        Err(_) => Value::Null,
    };
    health["mcp"]
        .as_array()
        .map(|servers| {
            servers.iter().map(|s| (s["name"].as_str().unwrap_or("").into(), s["state"].as_str().unwrap_or("").into())).collect()
        })
        .unwrap_or_default()
}

/// A gateway with server-everything and a server that takes 10 s to start.
async fn start_with_servers(setup: &Setup, admin_port: u16) -> crate::support::Gateway {
    let everything = peer("HERMES_TEST_MCP_EVERYTHING");
    let python = peer("HERMES_TEST_MCP_PYTHON");
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mcp/orders.py");
    setup.write_config(&format!(
        "gateway:\n  admin_port: {admin_port}\n\
         mcp_servers:\n\
         \x20 everything:\n    command: node\n    args: [{everything:?}, stdio]\n\
         \x20 slow:\n    command: {python:?}\n    args: [{fixture:?}, stdio, --delay, '10']\n"
    ));
    setup.start().await
}

async fn wait_everything_connected(admin_port: u16, gateway: &crate::support::Gateway) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let states = mcp_states(admin_port).await;
        if states.iter().any(|(name, state)| name == "everything" && state == "connected") {
            return states;
        }
        assert!(Instant::now() < deadline, "server-everything did not connect: {states:?}\n{}", gateway.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// After the gateway ended, every child it had must stop within 5 s.
async fn assert_all_gone(children: &[u32], how: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while children.iter().any(|&pid| alive(pid)) {
        let left: Vec<u32> = children.iter().copied().filter(|&pid| alive(pid)).collect();
        assert!(Instant::now() < deadline, "MCP children still running 5 s after {how}: {left:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_server_never_holds_up_start_and_sigterm_leaves_no_child() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let admin_port = free_port();
    // `start` returns once `/health` answers.
    let mut gateway = start_with_servers(&setup, admin_port).await;
    let states = wait_everything_connected(admin_port, &gateway).await;
    // The gateway is up and serving while the slow server is still on its way.
    assert!(states.iter().any(|(name, state)| name == "slow" && state == "connecting"), "{states:?}");
    let children = descendants(gateway.pid().expect("running"));
    assert!(children.len() >= 2, "both servers were started: {children:?}");

    let status = gateway.signal(libc::SIGTERM).await;
    assert!(status.success(), "a clean stop: {status}\n{}", gateway.log_text());
    assert_all_gone(&children, "SIGTERM").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_the_gateway_leaves_no_child() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let admin_port = free_port();
    let mut gateway = start_with_servers(&setup, admin_port).await;
    wait_everything_connected(admin_port, &gateway).await;
    let children = descendants(gateway.pid().expect("running"));
    assert!(children.len() >= 2, "both servers were started: {children:?}");

    // Nothing of the gateway runs after SIGKILL: only the children's parent-death signal acts.
    gateway.signal(libc::SIGKILL).await;
    assert_all_gone(&children, "kill -9 of the gateway").await;
}
