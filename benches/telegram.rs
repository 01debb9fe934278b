//! Telegram benchmark, through the fake Bot API with an instant scripted LLM, on the release
//! binary:
//!
//! - spawn → first `getUpdates` (the time until the bot can receive anything);
//! - idle RSS with Telegram as the only platform;
//! - reply latency: a DM injected into the fake → the bot's `sendMessage` arriving there,
//!   sequentially (includes the long poll waking, the inbox write, the turn, the outbox);
//! - burst: 20 users × 10 messages injected at once → all 200 answered; answered messages/s;
//! - with Discord enabled as well (fake Discord, serenity): idle RSS with both platforms and
//!   Discord's reply latency (a DM dispatched on the gateway WebSocket → the bot's message
//!   create arriving at the fake).
//!
//! Run with `cargo bench --bench telegram`. It prints numbers and whether each target is met; it
//! asserts nothing (timings depend on the machine).
//!
//! `scripts/order-hot-code.py` runs it to profile the gateway: `HERMES_BENCH_WRAPPER` is a
//! command the gateway runs under (e.g. `valgrind --tool=callgrind …`) and
//! `HERMES_BENCH_STOP_AFTER_IDLE=1` ends the run once the Telegram-only gateway has gone idle.

#[path = "support.rs"]
mod support;

use hermes_fakes::discord::FakeDiscord;
use hermes_fakes::telegram::FakeTelegram;
use hermes_fakes::{FakeLlm, LlmConfig};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Process, ms, percentile, verdict};

