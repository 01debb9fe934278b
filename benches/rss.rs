//! Memory under months of load: the release gateway's resident memory while 200,000 messages go
//! through the fake Telegram Bot API (5,000 users in their DMs and in 50 groups, the instant
//! scripted LLM), read every 10,000 messages from `/proc/<pid>/status`, then after a short idle
//! and from the gateway's own `/metrics` (which must agree). What it shows: memory levels off —
//! the last 100,000 messages add less than 2 MB — because every cache has a bound
//! (`gateway.memory.*`).
//!
//! Run with `cargo bench --bench rss`; `HERMES_BENCH_BINARY` runs another `hermes` binary (the
//! one `cargo build --release` made; a wrapper script can run it under `heaptrack`).
//! `HERMES_BENCH_MESSAGES` and `HERMES_BENCH_USERS` make a quicker run (e.g. 10000 and 500).
//! It prints numbers; it asserts only that every message was answered.

#[path = "support.rs"]
#[allow(dead_code)] // percentiles and verdicts are for the latency benches
mod support;

use hermes_fakes::telegram::{FakeTelegram, SentMessage, TgUser};
use hermes_fakes::{FakeLlm, LlmConfig};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Process, ms};

const MESSAGES: usize = 200_000;
const USERS: i64 = 5_000;
const GROUPS: i64 = 50;
/// RSS is read every this many messages (a multiple of [`WAVE`]).
const CHECKPOINT_EVERY: usize = 10_000;
/// The tail whose growth is the verdict: memory must have levelled off by then.
const TAIL: usize = 100_000;
const TAIL_GROWTH_GOAL_MB: f64 = 2.0;
/// Messages injected at once before waiting for their answers.
const WAVE: usize = 500;
const FIRST_USER: i64 = 700_000;
const FIRST_GROUP: i64 = -1_009_000_000;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(run());
}

/// A count from the environment, or `default`; a bad value stops the run with its name.
fn count_from_env(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(text) => text.trim().parse().unwrap_or_else(|_| panic!("{name} must be a whole number, found {text:?}")),
        Err(_) => default,
    }
}

