//! Operating MCP servers, as an operator meets it: `/reload-mcp` (confirmation, cancel, a server
//! added to config.yaml while running reaching the model's `tools[]`, the note the model reads),
//! `hermes mcp list|add|remove|test`, and a server that is down shown by `/readyz`, `/metrics`,
//! `hermes gateway status` and `hermes doctor` while the gateway stays ready. The servers are
//! real (server-everything over stdio, installed by `tests/peers/run.sh`).

use crate::support::{API_KEY, Setup, free_port, peer, promtool_check};
use hermes_fakes::FakeLlm;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The names in one LLM request's `tools[]`.
fn offered(request: &hermes_fakes::RecordedRequest) -> Vec<String> {
    let tools = request.body["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().filter_map(|t| t["function"]["name"].as_str().map(str::to_string)).collect()
}

/// `text` in conversation `conversation` of the API server; the answer's text.
async fn say(setup: &Setup, conversation: &str, text: &str) -> String {
    let response = reqwest::Client::new()
        .post(setup.api("/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .header("X-Hermes-Session-Id", conversation)
        .timeout(Duration::from_secs(90))
        .json(&json!({"messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .expect("chat completion");
    assert_eq!(response.status(), 200, "{text}");
    let answer: Value = response.json().await.expect("json answer");
    answer["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_string()
}

/// The `mcp_servers` block for server-everything over stdio under `name`.
fn everything_server(name: &str) -> String {
    format!("  {name}:\n    command: node\n    args: [{:?}, stdio]\n", peer("HERMES_TEST_MCP_EVERYTHING"))
}

/// A command that does not exist: the server can never start.
const GHOST: &str = "  ghost:\n    command: /nonexistent/mcp-server\n";

#[tokio::test(flavor = "multi_thread")]
async fn reload_mcp_asks_then_adds_a_server_written_to_config_while_running() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    setup.write_config("");
    let gateway = setup.start().await;

    // Cancel leaves the tools as they are.
    let prompt = say(&setup, "ops", "/reload-mcp").await;
    assert!(prompt.starts_with("⚠️ **Confirm /reload-mcp**") && prompt.contains("/reload-mcp approve"), "{prompt}");
    assert_eq!(say(&setup, "ops", "/reload-mcp cancel").await, "🟡 /reload-mcp cancelled. MCP tools unchanged.");
    say(&setup, "ops", "hello").await;
    assert!(offered(&llm.requests()[0]).iter().all(|t| !t.starts_with("mcp__")), "{:?}", offered(&llm.requests()[0]));

    // A server added while running arrives with the reload, in the next request's tools.
    setup.write_config(&format!("mcp_servers:\n{}", everything_server("everything")));
    say(&setup, "ops", "/reload-mcp").await;
    let reloaded = say(&setup, "ops", "/reload-mcp approve").await;
    assert!(reloaded.starts_with("🔄 **MCP Servers Reloaded**\n➕ Added: everything\n🔧 "), "{reloaded}\n{}", gateway.log_text());
    assert!(reloaded.ends_with("tool(s) available from 1 server(s)"), "{reloaded}");
    say(&setup, "ops", "what can you do now?").await;
    let last = llm.requests().last().cloned().unwrap();
    assert!(offered(&last).contains(&"mcp__everything__get_sum".to_string()), "{:?}", offered(&last));
    let note = last.messages().into_iter().find(|(_, text)| text.contains("[IMPORTANT: MCP servers have been reloaded."));
    let (role, note) = note.unwrap_or_else(|| panic!("the model was not told: {:?}", last.messages()));
    assert_eq!(role, "user");
    assert!(note.contains("Added servers: everything.") && note.contains("MCP tool(s) now available"), "{note}");
    assert_eq!(llm.request_count(), 2, "commands never reach the model");

    // With the confirmation off, the reload runs at once; the removed server's tools are gone.
    setup.write_config("approvals:\n  mcp_reload_confirm: false\n");
    let removed = say(&setup, "ops", "/reload-mcp").await;
    assert_eq!(removed, "🔄 **MCP Servers Reloaded**\n➖ Removed: everything\nNo MCP servers connected.");
    say(&setup, "ops", "and now?").await;
    let last = llm.requests().last().cloned().unwrap();
    assert!(offered(&last).iter().all(|t| !t.starts_with("mcp__")), "{:?}", offered(&last));
}

#[test]
fn mcp_add_list_and_remove_round_trip_on_config_yaml() {
    let setup = Setup::new("http://127.0.0.1:9/v1");
    setup.write_config("agent:\n  max_turns: 7\n");
    let (status, out, err) = setup.run(&[
        "mcp",
        "add",
        "github",
        "--command",
        "npx",
        "--arg",
        "-y",
        "--arg",
        "@modelcontextprotocol/server-github",
        "--env",
        "GITHUB_TOKEN=${GITHUB_TOKEN}",
        "--env",
        "LITERAL=hunter2-secret",
        "--trust",
        "untrusted",
    ]);
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("Added MCP server `github`"), "{out}");
    let (status, out, err) =
        setup.run(&["mcp", "add", "orders", "--url", "http://127.0.0.1:8000/mcp", "--header", "Authorization=Bearer sk-abc123"]);
    assert!(status.success(), "{out}{err}");

    let (status, list, _) = setup.run(&["mcp", "list"]);
    assert!(status.success());
    for expected in [
        "  github: stdio  npx -y @modelcontextprotocol/server-github",
        "      enabled, trust untrusted",
        "      env: GITHUB_TOKEN=${GITHUB_TOKEN}, LITERAL=***",
        "  orders: http   http://127.0.0.1:8000/mcp",
        "      headers: Authorization=***",
    ] {
        assert!(list.lines().any(|l| l == expected), "{expected:?} missing:\n{list}");
    }
    assert!(!list.contains("hunter2") && !list.contains("sk-abc123"), "a secret was printed:\n{list}");
    let config = std::fs::read_to_string(setup.home.path().join("config.yaml")).unwrap();
    assert!(config.contains("max_turns: 7"), "other keys kept: {config}");

    let (status, _, err) = setup.run(&["mcp", "add", "github", "--command", "other"]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("already configured") && err.contains("--replace"), "{err}");
    let (status, _, err) = setup.run(&["mcp", "add", "both", "--command", "x", "--url", "http://y/mcp"]);
    assert_eq!(status.code(), Some(2), "a usage error: {err}");
    let (status, _, err) = setup.run(&["mcp", "add", "ftp", "--url", "ftp://y/mcp"]);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("http:// or https://"), "{err}");

    for name in ["github", "orders"] {
        let (status, out, err) = setup.run(&["mcp", "remove", name]);
        assert!(status.success(), "{out}{err}");
    }
    let (status, _, err) = setup.run(&["mcp", "remove", "github"]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("no MCP server named `github`"), "{err}");
    let (_, list, _) = setup.run(&["mcp", "list"]);
    assert!(list.starts_with("No MCP servers in "), "{list}");

    setup.write_config("mcp_servers:\n  bad:\n    url: http://x/mcp\n    trust: sometimes\n");
    let (status, _, err) = setup.run(&["mcp", "list"]);
    assert_eq!(status.code(), Some(78), "a bad entry is a configuration error: {err}");
    assert!(err.contains("mcp_servers.bad.trust"), "{err}");
}

#[test]
fn mcp_test_lists_the_prefixed_tools_or_fails_naming_the_error() {
    let setup = Setup::new("http://127.0.0.1:9/v1");
    // `test` connects a disabled server too: it is how one tries a server before switching it on.
    setup.write_config(&format!("mcp_servers:\n{}    enabled: false\n{GHOST}", everything_server("everything")));
    let (status, out, err) = setup.run(&["mcp", "test", "everything"]);
    assert!(status.success(), "{out}{err}");
    assert!(out.starts_with("✓ everything: connected, "), "{out}");
    assert!(out.lines().any(|l| l.trim() == "mcp__everything__get_sum"), "{out}");

    let (status, out, err) = setup.run(&["mcp", "test", "ghost"]);
    assert_eq!(status.code(), Some(1), "{out}{err}");
    assert!(err.starts_with("hermes: ghost: down — "), "{err}");
    let (status, _, err) = setup.run(&["mcp", "test", "nobody"]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("no MCP server named `nobody`"), "{err}");
}

/// `/readyz` until each listed server has left `connecting`.
async fn settled_readyz(admin_port: u16, gateway: &crate::support::Gateway) -> (u16, Value) {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = client.get(format!("http://127.0.0.1:{admin_port}/readyz")).send().await {
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or_default();
            let servers = body["mcp"].as_array().cloned().unwrap_or_default();
            if servers.len() == 2 && servers.iter().all(|s| s["state"] != "connecting") && status == 200 {
                return (status, body);
            }
            assert!(Instant::now() < deadline, "not settled: {status} {body}\n{}", gateway.log_text());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_is_down_is_reported_everywhere_while_the_gateway_stays_ready() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let admin_port = free_port();
    setup.write_config(&format!("gateway:\n  admin_port: {admin_port}\nmcp_servers:\n{}{GHOST}", everything_server("everything")));
    let gateway = setup.start().await;

    let (status, ready) = settled_readyz(admin_port, &gateway).await;
    assert_eq!((status, ready["status"].as_str()), (200, Some("ready")), "{ready}");
    let servers = ready["mcp"].as_array().unwrap();
    let (everything, ghost) = (&servers[0], &servers[1]);
    assert_eq!((everything["name"].as_str(), everything["state"].as_str()), (Some("everything"), Some("connected")), "{ready}");
    assert!(everything["tools"].as_u64().unwrap_or(0) > 0, "{ready}");
    assert_eq!((ghost["name"].as_str(), ghost["state"].as_str()), (Some("ghost"), Some("down")), "{ready}");
    assert!(ghost["last_error"].as_str().is_some_and(|e| !e.is_empty()), "the error is shown: {ready}");

    let metrics = reqwest::get(format!("http://127.0.0.1:{admin_port}/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.lines().any(|l| l == "hermes_mcp_server_up{server=\"everything\"} 1"), "{metrics}");
    assert!(metrics.lines().any(|l| l == "hermes_mcp_server_up{server=\"ghost\"} 0"), "{metrics}");
    assert!(metrics.lines().any(|l| l.starts_with("hermes_mcp_tools{server=\"everything\"} ") && !l.ends_with(" 0")), "{metrics}");
    let (accepted, said) = promtool_check(&metrics);
    assert!(accepted, "promtool refused the exposition: {said}");

    let (_, out, err) = setup.run(&["gateway", "status"]);
    assert!(out.lines().any(|l| l.starts_with("  mcp ghost: down, 0 tool(s) — ")), "{out}{err}");
    assert!(out.lines().any(|l| l.starts_with("  mcp everything: connected, ")), "{out}{err}");

    let (status, out, _) = setup.run(&["doctor"]);
    assert_eq!(status.code(), Some(1), "the server that is down fails doctor: {out}");
    assert!(out.lines().any(|l| l.starts_with("✓ mcp everything: connected, ") && l.ends_with("tool(s)")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("✗ mcp ghost: down — ")), "{out}");
    assert!(out.contains("fix: check mcp_servers.ghost in config.yaml"), "{out}");
}
