//! Gateway benchmark: the numbers the issue notes report, measured on the release binary.
//!
//! - release binary size;
//! - time from spawning `hermes gateway run` to `/health` answering (both adapters on);
//! - idle RSS of that process after it settled;
//! - API round-trip overhead: sequential non-streaming chat completions through the gateway
//!   against an instant scripted LLM, compared with the same requests sent to the LLM directly;
//! - streaming: time to the first token and to `[DONE]` through the gateway.
//!
//! Run with `cargo bench --bench gateway`. It prints numbers and whether each target is met; it
//! asserts nothing (timings depend on the machine).

#[path = "support.rs"]
#[allow(dead_code)] // the wrapped command is for the benches the hot-code order profiles
mod support;

use hermes_fakes::{FakeLlm, LlmConfig};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Process, ms, percentile, verdict};

const API_KEY: &str = "bench-key-0123456789";
const SPAWN_RUNS: usize = 10;
const WARMUP: usize = 20;
const REQUESTS: usize = 300;
const STREAMS: usize = 50;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let binary = Path::new(env!("CARGO_BIN_EXE_hermes"));
    let llm = FakeLlm::start_with(LlmConfig { record: false, ..LlmConfig::default() }).await.expect("fake LLM");
    let mut rows: Vec<(String, String, String)> = Vec::new();

    let size_mb = std::fs::metadata(binary).map(|m| m.len() as f64 / 1_048_576.0).unwrap_or(0.0);
    println!("binary: {} ({size_mb:.1} MB)", binary.display());
    rows.push(("release binary size".into(), format!("{size_mb:.1} MB"), "—".into()));

    // Spawn → /health.
    let mut startup = Vec::new();
    for _ in 0..SPAWN_RUNS {
        let gateway = Gateway::spawn(binary, &llm.base_url());
        startup.push(gateway.wait_healthy(Duration::from_secs(20)).await);
        gateway.stop();
    }
    startup.sort();
    let p50 = ms(percentile(&startup, 50.0));
    println!(
        "spawn → /health over {SPAWN_RUNS} runs: min {:.1} ms, p50 {p50:.1} ms, max {:.1} ms",
        ms(startup[0]),
        ms(startup[startup.len() - 1])
    );
    rows.push(("spawn → /health p50".into(), format!("{p50:.1} ms"), verdict(p50 <= 30.0, "≤ 30 ms")));

    // Idle memory, then the round trips on the same process.
    let gateway = Gateway::spawn(binary, &llm.base_url());
    gateway.wait_healthy(Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss, hwm) = gateway.memory_kb();
    let rss_mb = rss as f64 / 1024.0;
    println!("idle memory: VmRSS {rss_mb:.1} MB, VmHWM {:.1} MB", hwm as f64 / 1024.0);
    rows.push(("idle RSS (both adapters)".into(), format!("{rss_mb:.1} MB"), verdict(rss_mb <= 10.0, "≤ 10 MB")));

    let client = reqwest::Client::builder().pool_max_idle_per_host(4).build().expect("http client");
    let through = gateway.api("/v1/chat/completions");
    let direct = format!("{}/chat/completions", llm.base_url());
    for i in 0..WARMUP {
        complete(&client, &through, Some(API_KEY), i).await;
        complete(&client, &direct, None, i).await;
    }
    let mut via_gateway = Vec::with_capacity(REQUESTS);
    let mut via_direct = Vec::with_capacity(REQUESTS);
    for i in 0..REQUESTS {
        via_gateway.push(complete(&client, &through, Some(API_KEY), i).await);
        via_direct.push(complete(&client, &direct, None, i).await);
    }
    via_gateway.sort();
    via_direct.sort();
    let (g50, d50) = (ms(percentile(&via_gateway, 50.0)), ms(percentile(&via_direct, 50.0)));
    println!(
        "chat completion ({REQUESTS} sequential): gateway p50 {g50:.2} / p90 {:.2} / p99 {:.2} ms; direct p50 {d50:.2} / p90 {:.2} / p99 {:.2} ms",
        ms(percentile(&via_gateway, 90.0)),
        ms(percentile(&via_gateway, 99.0)),
        ms(percentile(&via_direct, 90.0)),
        ms(percentile(&via_direct, 99.0)),
    );
    let overhead = g50 - d50;
    rows.push(("API round trip p50 (gateway)".into(), format!("{g50:.2} ms"), "—".into()));
    rows.push(("API overhead p50 (gateway − direct)".into(), format!("{overhead:.2} ms"), verdict(overhead <= 3.0, "≤ 3 ms")));

    let mut first_token = Vec::with_capacity(STREAMS);
    let mut total = Vec::with_capacity(STREAMS);
    for i in 0..STREAMS {
        let (first, done) = stream(&client, &through, i).await;
        first_token.push(first);
        total.push(done);
    }
    first_token.sort();
    total.sort();
    let (f50, t50) = (ms(percentile(&first_token, 50.0)), ms(percentile(&total, 50.0)));
    println!("streaming ({STREAMS} sequential): first token p50 {f50:.2} ms, [DONE] p50 {t50:.2} ms");
    rows.push(("stream first token p50".into(), format!("{f50:.2} ms"), "—".into()));
    rows.push(("stream complete p50".into(), format!("{t50:.2} ms"), "—".into()));
    let (rss_after, hwm_after) = gateway.memory_kb();
    println!("memory after the load: VmRSS {:.1} MB, VmHWM {:.1} MB", rss_after as f64 / 1024.0, hwm_after as f64 / 1024.0);
    rows.push(("RSS after load".into(), format!("{:.1} MB", rss_after as f64 / 1024.0), "—".into()));
    gateway.stop();
    llm.shutdown();

    println!("\n| measure | value | target |\n|---|---|---|");
    for (what, value, target) in rows {
        println!("| {what} | {value} | {target} |");
    }
}

