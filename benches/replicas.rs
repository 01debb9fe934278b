//! Replicas benchmark (issue 38): what PostgreSQL costs a turn, and how long a failover takes.
//!
//! - Turns through the real `hermes gateway run` (API server on, an instant fake LLM), once on
//!   SQLite (the default) and once on PostgreSQL (a fresh schema on `HERMES_TEST_POSTGRES_URL`):
//!   p50/p95 latency of sequential turns that append to stored conversations (the session
//!   header), and the throughput of concurrent conversations, in turns per second.
//! - Takeover: three replicas on one PostgreSQL schema and the fake Telegram; the leader (the
//!   replica whose status file says it reads Telegram) is killed with SIGKILL, a message
//!   is sent at once, and the time from the kill to its answer at the fake is taken, over
//!   [`FAILOVERS`] failovers, for each lease TTL of [`TTLS`] (or `HERMES_BENCH_TTLS`, e.g. `3`).
//!   The killed replica comes back as a standby before the next round.
//!
//! Run with `cargo bench --profile dev --bench replicas`. Without `HERMES_TEST_POSTGRES_URL`
//! only SQLite is measured. It prints numbers and asserts nothing (timings depend on the machine).

#[path = "support.rs"]
#[allow(dead_code)] // memory, verdicts and the wrapped command are for the other benches
mod support;

use hermes_fakes::telegram::{FakeTelegram, TgUser};
use hermes_fakes::{FakeLlm, LlmConfig};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Process, ms, percentile};

const API_KEY: &str = "bench-key-0123456789";
const SESSION_HEADER: &str = "x-hermes-session-id";
const WARMUP_TURNS: usize = 20;
/// Sequential turns: this many conversations, one after the other…
const CONVERSATIONS: usize = 4;
/// …of this many turns each, every one appended to the stored history.
const TURNS_PER_CONVERSATION: usize = 50;
/// Throughput: this many conversations at once…
const CONCURRENT: usize = 8;
/// …of this many turns each.
const CONCURRENT_TURNS: usize = 25;
const FAILOVERS: usize = 10;
/// Lease TTLs measured: the default, and the short one the conformance tests use.
const TTLS: [u64; 2] = [15, 3];
const REPLICAS: [&str; 3] = ["replica-a", "replica-b", "replica-c"];
/// The Telegram user who writes to the bot.
const TG_USER: i64 = 1001;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let started = Instant::now();
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_hermes"));
    let server = std::env::var("HERMES_TEST_POSTGRES_URL").ok().filter(|u| !u.trim().is_empty());
    let llm = FakeLlm::start_with(LlmConfig { record: false, ..LlmConfig::default() }).await.expect("fake LLM");

    let mut turns = vec![measure_turns(&binary, &llm, "SQLite", None).await];
    match &server {
        Some(server) => {
            let schema = Schema::create(server).await;
            turns.push(measure_turns(&binary, &llm, "PostgreSQL", Some(&schema.url)).await);
            schema.drop().await;
        }
        None => println!("SKIP PostgreSQL: HERMES_TEST_POSTGRES_URL is not set (tests/peers/run.sh starts a PostgreSQL and sets it)"),
    }

    let mut takeovers = Vec::new();
    if let Some(server) = &server {
        for ttl in ttls() {
            takeovers.push((ttl, measure_takeovers(&binary, &llm, server, ttl).await));
        }
    } else {
        println!("SKIP takeover: HERMES_TEST_POSTGRES_URL is not set");
    }
    llm.shutdown();

    print_turns(&turns);
    print_takeovers(&takeovers);
    println!("\nbench run time: {:.0} s", started.elapsed().as_secs_f64());
}

/// The lease TTLs to measure: `HERMES_BENCH_TTLS` (comma-separated seconds), else [`TTLS`].
fn ttls() -> Vec<u64> {
    match std::env::var("HERMES_BENCH_TTLS") {
        Ok(list) => list.split(',').map(|t| t.trim().parse().expect("HERMES_BENCH_TTLS: seconds, comma-separated")).collect(),
        Err(_) => TTLS.to_vec(),
    }
}

// ---------------------------------------------------------------------------------------------
// Turn latency and throughput

/// One backend's turn numbers.
struct TurnRow {
    backend: &'static str,
    sequential: Vec<Duration>,
    concurrent: Vec<Duration>,
    turns_per_second: f64,
}

