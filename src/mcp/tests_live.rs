//! The hub against real MCP servers: server-everything (node, stdio) and a PyPI `mcp` MCPServer
//! script (`tests/fixtures/mcp/orders.py`, stdio and streamable HTTP on 127.0.0.1). Run under
//! `tests/peers/run.sh`, which exports where the servers are.

use super::{McpHub, McpOutcome, McpPaths, ServerState};
use crate::config::McpServers;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn peer(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set: run the MCP tests under tests/peers/run.sh"))
}

fn everything() -> String {
    peer("HERMES_TEST_MCP_EVERYTHING")
}

fn python() -> String {
    peer("HERMES_TEST_MCP_PYTHON")
}

fn orders_script() -> String {
    format!("{}/tests/fixtures/mcp/orders.py", env!("CARGO_MANIFEST_DIR"))
}

/// A value no other test uses, put in a server's `env` to find its processes in /proc.
fn marker() -> String {
    format!("m{}", uuid::Uuid::new_v4().simple())
}

/// Pids of live (not zombie) processes whose environment holds `HERMES_MCP_TEST_MARK=<mark>`.
fn marked_pids(mark: &str) -> Vec<i32> {
    let needle = format!("HERMES_MCP_TEST_MARK={mark}");
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')));
            !zombie && environ.split(|&b| b == 0).any(|var| var == needle.as_bytes())
        })
        .collect()
}

struct Running {
    hub: Arc<McpHub>,
    home: tempfile::TempDir,
    stop: CancellationToken,
}

/// A started hub for `yaml` (an `mcp_servers` map) with `dotenv` as HERMES_HOME/.env.
fn start(yaml: &str, dotenv: &str) -> Running {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::write(home.path().join(".env"), dotenv).expect(".env");
    let servers: McpServers = serde_yaml_ng::from_str(yaml).expect("yaml");
    crate::config::mcp_check(&servers).expect("valid config");
    let hub = McpHub::new(servers, McpPaths { logs_dir: home.path().join("logs") });
    let stop = CancellationToken::new();
    hub.start(stop.clone());
    Running { hub, home, stop }
}

fn state(hub: &McpHub, server: &str) -> (ServerState, Option<String>) {
    let status = hub.status().into_iter().find(|s| s.name == server).expect("configured");
    (status.state, status.last_error)
}