async fn complete(client: &reqwest::Client, url: &str, key: Option<&str>, i: usize) -> Duration {
    let started = Instant::now();
    let mut request = client
        .post(url)
        .json(&serde_json::json!({"model": "hermes-agent", "messages": [{"role": "user", "content": format!("ping {i}")}]}));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("request");
    assert!(response.status().is_success(), "{url}: {}", response.status());
    let body: serde_json::Value = response.json().await.expect("json");
    assert!(body["choices"][0]["message"]["content"].as_str().is_some_and(|c| c.ends_with(&format!("ping {i}"))), "{body}");
    started.elapsed()
}

/// (time to the first content delta, time to `[DONE]`).
async fn stream(client: &reqwest::Client, url: &str, i: usize) -> (Duration, Duration) {
    let started = Instant::now();
    let mut response = client
        .post(url)
        .bearer_auth(API_KEY)
        .json(
            &serde_json::json!({"model": "hermes-agent", "stream": true, "messages": [{"role": "user", "content": format!("stream {i}")}]}),
        )
        .send()
        .await
        .expect("request");
    assert!(response.status().is_success());
    let mut first = None;
    let mut seen = String::new();
    while let Some(chunk) = response.chunk().await.expect("body") {
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if first.is_none() && seen.contains("\"content\"") {
            first = Some(started.elapsed());
        }
        if seen.contains("data: [DONE]") {
            break;
        }
    }
    let done = started.elapsed();
    (first.unwrap_or(done), done)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// A `hermes gateway run` child process with its own HERMES_HOME; killed on drop.
struct Gateway {
    process: Process,
    api_port: u16,
    _home: tempfile::TempDir,
}

impl Gateway {
    fn spawn(binary: &Path, llm_base_url: &str) -> Gateway {
        let home = tempfile::tempdir().expect("temp dir");
        let (api_port, webhook_port) = (free_port(), free_port());
        let mut command = Command::new(binary);
        command
            .args(["gateway", "run"])
            .env_clear()
            .env("HERMES_HOME", home.path())
            .env("HOME", home.path())
            .env("OPENAI_BASE_URL", llm_base_url)
            .env("OPENAI_API_KEY", "sk-bench-0000000000")
            .env("API_SERVER_ENABLED", "true")
            .env("API_SERVER_KEY", API_KEY)
            .env("API_SERVER_HOST", "127.0.0.1")
            .env("API_SERVER_PORT", api_port.to_string())
            .env("WEBHOOK_ENABLED", "true")
            .env("WEBHOOK_PORT", webhook_port.to_string())
            .env("WEBHOOK_SECRET", "bench-secret-0123")
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let spawned = Instant::now();
        let child = command.spawn().expect("spawn hermes gateway run");
        Gateway { process: Process::new(child, spawned), api_port, _home: home }
    }

    fn memory_kb(&self) -> (u64, u64) {
        self.process.memory_kb()
    }

    fn stop(self) {
        self.process.stop();
    }

    fn api(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.api_port)
    }

    /// Poll `/health` with a fresh connection each time; returns the time since spawn.
    async fn wait_healthy(&self, timeout: Duration) -> Duration {
        let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("http client");
        let url = self.api("/health");
        while self.process.spawned.elapsed() < timeout {
            if client.get(&url).send().await.is_ok_and(|r| r.status().is_success()) {
                return self.process.spawned.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("hermes did not answer {url} within {timeout:?}");
    }
}