async fn run() {
    let messages = count_from_env("HERMES_BENCH_MESSAGES", MESSAGES);
    let user_count = count_from_env("HERMES_BENCH_USERS", USERS as usize) as i64;
    let chosen = std::env::var_os("HERMES_BENCH_BINARY").map(PathBuf::from);
    let binary = chosen.as_deref().unwrap_or(Path::new(env!("CARGO_BIN_EXE_hermes")));
    println!("binary: {}", binary.display());
    let llm = FakeLlm::start_with(LlmConfig { record: false, ..LlmConfig::default() }).await.expect("fake LLM");
    let fake = FakeTelegram::start().await.expect("fake Telegram");
    let groups: Vec<i64> = (0..GROUPS).map(|g| FIRST_GROUP - g).collect();
    for (n, g) in groups.iter().enumerate() {
        fake.group(*g, &format!("group {n}"), false);
    }
    let users: Vec<TgUser> = (0..user_count).map(|n| fake.user(FIRST_USER + n, &format!("user{n}"))).collect();
    let admin_port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port");
    let gateway = Gateway::spawn(binary, &llm.base_url(), &fake, admin_port, user_count);
    assert!(
        fake.wait_until(Duration::from_secs(20), |f| f.first_call_at("getUpdates").is_some()).await,
        "the gateway never polled:\n{}",
        gateway.log()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (start_rss, start_hwm) = gateway.process.memory_kb();
    println!("at start: VmRSS {:.1} MB, VmHWM {:.1} MB", mb(start_rss), mb(start_hwm));

    let started = Instant::now();
    let mut sent_so_far = 0;
    let mut checkpoints = vec![(0, start_rss)];
    // A quick run still gets about ten readings.
    let every = ((messages / 10) / WAVE * WAVE).clamp(WAVE, CHECKPOINT_EVERY);
    while sent_so_far < messages {
        let wave = WAVE.min(messages - sent_so_far);
        // The fake's log only grows: counting all of it on every change would cost the bench
        // more CPU than the gateway. One answer per message (queue mode, and no user appears
        // twice in a wave), so the total count says when the wave is answered.
        let answered_before = fake.sent_count();
        for k in 0..wave {
            let n = sent_so_far + k;
            let user = &users[n % users.len()];
            // One message in five goes to a group the user is in, the rest to their DM.
            if n % 5 == 4 {
                fake.group_message(groups[n % groups.len()], user, &format!("w{sent_so_far} m{n}"));
            } else {
                fake.dm(user, &format!("w{sent_so_far} m{n}"));
            }
        }
        let done = fake.wait_until(Duration::from_secs(120), |f| f.sent_count() >= answered_before + wave).await;
        assert!(done, "wave at {sent_so_far}: {} of {wave} answered:\n{}", fake.sent_count() - answered_before, gateway.log());
        sent_so_far += wave;
        if sent_so_far % every == 0 || sent_so_far == messages {
            let (rss, _) = gateway.process.memory_kb();
            println!("  after {sent_so_far:>7} messages: VmRSS {:.1} MB ({:.0} s)", mb(rss), started.elapsed().as_secs_f64());
            checkpoints.push((sent_so_far, rss));
        }
    }
    let is_answer = |m: &SentMessage| m.text.starts_with("echo: w");
    let answers = fake.count_sent(is_answer);
    assert!(answers >= messages, "{answers} of {messages} messages answered:\n{}", gateway.log());
    let elapsed = started.elapsed();
    let (after_rss, after_hwm) = gateway.process.memory_kb();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (idle_rss, idle_hwm) = gateway.process.memory_kb();
    let scraped = scrape(admin_port, "hermes_process_resident_memory_bytes").await;

    let sessions = scrape(admin_port, "hermes_sessions_active").await;
    println!("{messages} messages from {user_count} users (DMs and {GROUPS} groups), answered in {:.1} s", elapsed.as_secs_f64());
    println!("\n| messages | VmRSS (MB) |\n|---:|---:|");
    for (n, rss) in &checkpoints {
        println!("| {n} | {:.1} |", mb(*rss));
    }
    let tail = if messages >= 2 * TAIL { TAIL } else { messages / 2 };
    let tail_growth = rss_at(&checkpoints, messages).zip(rss_at(&checkpoints, messages - tail)).map(|(end, from)| mb(end) - mb(from));
    if let Some(growth) = tail_growth {
        let met = growth < TAIL_GROWTH_GOAL_MB;
        println!("\ngrowth over the last {tail} messages: {growth:+.1} MB ({})", support::verdict(met, "< 2 MB"));
    }
    if let Some(n) = sessions {
        println!("live session actors at the end (hermes_sessions_active): {n}");
    }
    println!("right after the last answer: VmRSS {:.1} MB, VmHWM {:.1} MB", mb(after_rss), mb(after_hwm));
    println!("after 5 s idle: VmRSS {:.1} MB, VmHWM {:.1} MB", mb(idle_rss), mb(idle_hwm));
    if let Some(bytes) = scraped {
        println!("/metrics hermes_process_resident_memory_bytes: {:.1} MB", bytes / (1024.0 * 1024.0));
    }
    println!("\n| measure | value |\n|---|---|");
    println!("| VmRSS at start | {:.1} MB |", mb(start_rss));
    println!("| VmRSS after {messages} messages | {:.1} MB |", mb(after_rss));
    println!("| VmRSS after 5 s idle | {:.1} MB |", mb(idle_rss));
    println!("| growth (idle after − start) | {:+.1} MB |", mb(idle_rss) - mb(start_rss));
    println!("| VmHWM (peak) | {:.1} MB |", mb(idle_hwm));
    println!("| time for {messages} messages | {:.0} ms |", ms(elapsed));
    gateway.stop();
    llm.shutdown();
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// The RSS recorded after exactly `n` messages.
fn rss_at(checkpoints: &[(usize, u64)], n: usize) -> Option<u64> {
    checkpoints.iter().find(|(at, _)| *at == n).map(|(_, rss)| *rss)
}

/// One unlabelled gauge of the gateway's `/metrics` (its own reading of its memory, its actors).
async fn scrape(admin_port: u16, gauge: &str) -> Option<f64> {
    let text = reqwest::get(format!("http://127.0.0.1:{admin_port}/metrics")).await.ok()?.text().await.ok()?;
    text.lines().find_map(|l| l.strip_prefix(gauge)?.strip_prefix(' ')).and_then(|v| v.trim().parse().ok())
}

/// `hermes gateway run` with Telegram only; killed on drop.
struct Gateway {
    process: Process,
    home: tempfile::TempDir,
}

impl Gateway {
    fn spawn(binary: &Path, llm_base_url: &str, fake: &FakeTelegram, admin_port: u16, users: i64) -> Gateway {
        let home = tempfile::tempdir().expect("temp dir");
        // The fake does not throttle: the gateway's own send budget is off, to load the gateway
        // rather than wait on the budget.
        std::fs::write(
            home.path().join("config.yaml"),
            format!(
                "platforms:\n  telegram:\n    send_budget: {{global_per_second: 0, per_chat_per_second: 0, group_per_minute: 0}}\ndisplay:\n  busy_input_mode: queue\ngateway:\n  admin_port: {admin_port}\n"
            ),
        )
        .expect("config");
        let allowed: Vec<String> = (0..users).map(|n| (FIRST_USER + n).to_string()).collect();
        let child = Command::new(binary)
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
            .stderr(std::fs::File::create(home.path().join("gateway.log")).map(Stdio::from).unwrap_or(Stdio::null()))
            .spawn()
            .expect("spawn hermes");
        Gateway { process: Process::new(child, Instant::now()), home }
    }

    fn stop(self) {
        self.process.stop();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("gateway.log")).unwrap_or_default()
    }
}