/// Poll until `server` is connected (60 s at most: node and Python start in about a second).
async fn connected(hub: &McpHub, server: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (now, error) = state(hub, server);
        if now == ServerState::Connected {
            return;
        }
        assert!(Instant::now() < deadline, "{server} never connected: {now:?} {error:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn call(hub: &McpHub, name: &str, arguments: Value) -> McpOutcome {
    hub.call(name, arguments, &CancellationToken::new()).await
}

fn parsed(outcome: &McpOutcome) -> Value {
    serde_json::from_str(&outcome.content).expect("outcome is JSON")
}

async fn finish(running: Running, marks: &[&str]) {
    running.hub.shutdown().await;
    running.stop.cancel();
    let deadline = Instant::now() + Duration::from_secs(5);
    while marks.iter().any(|m| !marked_pids(m).is_empty()) {
        assert!(
            Instant::now() < deadline,
            "a server process outlived shutdown: {:?}",
            marks.iter().map(|m| marked_pids(m)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio_lists_prefixed_tools_filters_globs_and_adds() {
    let (mark, off_mark) = (marker(), marker());
    let yaml = format!(
        "every-thing:\n  command: node\n  args: ['{js}', stdio]\n  env: {{MCP_PASSED: '${{PASS_ME}}', HERMES_MCP_TEST_MARK: {mark}}}\n  tools: {{exclude: ['trigger-*', 'toggle-*']}}\n\
         off:\n  command: node\n  args: ['{js}', stdio]\n  env: {{HERMES_MCP_TEST_MARK: {off_mark}}}\n  enabled: 'off'\n",
        js = everything()
    );
    let running = start(&yaml, "PASS_ME=from-dotenv\nTELEGRAM_BOT_TOKEN=123:SECRET-SHOULD-NOT-LEAK\n");
    let hub = &running.hub;
    connected(hub, "every-thing").await;
    let names: Vec<String> = hub.tools().iter().map(|t| t.name.clone()).collect();
    assert!(names.contains(&"mcp__every_thing__get_sum".to_string()), "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("mcp__every_thing__") && n.len() <= 64), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("trigger_") || n.contains("toggle_")), "globs excluded: {names:?}");
    assert!(hub.tools().iter().all(|t| t.toolset == "mcp-every-thing"));
    assert!(hub.generation() > 0);

    let sum = call(hub, "mcp__every_thing__get_sum", json!({"a": 2, "b": 40})).await;
    assert!(!sum.is_error, "{}", sum.content);
    assert!(parsed(&sum)["result"].as_str().expect("text").contains("42"), "{}", sum.content);

    let env = call(hub, "mcp__every_thing__get_env", json!({})).await;
    assert!(env.content.contains("MCP_PASSED") && env.content.contains("from-dotenv"), "own env, interpolated: {}", env.content);
    assert!(!env.content.contains("TELEGRAM_BOT_TOKEN") && !env.content.contains("SECRET-SHOULD-NOT-LEAK"), "{}", env.content);

    let bad = call(hub, "mcp__every_thing__get_sum", json!({"a": "two", "b": 40})).await;
    assert!(bad.is_error && parsed(&bad)["error"].as_str().expect("error").contains("/a"), "names the field: {}", bad.content);

    assert_eq!(state(hub, "off").0, ServerState::Disabled);
    assert!(marked_pids(&off_mark).is_empty(), "a disabled server was started");
    assert_eq!(marked_pids(&mark).len(), 1);
    let log = std::fs::read_to_string(running.home.path().join("logs/mcp-every-thing.log")).expect("stderr log");
    assert!(log.starts_with("=== ") && log.contains("start of MCP server 'every-thing'"), "{log}");

    let started = Instant::now();
    for _ in 0..50 {
        call(hub, "mcp__every_thing__get_sum", json!({"a": 1, "b": 1})).await;
    }
    println!("stdio: {:?} per get-sum call", started.elapsed() / 50);
    finish(running, &[&mark]).await;
}

/// The orders script on a free port of 127.0.0.1, killed when dropped.
async fn orders_over_http() -> (tokio::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
    let child = tokio::process::Command::new(python())
        .args([orders_script(), "http".into(), port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("python orders.py");
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "orders.py never listened on {port}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_server_over_streamable_http_lists_includes_and_calls() {
    let (_server, port) = orders_over_http().await;
    let yaml = format!(
        "orders:\n  url: 'http://127.0.0.1:{port}/mcp'\n  headers: {{X-Api-Key: '${{ORDERS_KEY}}'}}\n  tools: {{include: [get_order]}}\n"
    );
    let running = start(&yaml, "ORDERS_KEY=k1\n");
    let hub = &running.hub;
    connected(hub, "orders").await;
    let names: Vec<String> = hub.tools().iter().map(|t| t.name.clone()).collect();
    assert!(names.contains(&"mcp__orders__get_order".to_string()), "{names:?}");
    assert!(!names.contains(&"mcp__orders__cancel_order".to_string()), "include wins: {names:?}");
    assert!(
        names.contains(&"mcp__orders__list_resources".to_string()) && names.contains(&"mcp__orders__get_prompt".to_string()),
        "{names:?}"
    );

    let order = call(hub, "mcp__orders__get_order", json!({"order_id": "12345"})).await;
    assert!(!order.is_error, "{}", order.content);
    assert!(order.content.contains("12345") && order.content.contains("shipped"), "{}", order.content);
    let prompts = call(hub, "mcp__orders__list_prompts", json!({})).await;
    assert!(!prompts.is_error && parsed(&prompts).get("result").is_some(), "{}", prompts.content);

    let started = Instant::now();
    for _ in 0..50 {
        call(hub, "mcp__orders__get_order", json!({"order_id": "1"})).await;
    }
    println!("streamable HTTP: {:?} per get_order call", started.elapsed() / 50);
    finish(running, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_fails_that_call_only_and_the_server_stays_up() {
    let mark = marker();
    let yaml = format!(
        "orders:\n  command: '{}'\n  args: ['{}', stdio]\n  timeout: 2\n  env: {{HERMES_MCP_TEST_MARK: {mark}}}\n",
        python(),
        orders_script()
    );
    let running = start(&yaml, "");
    let hub = &running.hub;
    connected(hub, "orders").await;
    let slow = call(hub, "mcp__orders__slow", json!({"seconds": 30})).await;
    assert!(slow.is_error && parsed(&slow)["error"].as_str().expect("error").contains("timed out after 2s"), "{}", slow.content);
    let order = call(hub, "mcp__orders__get_order", json!({"order_id": "7"})).await;
    assert!(!order.is_error && order.content.contains("shipped"), "{}", order.content);
    assert_eq!(state(hub, "orders").0, ServerState::Connected);
    assert!(hub.tools().iter().any(|t| t.name == "mcp__orders__slow"));
    finish(running, &[&mark]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_child_is_reaped_and_replaced_by_exactly_one() {
    let mark = marker();
    let yaml = format!("every:\n  command: node\n  args: ['{}', stdio]\n  env: {{HERMES_MCP_TEST_MARK: {mark}}}\n", everything());
    let running = start(&yaml, "");
    let hub = &running.hub;
    connected(hub, "every").await;
    for round in 0..3 {
        let before = marked_pids(&mark);
        assert_eq!(before.len(), 1, "round {round}: {before:?}");
        // SAFETY: kill(2) on the server's own process group (its pgid is its pid).
        unsafe {
            libc::kill(-before[0], libc::SIGKILL);
        }
        let during = call(hub, "mcp__every__get_sum", json!({"a": 1, "b": 2})).await;
        assert!(during.is_error || during.content.contains('3'), "{}", during.content);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let now = marked_pids(&mark);
            if state(hub, "every").0 == ServerState::Connected && now.len() == 1 && now != before {
                break;
            }
            assert!(Instant::now() < deadline, "round {round}: no single new child: {now:?} {:?}", state(hub, "every"));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let sum = call(hub, "mcp__every__get_sum", json!({"a": 2, "b": 40})).await;
        assert!(!sum.is_error && sum.content.contains("42"), "round {round}: {}", sum.content);
        assert!(!hub.tools().is_empty());
    }
    finish(running, &[&mark]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_starting_server_does_not_hold_up_start_and_answers_down_at_once() {
    let mark = marker();
    let yaml = format!(
        "slow:\n  command: '{}'\n  args: ['{}', stdio, --delay, '10']\n  env: {{HERMES_MCP_TEST_MARK: {mark}}}\n",
        python(),
        orders_script()
    );
    let running = start(&yaml, "");
    // start() has returned: the server is still sleeping, so it is connecting and offers nothing yet.
    assert_eq!(state(&running.hub, "slow").0, ServerState::Connecting);
    assert!(running.hub.tools().is_empty());
    let unknown = call(&running.hub, "mcp__slow__get_order", json!({"order_id": "1"})).await;
    assert!(unknown.is_error);
    let deadline = Instant::now() + Duration::from_secs(10);
    while marked_pids(&mark).is_empty() {
        assert!(Instant::now() < deadline, "the slow server was never spawned");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    finish(running, &[&mark]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_reports_added_removed_and_reconnected() {
    let (a, b) = (marker(), marker());
    let one = format!("a:\n  command: node\n  args: ['{}', stdio]\n  env: {{HERMES_MCP_TEST_MARK: {a}}}\n", everything());
    let running = start(&one, "");
    connected(&running.hub, "a").await;
    let two = format!(
        "a:\n  command: node\n  args: ['{js}', stdio]\n  env: {{HERMES_MCP_TEST_MARK: {a}}}\nb:\n  command: node\n  args: ['{js}', stdio]\n  env: {{HERMES_MCP_TEST_MARK: {b}}}\n",
        js = everything()
    );
    let report = running.hub.reload(serde_yaml_ng::from_str(&two).expect("yaml")).await;
    assert_eq!((report.added, report.removed, report.reconnected), (vec!["b".to_string()], vec![], vec!["a".to_string()]));
    assert_eq!(report.servers, 2);
    assert_eq!(report.tools, running.hub.tools().len());
    assert_eq!((marked_pids(&a).len(), marked_pids(&b).len()), (1, 1), "one child each after reload");
    let report = running.hub.reload(serde_yaml_ng::from_str(&one).expect("yaml")).await;
    assert_eq!(report.removed, vec!["b".to_string()]);
    finish(running, &[&a, &b]).await;
}