const SPAWN_RUNS: usize = 10;
const WARMUP: usize = 30;
const MESSAGES: usize = 300;
const BURST_USERS: u32 = 20;
const BURST_PER_USER: u32 = 10;
const DISCORD_MESSAGES: usize = 200;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let binary = Path::new(env!("CARGO_BIN_EXE_hermes"));
    let llm = FakeLlm::start_with(LlmConfig { record: false, ..LlmConfig::default() }).await.expect("fake LLM");
    let mut rows: Vec<(String, String, String)> = Vec::new();

    let mut to_first_poll = Vec::new();
    for _ in 0..SPAWN_RUNS {
        let fake = FakeTelegram::start().await.expect("fake Telegram");
        let gateway = Gateway::spawn(binary, &llm.base_url(), &fake, None);
        let polled = fake.wait_until(Duration::from_secs(20), |f| f.first_call_at("getUpdates").is_some()).await;
        assert!(polled, "the gateway never polled:\n{}", gateway.log());
        let first = fake.first_call_at("getUpdates").expect("polled");
        to_first_poll.push(first.duration_since(gateway.process.spawned));
        gateway.stop();
    }
    to_first_poll.sort();
    let p50 = ms(percentile(&to_first_poll, 50.0));
    println!(
        "spawn → first getUpdates over {SPAWN_RUNS} runs: min {:.1} ms, p50 {p50:.1} ms, max {:.1} ms",
        ms(to_first_poll[0]),
        ms(to_first_poll[to_first_poll.len() - 1])
    );
    rows.push(("spawn → first getUpdates p50".into(), format!("{p50:.1} ms"), verdict(p50 <= 30.0, "≤ 30 ms")));

    let fake = FakeTelegram::start().await.expect("fake Telegram");
    let gateway = Gateway::spawn(binary, &llm.base_url(), &fake, None);
    fake.wait_until(Duration::from_secs(20), |f| f.first_call_at("getUpdates").is_some()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss, hwm) = gateway.memory_kb();
    let rss_mb = rss as f64 / 1024.0;
    println!("idle memory, Telegram only: VmRSS {rss_mb:.1} MB, VmHWM {:.1} MB", hwm as f64 / 1024.0);
    rows.push(("idle RSS, Telegram only".into(), format!("{rss_mb:.1} MB"), verdict(rss_mb <= 12.0, "≤ 12 MB")));
    if std::env::var_os("HERMES_BENCH_STOP_AFTER_IDLE").is_some() {
        gateway.stop();
        llm.shutdown();
        return;
    }

    // Sequential round trips: one user, one message at a time.
    let user = fake.user(1001, "bench");
    let mut latencies = Vec::with_capacity(MESSAGES);
    for i in 0..WARMUP + MESSAGES {
        let before = fake.sent_count();
        let injected_at = Instant::now();
        fake.dm(&user, &format!("ping {i}"));
        let answered = fake.wait_until(Duration::from_secs(10), |f| f.sent_count() > before).await;
        assert!(answered, "message {i} was not answered");
        let sent_at = fake.calls().iter().rev().find(|c| c.method == "sendmessage").map(|c| c.at).expect("a send");
        if i >= WARMUP {
            latencies.push(sent_at.duration_since(injected_at));
        }
    }
    latencies.sort();
    let (l50, l95) = (ms(percentile(&latencies, 50.0)), ms(percentile(&latencies, 95.0)));
    println!(
        "reply latency ({MESSAGES} sequential): p50 {l50:.2} ms, p95 {l95:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(percentile(&latencies, 99.0)),
        ms(latencies[latencies.len() - 1])
    );
    rows.push(("reply latency p50".into(), format!("{l50:.2} ms"), verdict(l50 <= 3.0, "≤ 3 ms")));
    rows.push(("reply latency p95".into(), format!("{l95:.2} ms"), verdict(l95 <= 10.0, "≤ 10 ms")));

    // Burst: every user sends all their messages at once.
    let before = fake.sent().iter().filter(|m| m.text.starts_with("echo: burst")).count();
    assert_eq!(before, 0);
    let users: Vec<_> = (1..=BURST_USERS).map(|n| fake.user(2000 + i64::from(n), &format!("burst{n}"))).collect();
    let started = Instant::now();
    for k in 1..=BURST_PER_USER {
        for (n, u) in users.iter().enumerate() {
            fake.dm(u, &format!("burst u{n} m{k}"));
        }
    }
    let total = (BURST_USERS * BURST_PER_USER) as usize;
    let answers = |f: &FakeTelegram| f.sent().iter().filter(|m| m.text.starts_with("echo: burst")).count();
    let done = fake.wait_until(Duration::from_secs(60), |f| answers(f) >= total).await;
    let last_at = fake.calls().iter().filter(|c| c.method == "sendmessage").map(|c| c.at).max().expect("sends");
    let elapsed = last_at.duration_since(started);
    let answered = answers(&fake);
    let rate = answered as f64 / elapsed.as_secs_f64();
    println!(
        "burst {BURST_USERS} users × {BURST_PER_USER}: {answered}/{total} answered in {:.1} ms → {rate:.0} answered messages/s",
        ms(elapsed)
    );
    assert!(done, "the burst was not answered in full");
    rows.push(("burst 20 × 10 answered".into(), format!("{answered}/{total} in {:.0} ms", ms(elapsed)), "all".into()));
    rows.push(("burst throughput".into(), format!("{rate:.0} msg/s"), verdict(rate >= 1500.0, "≥ 1,500 msg/s")));
    let (rss_after, hwm_after) = gateway.memory_kb();
    println!("memory after the load: VmRSS {:.1} MB, VmHWM {:.1} MB", rss_after as f64 / 1024.0, hwm_after as f64 / 1024.0);
    rows.push(("RSS after load".into(), format!("{:.1} MB", rss_after as f64 / 1024.0), "—".into()));
    gateway.stop();

    // Both platforms.
    let fake = FakeTelegram::start().await.expect("fake Telegram");
    let discord = FakeDiscord::start().await.expect("fake Discord");
    let gateway = Gateway::spawn(binary, &llm.base_url(), &fake, Some(&discord));
    fake.wait_until(Duration::from_secs(20), |f| f.first_call_at("getUpdates").is_some()).await;
    assert!(discord.wait_connected(Duration::from_secs(20)).await, "the gateway never connected to Discord:\n{}", gateway.log());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss, hwm) = gateway.memory_kb();
    let rss_mb = rss as f64 / 1024.0;
    println!("idle memory, Telegram + Discord: VmRSS {rss_mb:.1} MB, VmHWM {:.1} MB", hwm as f64 / 1024.0);
    rows.push(("idle RSS, Telegram + Discord".into(), format!("{rss_mb:.1} MB"), "—".into()));
    let user = discord.user(3001, "bench");
    let mut latencies = Vec::with_capacity(DISCORD_MESSAGES);
    for i in 0..WARMUP + DISCORD_MESSAGES {
        let before = discord.sent_count();
        let injected_at = Instant::now();
        discord.dm(&user, &format!("ping {i}"));
        let answered = discord.wait_until(Duration::from_secs(10), |f| f.sent_count() > before).await;
        assert!(answered, "Discord message {i} was not answered:\n{}", gateway.log());
        let sent_at =
            discord.calls().iter().rev().find(|c| c.method == "POST" && c.path.ends_with("/messages")).map(|c| c.at).expect("a send");
        if i >= WARMUP {
            latencies.push(sent_at.duration_since(injected_at));
        }
    }
    latencies.sort();
    let (l50, l95) = (ms(percentile(&latencies, 50.0)), ms(percentile(&latencies, 95.0)));
    println!("Discord reply latency ({DISCORD_MESSAGES} sequential): p50 {l50:.2} ms, p95 {l95:.2} ms");
    rows.push(("Discord reply latency p50 / p95".into(), format!("{l50:.2} / {l95:.2} ms"), "—".into()));
    gateway.stop();
    llm.shutdown();

    println!("\n| measure | value | target |\n|---|---|---|");
    for (what, value, target) in rows {
        println!("| {what} | {value} | {target} |");
    }
}

