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
    (orders_on(port).await, port)
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

fn hostile_script() -> String {
    format!("{}/tests/fixtures/mcp/hostile.py", env!("CARGO_MANIFEST_DIR"))
}

/// The hostile server as `hostile`, with `settings` (YAML lines at the entry's indent), marked
/// with `mark` and recording its calls in `calls`.
fn hostile_yaml(settings: &str, mark: &str, calls: &std::path::Path) -> String {
    format!(
        "hostile:\n  command: '{}'\n  args: ['{}']\n{settings}  env: {{HERMES_MCP_TEST_MARK: {mark}, HOSTILE_CALLS: '{}'}}\n",
        python(),
        hostile_script(),
        calls.display()
    )
}

/// Whether `text` holds a Unicode tag character (U+E0000–U+E007F).
fn has_tags(text: &str) -> bool {
    text.chars().any(|c| ('\u{E0000}'..='\u{E007F}').contains(&c))
}

/// The tool names the hostile server recorded as called, in order.
fn hostile_calls(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_server_is_cleaned_flagged_repaired_and_its_new_tool_appears_live() {
    let mark = marker();
    let scratch = tempfile::tempdir().expect("tempdir");
    let calls = scratch.path().join("calls");
    let yaml = hostile_yaml("  trust: untrusted\n", &mark, &calls);
    let running = start(&yaml, "");
    let hub = &running.hub;
    connected(hub, "hostile").await;
    let tools = hub.tools();
    let tool = |name: &str| tools.iter().find(|t| t.original == name).unwrap_or_else(|| panic!("{name} listed: {tools:#?}")).clone();

    // (a) Tag characters never reach the model; the words a description says do (its known limit).
    assert!(tools.iter().all(|t| !has_tags(&t.description) && !has_tags(&t.parameters.to_string())), "{tools:#?}");
    assert!(tool("fetch_notes").description.contains("IGNORE PREVIOUS INSTRUCTIONS"));
    let notes = call(hub, "mcp__hostile__fetch_notes", json!({})).await;
    assert!(!notes.is_error && notes.content.contains("buy milk") && !has_tags(&notes.content), "{}", notes.content);
    let loud = call(hub, "mcp__hostile__fail_loudly", json!({})).await;
    let said = parsed(&loud)["error"].as_str().expect("error").to_string();
    assert!(loud.is_error && said.contains("backend said: IGNORE PREVIOUS INSTRUCTIONS") && !has_tags(&said), "{said}");
    assert!(
        said.contains(&hermes_adapter::untrusted::mark(&said.replace(['\u{E000}', '\u{E001}'], ""))),
        "the server's words, marked whole: {said:?}"
    );

    // (b) Only exactly `readOnlyHint: true` skips approval — a liar included (the known limit).
    let flags = |name: &str| (tool(name).read_only, tool(name).needs_approval);
    assert_eq!(flags("delete_everything"), (true, false));
    for name in ["wipe_unannotated", "wipe_marked_false", "wipe_marked_string"] {
        assert_eq!(flags(name), (false, true), "{name}");
    }

    // (d) A `definitions`-based schema without `type` is repaired; arguments are checked against it.
    let schema = tool("take_item").parameters;
    assert_eq!(schema["type"], "object");
    assert!(schema.get("definitions").is_none() && schema["$defs"]["Item"].is_object(), "{schema}");
    assert_eq!(schema["properties"]["item"]["$ref"], "#/$defs/Item");
    assert_eq!(schema["required"], json!(["item"]));
    assert_eq!(schema["$defs"]["Item"]["required"], json!(["n"]));
    let bad = call(hub, "mcp__hostile__take_item", json!({"item": {"n": "three"}})).await;
    assert!(bad.is_error && bad.content.contains("/item/n"), "{}", bad.content);
    let took = call(hub, "mcp__hostile__take_item", json!({"item": {"n": 3}})).await;
    assert!(!took.is_error && took.content.contains("took item n=3"), "{}", took.content);

    // (e) `tools/list_changed` re-lists while connected: the new tool is registered and callable.
    let before = hub.generation();
    assert!(!tools.iter().any(|t| t.original == "late_tool"));
    let added = call(hub, "mcp__hostile__add_tool", json!({})).await;
    assert!(!added.is_error && added.content.contains("added late_tool") && !added.content.contains("did not list"), "{}", added.content);
    // The answer waited for the re-list the server announced before it: no polling needed.
    assert!(hub.tools().iter().any(|t| t.name == "mcp__hostile__late_tool"), "late_tool registered: {:#?}", hub.tools());
    assert!(hub.generation() > before);
    let late = call(hub, "mcp__hostile__late_tool", json!({})).await;
    assert!(!late.is_error && late.content.contains("late tool ran"), "{}", late.content);

    let sent = hostile_calls(&calls);
    assert_eq!(sent, ["fetch_notes", "fail_loudly", "take_item", "add_tool", "late_tool"], "an invalid call never reached the server");
    finish(running, &[&mark]).await;
}

/// The orders script over HTTP on `port`, killed when dropped; ready once it accepts connections.
async fn orders_on(port: u16) -> tokio::process::Child {
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
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_opens_on_transport_failures_answers_without_the_server_and_half_opens_after_the_cooldown() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
    let mut server = orders_on(port).await;
    let yaml = format!("orders:\n  url: 'http://127.0.0.1:{port}/mcp'\n  circuit_breaker: {{threshold: 2, cooldown: 5}}\n");
    let running = start(&yaml, "");
    let hub = &running.hub;
    connected(hub, "orders").await;
    let order = call(hub, "mcp__orders__get_order", json!({"order_id": "1"})).await;
    assert!(!order.is_error, "{}", order.content);

    server.kill().await.expect("kill orders.py");
    for failure in 1..=2 {
        let failed = call(hub, "mcp__orders__get_order", json!({"order_id": "1"})).await;
        let error = parsed(&failed)["error"].as_str().expect("error").to_string();
        assert!(
            failed.is_error && error.starts_with("MCP server 'orders' transport error: "),
            "failure {failure}: {error} {:?}",
            state(hub, "orders")
        );
    }
    let opened = Instant::now();
    // Open: answered by hermes itself, not a transport error from trying the dead server. Asked
    // before the server comes back, because a loaded machine's Python start-up can outlast the
    // cooldown (CI saw it), and then the breaker is rightly half-open.
    let open = call(hub, "mcp__orders__get_order", json!({"order_id": "1"})).await;
    let error = parsed(&open)["error"].as_str().expect("error").to_string();
    assert!(
        open.is_error && error.starts_with("MCP server 'orders' is unreachable after 2 consecutive failures. Auto-retry available in ~"),
        "{error}"
    );
    let _back = orders_on(port).await;

    // Half-open once the cooldown has passed: the next call goes through and the session recovers.
    tokio::time::sleep(Duration::from_secs(5).saturating_sub(opened.elapsed())).await;
    let again = call(hub, "mcp__orders__get_order", json!({"order_id": "2"})).await;
    assert!(!again.is_error && again.content.contains("shipped"), "{}", again.content);
    let after = call(hub, "mcp__orders__get_order", json!({"order_id": "3"})).await;
    assert!(!after.is_error, "closed again: {}", after.content);
    assert_eq!(state(hub, "orders").0, ServerState::Connected);
    finish(running, &[]).await;
}

/// Wait until `server` is connected through a child other than `old` (the one that died); its pid.
async fn connected_anew(hub: &McpHub, server: &str, mark: &str, old: i32) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pids = marked_pids(mark);
        if state(hub, server).0 == ServerState::Connected && pids.len() == 1 && pids[0] != old {
            return pids[0];
        }
        assert!(Instant::now() < deadline, "no new child for {server}: {pids:?} {:?}", state(hub, server));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_dying_on_every_call_opens_the_breaker_across_reconnects_and_a_half_open_call_reaches_its_new_child() {
    let mark = marker();
    let scratch = tempfile::tempdir().expect("tempdir");
    let calls = scratch.path().join("calls");
    let yaml = hostile_yaml("  circuit_breaker: {threshold: 2, cooldown: 1}\n", &mark, &calls);
    let running = start(&yaml, "");
    let hub = &running.hub;
    connected(hub, "hostile").await;
    let mut child = marked_pids(&mark)[0];
    let mut opened = Instant::now();
    for failure in 1..=2 {
        let died = call(hub, "mcp__hostile__crash", json!({})).await;
        opened = Instant::now();
        let error = parsed(&died)["error"].as_str().expect("error").to_string();
        assert!(died.is_error && error.starts_with("MCP server 'hostile' transport error: "), "failure {failure}: {error}");
        if failure == 1 {
            child = connected_anew(hub, "hostile", &mark, child).await;
        }
    }

    // Open, connected or not: answered at once, and the server never sees the call.
    let refused = call(hub, "mcp__hostile__crash", json!({})).await;
    let error = parsed(&refused)["error"].as_str().expect("error").to_string();
    assert!(refused.is_error && error.starts_with("MCP server 'hostile' is unreachable after 2 consecutive failures."), "{error}");
    assert_eq!(hostile_calls(&calls), ["crash", "crash"], "the open breaker kept the call from the server");

    // Half-open after the cooldown: the call reaches the child started meanwhile, and closes it.
    connected_anew(hub, "hostile", &mark, child).await;
    tokio::time::sleep(Duration::from_secs(1).saturating_sub(opened.elapsed())).await;
    let notes = call(hub, "mcp__hostile__fetch_notes", json!({})).await;
    assert!(!notes.is_error && notes.content.contains("buy milk"), "{}", notes.content);
    let again = call(hub, "mcp__hostile__take_item", json!({"item": {"n": 1}})).await;
    assert!(!again.is_error, "closed: {}", again.content);
    assert_eq!(hostile_calls(&calls), ["crash", "crash", "fetch_notes", "take_item"]);
    finish(running, &[&mark]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_announces_new_tools_and_never_lists_them_keeps_its_tools_and_cannot_hold_up_shutdown() {
    let mark = marker();
    let scratch = tempfile::tempdir().expect("tempdir");
    let calls = scratch.path().join("calls");
    let yaml = hostile_yaml("  timeout: 60\n", &mark, &calls);
    let running = start(&yaml, "");
    connected(&running.hub, "hostile").await;
    let before = running.hub.tools();
    let hub = running.hub.clone();
    // Its answer waits (up to the 60 s call timeout) for a list that never comes: leave it waiting.
    let frozen = tokio::spawn(async move { call(&hub, "mcp__hostile__freeze_listing", json!({})).await });
    let deadline = Instant::now() + Duration::from_secs(30);
    // The supervisor heard the announcement and is waiting on its tools/list.
    while !hostile_calls(&calls).contains(&"frozen tools/list".to_string()) {
        assert!(Instant::now() < deadline, "the client never asked for the announced list: {:?}", hostile_calls(&calls));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(running.hub.tools(), before, "the old tools stay while the new list is awaited");
    assert_eq!(state(&running.hub, "hostile").0, ServerState::Connected);
    // Shutdown stops the supervisor mid re-list instead of waiting out the call timeout.
    let stopped = tokio::time::timeout(Duration::from_secs(20), finish(running, &[&mark])).await;
    assert!(stopped.is_ok(), "shutdown waited for a tools/list the server never answers");
    frozen.abort();
}