async fn measure_turns(binary: &Path, llm: &FakeLlm, backend: &'static str, database_url: Option<&str>) -> TurnRow {
    let mut env = base_env(&llm.base_url());
    if let Some(url) = database_url {
        env.push(("DATABASE_URL".into(), url.into()));
    }
    let home = Home::new();
    let gateway = Replica::spawn(binary, &home, &env);
    gateway.wait_healthy(Duration::from_secs(30)).await;
    let client = reqwest::Client::builder().pool_max_idle_per_host(CONCURRENT * 2).build().expect("http client");
    let url = gateway.api("/v1/chat/completions");

    for i in 0..WARMUP_TURNS {
        turn(&client, &url, "warm-up", &format!("warm {i}")).await;
    }
    let mut sequential = Vec::with_capacity(CONVERSATIONS * TURNS_PER_CONVERSATION);
    for c in 0..CONVERSATIONS {
        for i in 0..TURNS_PER_CONVERSATION {
            sequential.push(turn(&client, &url, &format!("seq-{c}"), &format!("turn {c}.{i}")).await);
        }
    }
    sequential.sort();

    let began = Instant::now();
    let conversations: Vec<_> = (0..CONCURRENT)
        .map(|c| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let mut took = Vec::with_capacity(CONCURRENT_TURNS);
                for i in 0..CONCURRENT_TURNS {
                    took.push(turn(&client, &url, &format!("par-{c}"), &format!("parallel {c}.{i}")).await);
                }
                took
            })
        })
        .collect();
    let mut concurrent = Vec::with_capacity(CONCURRENT * CONCURRENT_TURNS);
    for conversation in conversations {
        concurrent.extend(conversation.await.expect("a conversation task"));
    }
    let turns_per_second = concurrent.len() as f64 / began.elapsed().as_secs_f64();
    concurrent.sort();
    gateway.stop();

    let row = TurnRow { backend, sequential, concurrent, turns_per_second };
    println!(
        "{backend}: sequential p50 {:.2} ms p95 {:.2} ms; {CONCURRENT} concurrent: p50 {:.2} ms p95 {:.2} ms, {:.1} turns/s",
        ms(percentile(&row.sequential, 50.0)),
        ms(percentile(&row.sequential, 95.0)),
        ms(percentile(&row.concurrent, 50.0)),
        ms(percentile(&row.concurrent, 95.0)),
        row.turns_per_second,
    );
    row
}