/// `hermes gateway run` with Telegram (and Discord when given); killed on drop.
struct Gateway {
    process: Process,
    _home: tempfile::TempDir,
}

impl Gateway {
    fn spawn(binary: &Path, llm_base_url: &str, fake: &FakeTelegram, discord: Option<&FakeDiscord>) -> Gateway {
        let home = tempfile::tempdir().expect("temp dir");
        // The fake does not throttle, so the gateway's own Telegram send budget is switched off
        // to measure the gateway rather than the budget.
        std::fs::write(
            home.path().join("config.yaml"),
            "platforms:\n  telegram:\n    send_budget: {global_per_second: 0, per_chat_per_second: 0, group_per_minute: 0}\ndisplay:\n  busy_input_mode: queue\n",
        )
        .expect("config");
        let allowed: Vec<String> = (1001..=1001).chain(2001..=2000 + i64::from(BURST_USERS)).map(|id| id.to_string()).collect();
        let wrapper: Vec<String> = std::env::var("HERMES_BENCH_WRAPPER").unwrap_or_default().split_whitespace().map(String::from).collect();
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(binary);
                command
            }
            None => Command::new(binary),
        };
        command
            .args(["gateway", "run"])
            .env_clear()
            .env("HERMES_HOME", home.path())
            .env("HOME", home.path())
            .env("OPENAI_BASE_URL", llm_base_url)
            .env("OPENAI_API_KEY", "sk-bench-0000000000")
            .env("TELEGRAM_BOT_TOKEN", fake.token())
            .env("TELEGRAM_API_BASE_URL", fake.api_url())
            .env("TELEGRAM_ALLOWED_USERS", allowed.join(","))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(home.path().join("gateway.log")).map(Stdio::from).unwrap_or(Stdio::null()));
        if let Some(discord) = discord {
            command
                .env("DISCORD_BOT_TOKEN", discord.token())
                .env("DISCORD_API_BASE_URL", discord.api_url())
                .env("DISCORD_ALLOWED_USERS", "3001");
        }
        let spawned = Instant::now();
        let child = command.spawn().expect("spawn hermes");
        Gateway { process: Process::new(child, spawned), _home: home }
    }

    fn memory_kb(&self) -> (u64, u64) {
        self.process.memory_kb()
    }

    fn stop(self) {
        self.process.stop();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._home.path().join("gateway.log")).unwrap_or_default()
    }
}
