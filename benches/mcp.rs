//! MCP per-call overhead: what the hub adds to one tool call (argument validation against the
//! tool's schema, the breaker, the timeout, result shaping) over a bare rmcp client calling the
//! same real server the same way, over stdio (npm server-everything, `get-sum`) and streamable
//! HTTP on loopback (the Python `MCPServer` fixture, `get_order`).
//!
//! Run under the peers (they say where the servers are installed):
//! `tests/peers/run.sh cargo bench --profile dev --bench mcp` (or `--release` for release
//! numbers). It prints numbers; it asserts nothing.

use hermes::config::McpServers;
use hermes::mcp::{McpHub, McpPaths, ServerState};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const CALLS: usize = 300;

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(run());
}

fn env_path(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run this bench under tests/peers/run.sh"))
}

async fn run() {
    let everything = env_path("HERMES_TEST_MCP_EVERYTHING");
    let python = env_path("HERMES_TEST_MCP_PYTHON");
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mcp/orders.py");
    let port = free_port();
    let mut http_server = tokio::process::Command::new(&python)
        .args([fixture, "http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Python MCP server");
    let url = format!("http://127.0.0.1:{port}/mcp");
    wait_for_port(port).await;

    println!("MCP per-call overhead, {CALLS} calls each (after 20 warm-up calls)");
    println!("{:<34} {:>10} {:>10} {:>10}", "", "mean", "p50", "p99");

    let args = json!({ "a": 2, "b": 40 });
    let direct = direct_stdio(&everything, "get-sum", &args).await;
    report("stdio, bare rmcp client", &direct);
    let hub =
        hub_calls(&format!("everything:\n  command: node\n  args: [{everything:?}, stdio]\n"), "mcp__everything__get_sum", &args).await;
    report("stdio, through McpHub", &hub);
    overhead("stdio", &direct, &hub);

    let args = json!({ "order_id": "12345" });
    let direct = direct_http(&url, "get_order", &args).await;
    report("HTTP, bare rmcp client", &direct);
    let hub = hub_calls(&format!("orders:\n  url: {url:?}\n"), "mcp__orders__get_order", &args).await;
    report("HTTP, through McpHub", &hub);
    overhead("HTTP", &direct, &hub);

    let _ = http_server.kill().await;
}

/// Calls through the hub, as the agent's tool makes them.
async fn hub_calls(yaml: &str, tool: &str, args: &Value) -> Vec<Duration> {
    let servers: McpServers = serde_yaml_ng::from_str(yaml).expect("bench config");
    let dir = tempfile::tempdir().expect("temp dir");
    let hub = McpHub::new(servers, McpPaths { logs_dir: dir.path().to_path_buf() });
    let stop = CancellationToken::new();
    hub.start(stop.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !hub.status().iter().all(|s| s.state == ServerState::Connected) {
        assert!(Instant::now() < deadline, "the MCP server did not connect: {:?}", hub.status());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancel = CancellationToken::new();
    let mut times = Vec::with_capacity(CALLS);
    for i in 0..CALLS + 20 {
        let started = Instant::now();
        let outcome = hub.call(tool, args.clone(), &cancel).await;
        assert!(!outcome.is_error, "{}", outcome.content);
        if i >= 20 {
            times.push(started.elapsed());
        }
    }
    stop.cancel();
    hub.shutdown().await;
    times
}

async fn direct_stdio(script: &str, tool: &str, args: &Value) -> Vec<Duration> {
    let mut child = tokio::process::Command::new("node")
        .args([script, "stdio"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn server-everything");
    let pipes = (child.stdout.take().expect("stdout"), child.stdin.take().expect("stdin"));
    let client = ().serve(pipes).await.expect("initialize");
    let times = timed_calls(&client, tool, args).await;
    let _ = client.cancel().await;
    times
}

async fn direct_http(url: &str, tool: &str, args: &Value) -> Vec<Duration> {
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_string());
    let client = ().serve(transport).await.expect("initialize");
    let times = timed_calls(&client, tool, args).await;
    let _ = client.cancel().await;
    times
}

async fn timed_calls(client: &rmcp::service::RunningService<rmcp::RoleClient, ()>, tool: &str, args: &Value) -> Vec<Duration> {
    let arguments = args.as_object().cloned().expect("object arguments");
    let mut times = Vec::with_capacity(CALLS);
    for i in 0..CALLS + 20 {
        let started = Instant::now();
        let result = client.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments.clone())).await;
        assert!(result.is_ok(), "{result:?}");
        if i >= 20 {
            times.push(started.elapsed());
        }
    }
    times
}

fn stats(times: &[Duration]) -> (Duration, Duration, Duration) {
    let mut sorted = times.to_vec();
    sorted.sort();
    let mean = sorted.iter().sum::<Duration>() / sorted.len() as u32;
    let at = |p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
    (mean, at(0.5), at(0.99))
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn report(label: &str, times: &[Duration]) {
    let (mean, p50, p99) = stats(times);
    println!("{label:<34} {:>10} {:>10} {:>10}", ms(mean), ms(p50), ms(p99));
}

fn overhead(label: &str, direct: &[Duration], hub: &[Duration]) {
    let (d_mean, d_p50, _) = stats(direct);
    let (h_mean, h_p50, _) = stats(hub);
    let diff = |h: Duration, d: Duration| (h.as_secs_f64() - d.as_secs_f64()) * 1000.0;
    // Negative over HTTP: the hub's client keeps connections alive, rmcp's default one does not.
    println!("{label}: the hub adds {:.3} ms per call at the median, {:.3} ms on the mean", diff(h_p50, d_p50), diff(h_mean, d_mean));
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

async fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "the Python MCP server did not listen on {port}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