/// One non-streaming turn in `conversation`; the gateway adds the stored history itself.
async fn turn(client: &reqwest::Client, url: &str, conversation: &str, text: &str) -> Duration {
    let started = Instant::now();
    let response = client
        .post(url)
        .bearer_auth(API_KEY)
        .header(SESSION_HEADER, conversation)
        .json(&serde_json::json!({"model": "hermes-agent", "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .expect("a chat completion request");
    assert!(response.status().is_success(), "{url}: {}", response.status());
    let body: serde_json::Value = response.json().await.expect("a JSON answer");
    assert!(body["choices"][0]["message"]["content"].as_str().is_some_and(|c| c.contains(text)), "{body}");
    started.elapsed()
}

fn print_turns(rows: &[TurnRow]) {
    println!(
        "\nturns: {WARMUP_TURNS} warm-up; sequential {CONVERSATIONS} conversations × {TURNS_PER_CONVERSATION} turns; throughput {CONCURRENT} conversations × {CONCURRENT_TURNS} turns at once"
    );
    println!("| backend | p50 ms | p95 ms | turns/s ({CONCURRENT} concurrent) | concurrent p50 ms | concurrent p95 ms |");
    println!("|---|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {:.2} | {:.2} | {:.1} | {:.2} | {:.2} |",
            row.backend,
            ms(percentile(&row.sequential, 50.0)),
            ms(percentile(&row.sequential, 95.0)),
            row.turns_per_second,
            ms(percentile(&row.concurrent, 50.0)),
            ms(percentile(&row.concurrent, 95.0)),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Takeover

/// Three replicas on a fresh schema; [`FAILOVERS`] times: kill the leader, message the bot at
/// once, and time the answer. Returns the takeover times, in round order.
async fn measure_takeovers(binary: &Path, llm: &FakeLlm, server: &str, ttl: u64) -> Vec<Duration> {
    let schema = Schema::create(server).await;
    let telegram = FakeTelegram::start().await.expect("fake Telegram");
    let user = telegram.user(TG_USER, "bench_user");
    let mut cluster: Vec<Member> = REPLICAS.iter().map(|name| Member::new(binary, llm, &telegram, &schema.url, name, ttl)).collect();
    let mut took = Vec::with_capacity(FAILOVERS);
    for round in 1..=FAILOVERS {
        let leader = find_leader(&cluster).await;
        standbys_ready(&cluster, leader).await;
        // The leader reads Telegram and answers before it is killed.
        answer_time(&telegram, &user, &format!("ready {ttl}/{round}"), Instant::now(), &cluster).await;

        let killed = cluster[leader].kill();
        let takeover = answer_time(&telegram, &user, &format!("failover {ttl}/{round}"), killed, &cluster).await;
        println!(
            "TTL {ttl} s, failover {round}: {} took over in {:.2} s",
            cluster[find_leader(&cluster).await].name,
            takeover.as_secs_f64()
        );
        took.push(takeover);
        cluster[leader].restart();
    }
    for member in cluster {
        member.stop();
    }
    schema.drop().await;
    took
}

/// Message the bot now and wait for its echo; returns the time from `since` to the answer.
async fn answer_time(telegram: &FakeTelegram, user: &TgUser, text: &str, since: Instant, cluster: &[Member]) -> Duration {
    telegram.dm(user, text);
    let answered = |m: &hermes_fakes::telegram::SentMessage| m.text.contains(text);
    let arrived = telegram.wait_until(Duration::from_secs(120), |t| t.count_sent(answered) > 0).await;
    assert!(arrived, "no answer to {text:?} within 120 s\n{}", logs(cluster));
    telegram.last_sent_at(answered).expect("the answer arrived").saturating_duration_since(since)
}

/// The replica that leads: the one whose status file says it reads Telegram (every replica
/// serves the API, so an answering API says nothing).
async fn find_leader(cluster: &[Member]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(leader) = cluster.iter().position(|member| member.running.is_some() && member.telegram_state() == "connected") {
            return leader;
        }
        assert!(Instant::now() < deadline, "no replica leads after 120 s\n{}", logs(cluster));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Wait until every replica but `leader` stands by (its status file says so), so each failover
/// starts from one leader and two standbys.
async fn standbys_ready(cluster: &[Member], leader: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for (i, member) in cluster.iter().enumerate() {
        while i != leader && !member.stands_by() {
            assert!(Instant::now() < deadline, "{} did not stand by within 60 s\n{}", member.name, logs(cluster));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn print_takeovers(runs: &[(u64, Vec<Duration>)]) {
    if runs.is_empty() {
        return;
    }
    println!("\ntakeover (SIGKILL of the leader → answer at the fake Telegram), three replicas, {FAILOVERS} failovers per TTL");
    println!("| lease TTL | min s | p50 s | max s |");
    println!("|---|---|---|---|");
    for (ttl, took) in runs {
        let mut sorted = took.clone();
        sorted.sort();
        let secs = |d: Duration| d.as_secs_f64();
        println!("| {ttl} s | {:.2} | {:.2} | {:.2} |", secs(sorted[0]), secs(percentile(&sorted, 50.0)), secs(sorted[sorted.len() - 1]));
    }
}

/// One replica of the cluster: its home and environment outlive its processes.
struct Member {
    name: &'static str,
    binary: PathBuf,
    home: Home,
    env: Vec<(String, String)>,
    running: Option<Replica>,
}

impl Member {
    fn new(binary: &Path, llm: &FakeLlm, telegram: &FakeTelegram, database_url: &str, name: &'static str, ttl: u64) -> Member {
        let mut env = base_env(&llm.base_url());
        env.extend(
            [
                ("DATABASE_URL", database_url.to_string()),
                ("TELEGRAM_BOT_TOKEN", telegram.token()),
                ("TELEGRAM_API_BASE_URL", telegram.api_url()),
                ("TELEGRAM_ALLOWED_USERS", TG_USER.to_string()),
            ]
            .map(|(k, v)| (k.to_string(), v)),
        );
        let home = Home::new();
        // The bot paces nothing: the bench times the takeover, not Telegram's send budget.
        home.write_config(&format!(
            "platforms:\n  telegram:\n    send_budget: {{global_per_second: 0, per_chat_per_second: 0, group_per_minute: 0}}\nstore:\n  lease_ttl_seconds: {ttl}\n  replica: {name}\n"
        ));
        let running = Some(Replica::spawn(binary, &home, &env));
        Member { name, binary: binary.to_path_buf(), home, env, running }
    }

    /// SIGKILL (what dropping the child does), returning when it was sent.
    fn kill(&mut self) -> Instant {
        let killed = Instant::now();
        drop(self.running.take());
        killed
    }

    /// Start again on the same home; it comes back as a standby.
    fn restart(&mut self) {
        // Its last status says it led; the new process rewrites it when it stands by.
        let _ = std::fs::remove_file(self.home.status_file());
        self.running = Some(Replica::spawn(&self.binary, &self.home, &self.env));
    }

    /// Its Telegram adapter's state, as its status file says (empty before it wrote one).
    fn telegram_state(&self) -> String {
        let status = std::fs::read_to_string(self.home.status_file()).unwrap_or_default();
        let status: serde_json::Value = serde_json::from_str(&status).unwrap_or_default();
        status["platforms"]["telegram"]["state"].as_str().unwrap_or_default().to_string()
    }

    fn stands_by(&self) -> bool {
        self.telegram_state() == "standby"
    }

    fn stop(self) {
        if let Some(replica) = self.running {
            replica.stop();
        }
    }
}

/// The newest log of every member, for a failure message.
fn logs(cluster: &[Member]) -> String {
    cluster.iter().map(|m| format!("--- {} ---\n{}", m.name, m.home.last_log())).collect::<Vec<_>>().join("\n")
}

// ---------------------------------------------------------------------------------------------
// Processes

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// The environment every gateway runs with: the fake LLM, the API server on a free port, no
/// webhook listener, few logs (they cost time on the measured path).
fn base_env(llm_base_url: &str) -> Vec<(String, String)> {
    [
        ("OPENAI_BASE_URL", llm_base_url.to_string()),
        ("OPENAI_API_KEY", "sk-bench-0000000000".to_string()),
        ("API_SERVER_ENABLED", "true".to_string()),
        ("API_SERVER_KEY", API_KEY.to_string()),
        ("API_SERVER_HOST", "127.0.0.1".to_string()),
        ("API_SERVER_PORT", free_port().to_string()),
        ("WEBHOOK_ENABLED", "false".to_string()),
        ("RUST_LOG", "warn".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// A HERMES_HOME (also HOME, so credential locks stay per replica); removed on drop.
struct Home {
    dir: tempfile::TempDir,
    starts: std::cell::Cell<usize>,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().expect("temp dir");
        // Owner-only, as the gateway makes HERMES_HOME at its first start.
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod 700 HERMES_HOME");
        Home { dir, starts: std::cell::Cell::new(0) }
    }

    fn write_config(&self, yaml: &str) {
        std::fs::write(self.dir.path().join("config.yaml"), yaml).expect("write config.yaml");
    }

    fn status_file(&self) -> PathBuf {
        self.dir.path().join("gateway_state.json")
    }

    /// A fresh log file for the next process.
    fn next_log(&self) -> PathBuf {
        let n = self.starts.get();
        self.starts.set(n + 1);
        self.dir.path().join(format!("gateway-{n}.log"))
    }

    fn last_log(&self) -> String {
        let n = self.starts.get().saturating_sub(1);
        std::fs::read_to_string(self.dir.path().join(format!("gateway-{n}.log"))).unwrap_or_default()
    }
}

/// A running `hermes gateway run`; killed (SIGKILL) when dropped.
struct Replica {
    process: Process,
    api_port: String,
}

impl Replica {
    fn spawn(binary: &Path, home: &Home, env: &[(String, String)]) -> Replica {
        let log = std::fs::File::create(home.next_log()).expect("log file");
        let mut command = Command::new(binary);
        command.args(["gateway", "run"]).env_clear().env("HERMES_HOME", home.dir.path()).env("HOME", home.dir.path());
        command.envs(env.iter().map(|(k, v)| (k, v))).stdout(Stdio::null()).stderr(log);
        let api_port = env.iter().find(|(k, _)| k == "API_SERVER_PORT").map(|(_, v)| v.clone()).expect("an API server port");
        let spawned = Instant::now();
        let child = command.spawn().expect("spawn hermes gateway run");
        Replica { process: Process::new(child, spawned), api_port }
    }

    fn api(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.api_port)
    }

    async fn wait_healthy(&self, timeout: Duration) {
        let client = reqwest::Client::new();
        let url = self.api("/health");
        while self.process.spawned.elapsed() < timeout {
            if client.get(&url).send().await.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("hermes did not answer {url} within {timeout:?}");
    }

    /// SIGTERM and wait.
    fn stop(self) {
        self.process.stop();
    }
}

/// A fresh, empty schema of its own on the PostgreSQL server, as the tests make them
/// (`scratch_database` in tests/e2e/support.rs); dropped again at the end.
struct Schema {
    server: String,
    name: String,
    url: String,
}

impl Schema {
    async fn create(server: &str) -> Schema {
        let name = format!("bench_{}", uuid::Uuid::new_v4().simple());
        execute(server, &format!("CREATE SCHEMA {name}")).await;
        let url = format!("{server}?options=-c%20search_path%3D{name}&sslmode=disable");
        Schema { server: server.to_string(), name, url }
    }

    async fn drop(self) {
        execute(&self.server, &format!("DROP SCHEMA {} CASCADE", self.name)).await;
    }
}

async fn execute(server: &str, sql: &str) {
    let (client, connection) = tokio_postgres::connect(server, tokio_postgres::NoTls).await.expect("the PostgreSQL server answers");
    let driver = tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    drop(client);
    let _ = driver.await;
}
