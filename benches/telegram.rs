//! Telegram benchmark, through the fake Bot API with an instant scripted LLM, on the release
//! binary:
//!
//! - spawn → first `getUpdates` (the time until the bot can receive anything);
//! - idle RSS with Telegram as the only platform (and how much of `link/hot-code.order`, which
//!   keeps it low, still matches this binary);
//! - reply latency: a DM injected into the fake → the bot's `sendMessage` arriving there,
//!   sequentially (includes the long poll waking, the inbox write, the turn, the outbox);
//! - bursts: 20 users × 10 messages injected at once → all 200 answered; answered messages/s,
//!   the median of five rounds with fresh users;
//! - pacing, against the fake enforcing Telegram's published flood limits with 429s (30/s
//!   overall, 1/s per chat with short bursts, 20/min per group) and the gateway's default send
//!   budget: a 200-message burst to 20 chats (throughput and 429s), and the delay pacing adds to
//!   a three-part answer and to replies to messages sent 1 s apart (against the same on the
//!   unpaced gateway above);
//! - with Discord enabled as well (fake Discord, serenity): idle RSS with both platforms and
//!   Discord's reply latency (a DM dispatched on the gateway WebSocket → the bot's message
//!   create arriving at the fake);
//! - with Slack enabled too (fake Slack, slack-morphism's Web API and our Socket Mode loop): idle
//!   RSS with the three chat platforms and Slack's reply latency (an envelope on the socket →
//!   the bot's `chat.postMessage` arriving at the fake).
//!
//! Run with `cargo bench --bench telegram`. It prints numbers and whether each target is met; it
//! asserts nothing (timings depend on the machine).
//!
//! `scripts/order-hot-code.py` runs it (in the dev profile) to profile the gateway answering:
//! `HERMES_BENCH_WRAPPER` is a command the gateway runs under (e.g. `valgrind --tool=callgrind …`),
//! and `HERMES_BENCH_STOP_AFTER_IDLE=1` ends the run once the Telegram-only gateway has gone idle.
//! `HERMES_BENCH_BINARY` runs another `hermes` binary than the one cargo built for the benchmark:
//! the script profiles a copy of `cargo build --release`'s, the binary users run, whose symbol
//! names differ from the benchmark build's (dev-dependencies unify other features into shared
//! crates, which changes their hashes).

#[path = "support.rs"]
mod support;

use hermes_fakes::discord::FakeDiscord;
use hermes_fakes::slack::FakeSlack;
use hermes_fakes::telegram::{FakeTelegram, SentMessage};
use hermes_fakes::{FakeLlm, LlmConfig};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Process, ms, percentile, verdict};

const SPAWN_RUNS: usize = 10;
const WARMUP: usize = 30;
const MESSAGES: usize = 300;
const BURST_USERS: u32 = 20;
const BURST_PER_USER: u32 = 10;
const BURST_ROUNDS: usize = 5;
const DISCORD_MESSAGES: usize = 200;
/// The paced burst's users are the 20 ids after this one.
const PACED_FIRST_USER: i64 = 5000;
/// Whose message is answered in three parts (one per gateway run).
const LONG_ANSWER_USER: [i64; 2] = [5100, 5101];
/// Who writes once a second (one per gateway run).
const CONVERSATION_USER: [i64; 2] = [5200, 5201];
const CONVERSATION_REPLIES: usize = 10;

/// Whether the gateway keeps Telegram's send budget (its defaults) or none.
#[derive(Clone, Copy, PartialEq)]
enum Budget {
    Off,
    Default,
}
const SLACK_MESSAGES: usize = 200;

/// The burst users of one round: 20 ids after this one, distinct per round.
fn burst_first_user_id(round: usize) -> i64 {
    2000 + 100 * i64::try_from(round).expect("a handful of rounds")
}

/// How much of `link/hot-code.order` names functions of this binary. The names carry hashes of
/// each crate's build, so a dependency or toolchain change makes part of the file stale; idle RSS
/// then creeps back up (6.4 → ~10 MB when our crates' names stopped matching).
fn hot_code_order_match(binary: &Path) -> String {
    let order = Path::new(env!("CARGO_MANIFEST_DIR")).join("link/hot-code.order");
    let Ok(listed) = std::fs::read_to_string(&order) else { return "hot-code order: no link/hot-code.order".into() };
    let Ok(nm) = Command::new("nm").arg("--defined-only").arg(binary).output() else {
        return "hot-code order: `nm` is not installed; cannot check it against the binary".into();
    };
    let defined: std::collections::HashSet<&str> =
        std::str::from_utf8(&nm.stdout).unwrap_or_default().lines().filter_map(|line| line.split_whitespace().nth(2)).collect();
    let names: Vec<&str> = listed.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let found = names.iter().filter(|n| defined.contains(*n)).count();
    format!(
        "hot-code order: {found} of {} listed functions are in this binary{}",
        names.len(),
        if found * 10 < names.len() * 9 { " — stale; regenerate with `python3 scripts/order-hot-code.py`" } else { "" }
    )
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let chosen = std::env::var_os("HERMES_BENCH_BINARY").map(PathBuf::from);
    let binary = chosen.as_deref().unwrap_or(Path::new(env!("CARGO_BIN_EXE_hermes")));
    println!("binary: {}", binary.display());
    let llm = FakeLlm::start_with(LlmConfig { record: false, ..LlmConfig::default() }).await.expect("fake LLM");
    let mut rows: Vec<(String, String, String)> = Vec::new();

    let mut to_first_poll = Vec::new();
    for _ in 0..SPAWN_RUNS {
        let fake = FakeTelegram::start().await.expect("fake Telegram");
        let gateway = Gateway::spawn(binary, &llm.base_url(), &fake, None, None, Budget::Off);
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
    let gateway = Gateway::spawn(binary, &llm.base_url(), &fake, None, None, Budget::Off);
    fake.wait_until(Duration::from_secs(20), |f| f.first_call_at("getUpdates").is_some()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss, hwm) = gateway.memory_kb();
    let rss_mb = rss as f64 / 1024.0;
    println!("idle memory, Telegram only: VmRSS {rss_mb:.1} MB, VmHWM {:.1} MB", hwm as f64 / 1024.0);
    rows.push(("idle RSS, Telegram only".into(), format!("{rss_mb:.1} MB"), verdict(rss_mb <= 12.0, "≤ 12 MB")));
    println!("{}", hot_code_order_match(binary));
    if std::env::var_os("HERMES_BENCH_STOP_AFTER_IDLE").is_some() {
        gateway.stop();
        llm.shutdown();
        return;
    }

    // Sequential round trips: one user, one message at a time.
    let user = fake.user(1001, "bench");
    let mut latencies = Vec::with_capacity(MESSAGES);
    for i in 0..WARMUP + MESSAGES {
        // Waiting for this ping's own echo: "any new message" could be a notice or the previous
        // answer arriving late.
        let echo = format!("echo: ping {i}");
        let injected_at = Instant::now();
        fake.dm(&user, &format!("ping {i}"));
        let answered = fake.wait_until(Duration::from_secs(10), |f| f.count_sent(|m| m.text == echo) > 0).await;
        assert!(answered, "message {i} was not answered:\n{}", gateway.log());
        let sent_at = fake.last_sent_at(|m| m.text == echo).expect("answered");
        if i >= WARMUP {
            latencies.push(sent_at.duration_since(injected_at));
        }
    }
    let others: Vec<String> = fake.sent().into_iter().map(|m| m.text).filter(|t| !t.starts_with("echo: ping ")).collect();
    if !others.is_empty() {
        println!("besides the echoes, the bot sent {} messages, e.g. {:?}", others.len(), others[0]);
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

    // Bursts: every user sends all their messages at once. One burst lasts ~0.1 s, so a single
    // one is at the mercy of the scheduler; several rounds, each with fresh users, give a median.
    let mut rates = Vec::with_capacity(BURST_ROUNDS);
    for round in 0..BURST_ROUNDS {
        let tag = format!("echo: burst r{round} ");
        let first_id = burst_first_user_id(round);
        let users: Vec<_> = (1..=BURST_USERS).map(|n| fake.user(first_id + i64::from(n), &format!("burst{round}_{n}"))).collect();
        // Waiting counts in place: copying the fake's log on every wake-up would take the
        // fake's lock and a core away from the gateway being measured.
        let is_answer = |m: &SentMessage| m.text.starts_with(&tag[..]);
        let total = (BURST_USERS * BURST_PER_USER) as usize;
        let started = Instant::now();
        for k in 1..=BURST_PER_USER {
            for (n, u) in users.iter().enumerate() {
                fake.dm(u, &format!("burst r{round} u{n} m{k}"));
            }
        }
        let done = fake.wait_until(Duration::from_secs(60), |f| f.count_sent(is_answer) >= total).await;
        let answered = fake.count_sent(is_answer);
        assert!(done, "burst {round} was not answered in full ({answered} of {total}):\n{}", gateway.log());
        let last_at = fake.last_sent_at(is_answer).expect("answered");
        let elapsed = last_at.duration_since(started);
        let rate = answered as f64 / elapsed.as_secs_f64();
        println!(
            "burst {round}: {BURST_USERS} users × {BURST_PER_USER}: {answered}/{total} answered in {:.1} ms → {rate:.0} answered messages/s",
            ms(elapsed)
        );
        assert_eq!(answered, total, "burst {round}: {answered} answers to {total} messages");
        rates.push(rate);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "burst throughput over {BURST_ROUNDS} rounds: min {:.0}, median {median:.0}, max {:.0} answered messages/s",
        rates[0],
        rates[rates.len() - 1]
    );
    rows.push(("bursts 20 × 10 answered".into(), format!("{BURST_ROUNDS} × 200/200"), "all".into()));
    rows.push((
        "burst throughput median (min)".into(),
        format!("{median:.0} ({:.0}) msg/s", rates[0]),
        verdict(median >= 1500.0, "≥ 1,500 msg/s"),
    ));
    let (rss_after, hwm_after) = gateway.memory_kb();
    println!("memory after the load: VmRSS {:.1} MB, VmHWM {:.1} MB", rss_after as f64 / 1024.0, hwm_after as f64 / 1024.0);
    rows.push(("RSS after load".into(), format!("{:.1} MB", rss_after as f64 / 1024.0), "—".into()));
    let unpaced_long = long_answer(&fake, LONG_ANSWER_USER[0], &gateway).await;
    let unpaced_conversation = conversation(&fake, CONVERSATION_USER[0], &gateway).await;
    gateway.stop();

    paced(binary, &llm, &mut rows, unpaced_long, unpaced_conversation).await;

    // Both platforms.
    let fake = FakeTelegram::start().await.expect("fake Telegram");
    let discord = FakeDiscord::start().await.expect("fake Discord");
    let gateway = Gateway::spawn(binary, &llm.base_url(), &fake, Some(&discord), None, Budget::Off);
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
        let echo = format!("echo: ping {i}");
        let injected_at = Instant::now();
        discord.dm(&user, &format!("ping {i}"));
        let answered = discord.wait_until(Duration::from_secs(10), |f| f.last_sent_at(|m| m.content == echo).is_some()).await;
        assert!(answered, "Discord message {i} was not answered:\n{}", gateway.log());
        let sent_at = discord.last_sent_at(|m| m.content == echo).expect("answered");
        if i >= WARMUP {
            latencies.push(sent_at.duration_since(injected_at));
        }
    }
    latencies.sort();
    let (l50, l95) = (ms(percentile(&latencies, 50.0)), ms(percentile(&latencies, 95.0)));
    println!("Discord reply latency ({DISCORD_MESSAGES} sequential): p50 {l50:.2} ms, p95 {l95:.2} ms");
    rows.push(("Discord reply latency p50 / p95".into(), format!("{l50:.2} / {l95:.2} ms"), "—".into()));
    gateway.stop();

    // The three chat platforms.
    let fake = FakeTelegram::start().await.expect("fake Telegram");
    let discord = FakeDiscord::start().await.expect("fake Discord");
    let slack = FakeSlack::start().await.expect("fake Slack");
    let gateway = Gateway::spawn(binary, &llm.base_url(), &fake, Some(&discord), Some(&slack), Budget::Off);
    fake.wait_until(Duration::from_secs(20), |f| f.first_call_at("getUpdates").is_some()).await;
    assert!(discord.wait_connected(Duration::from_secs(20)).await, "the gateway never connected to Discord:\n{}", gateway.log());
    assert!(slack.wait_connected(Duration::from_secs(20)).await, "the gateway never connected to Slack:\n{}", gateway.log());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss, hwm) = gateway.memory_kb();
    let rss_mb = rss as f64 / 1024.0;
    println!("idle memory, Telegram + Discord + Slack: VmRSS {rss_mb:.1} MB, VmHWM {:.1} MB", hwm as f64 / 1024.0);
    rows.push(("idle RSS, Telegram + Discord + Slack".into(), format!("{rss_mb:.1} MB"), "—".into()));
    let user = slack.user("U0BENCH", "bench");
    let mut latencies = Vec::with_capacity(SLACK_MESSAGES);
    for i in 0..WARMUP + SLACK_MESSAGES {
        let echo = format!("echo: ping {i}");
        let injected_at = Instant::now();
        let channel = slack.dm(&user, &format!("ping {i}")).channel;
        let answered = slack.wait_until(Duration::from_secs(10), |f| f.sent_to(&channel).iter().any(|m| m.text == echo)).await;
        assert!(answered, "Slack message {i} was not answered:\n{}", gateway.log());
        let sent_at = slack.sent_to(&channel).into_iter().find(|m| m.text == echo).map(|m| m.at).expect("answered");
        if i >= WARMUP {
            latencies.push(sent_at.duration_since(injected_at));
        }
    }
    latencies.sort();
    let (l50, l95) = (ms(percentile(&latencies, 50.0)), ms(percentile(&latencies, 95.0)));
    println!("Slack reply latency ({SLACK_MESSAGES} sequential): p50 {l50:.2} ms, p95 {l95:.2} ms");
    rows.push(("Slack reply latency p50 / p95".into(), format!("{l50:.2} / {l95:.2} ms"), "—".into()));
    gateway.stop();
    llm.shutdown();

    println!("\n| measure | value | target |\n|---|---|---|");
    for (what, value, target) in rows {
        println!("| {what} | {value} | {target} |");
    }
}

/// The paced gateway against the fake enforcing Telegram's published limits: the 200-message
/// burst, then the same three-part answer and conversation as on the unpaced gateway.
async fn paced(
    binary: &Path,
    llm: &FakeLlm,
    rows: &mut Vec<(String, String, String)>,
    unpaced_long: Duration,
    unpaced_conversation: Duration,
) {
    let fake = FakeTelegram::start().await.expect("fake Telegram");
    fake.enforce_published_limits();
    let gateway = Gateway::spawn(binary, &llm.base_url(), &fake, None, None, Budget::Default);
    fake.wait_until(Duration::from_secs(20), |f| f.first_call_at("getUpdates").is_some()).await;
    let users: Vec<_> = (1..=BURST_USERS).map(|n| fake.user(PACED_FIRST_USER + i64::from(n), &format!("paced{n}"))).collect();
    let is_answer = |m: &SentMessage| m.text.starts_with("echo: paced ");
    let total = (BURST_USERS * BURST_PER_USER) as usize;
    let started = Instant::now();
    for k in 1..=BURST_PER_USER {
        for (n, u) in users.iter().enumerate() {
            fake.dm(u, &format!("paced u{n} m{k}"));
        }
    }
    let done = fake.wait_until(Duration::from_secs(120), |f| f.count_sent(is_answer) >= total).await;
    let answered = fake.count_sent(is_answer);
    assert!(done, "the paced burst was not answered in full ({answered} of {total}):\n{}", gateway.log());
    let elapsed = fake.last_sent_at(is_answer).expect("answered").duration_since(started);
    let refused = fake.rate_limited_count();
    let rate = answered as f64 / elapsed.as_secs_f64();
    println!(
        "paced burst (published limits enforced): {answered}/{total} to {BURST_USERS} chats in {:.2} s → {rate:.1} msg/s, {refused} refused with 429",
        elapsed.as_secs_f64()
    );
    rows.push(("paced burst 200 msgs / 20 chats".into(), format!("{rate:.1} msg/s, {refused} × 429"), verdict(refused == 0, "0 × 429")));
    // Every bucket full again before the next measures.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let long = long_answer(&fake, LONG_ANSWER_USER[1], &gateway).await;
    let added = ms(long.saturating_sub(unpaced_long));
    println!("three-part answer, first → last part: paced {:.1} ms, unpaced {:.1} ms → {added:.1} ms added", ms(long), ms(unpaced_long));
    rows.push(("3-part answer: delay added by pacing".into(), format!("{added:.1} ms"), verdict(added <= 100.0, "≈ 0 (≤ 100 ms)")));
    let replies = conversation(&fake, CONVERSATION_USER[1], &gateway).await;
    let added = ms(replies.saturating_sub(unpaced_conversation));
    println!(
        "replies to messages 1 s apart, p50 latency: paced {:.2} ms, unpaced {:.2} ms → {added:.2} ms added",
        ms(replies),
        ms(unpaced_conversation)
    );
    rows.push(("1-s-apart replies: delay added by pacing (p50)".into(), format!("{added:.2} ms"), verdict(added <= 10.0, "≈ 0 (≤ 10 ms)")));
    println!("429s during the whole paced run: {}", fake.rate_limited_count());
    gateway.stop();
}

/// A message whose echo takes three Telegram messages; how long from the first part's arrival
/// to the last's.
async fn long_answer(fake: &FakeTelegram, user_id: i64, gateway: &Gateway) -> Duration {
    let user = fake.user(user_id, "long");
    // 9,000 characters of echo: three parts of at most 4,096.
    fake.dm(&user, &"word ".repeat(1800));
    let answered = fake.wait_until(Duration::from_secs(30), |f| f.sent_to(user_id).len() >= 3).await;
    assert!(answered, "the long answer did not come in three parts:\n{}", gateway.log());
    let parts = fake.sent_to(user_id);
    parts[2].at.duration_since(parts[0].at)
}

/// One message a second in one chat; the median time from each message to its answer.
async fn conversation(fake: &FakeTelegram, user_id: i64, gateway: &Gateway) -> Duration {
    let user = fake.user(user_id, "chatty");
    let mut latencies = Vec::with_capacity(CONVERSATION_REPLIES);
    for i in 0..CONVERSATION_REPLIES {
        let next = tokio::time::Instant::now() + Duration::from_secs(1);
        let echo = format!("echo: chat {i}");
        let injected_at = Instant::now();
        fake.dm(&user, &format!("chat {i}"));
        let answered = fake.wait_until(Duration::from_secs(10), |f| f.count_sent(|m| m.text == echo) > 0).await;
        assert!(answered, "conversation message {i} was not answered:\n{}", gateway.log());
        latencies.push(fake.last_sent_at(|m| m.text == echo).expect("answered").duration_since(injected_at));
        tokio::time::sleep_until(next).await;
    }
    latencies.sort();
    percentile(&latencies, 50.0)
}

/// `hermes gateway run` with Telegram (and Discord and Slack when given); killed on drop.
struct Gateway {
    process: Process,
    _home: tempfile::TempDir,
}

impl Gateway {
    fn spawn(
        binary: &Path,
        llm_base_url: &str,
        fake: &FakeTelegram,
        discord: Option<&FakeDiscord>,
        slack: Option<&FakeSlack>,
        budget: Budget,
    ) -> Gateway {
        let home = tempfile::tempdir().expect("temp dir");
        // Unless pacing is what is measured, the fake does not throttle and the gateway's own
        // Telegram send budget is switched off, to measure the gateway rather than the budget.
        let telegram = match budget {
            Budget::Off => "  telegram:\n    send_budget: {global_per_second: 0, per_chat_per_second: 0, group_per_minute: 0}\n",
            Budget::Default => "  telegram: {}\n",
        };
        std::fs::write(home.path().join("config.yaml"), format!("platforms:\n{telegram}display:\n  busy_input_mode: queue\n"))
            .expect("config");
        let burst_users = (0..BURST_ROUNDS).flat_map(|round| {
            let first_id = burst_first_user_id(round);
            (1..=i64::from(BURST_USERS)).map(move |n| first_id + n)
        });
        let paced_users = (1..=i64::from(BURST_USERS)).map(|n| PACED_FIRST_USER + n).chain(LONG_ANSWER_USER).chain(CONVERSATION_USER);
        let allowed: Vec<String> = std::iter::once(1001).chain(burst_users).chain(paced_users).map(|id| id.to_string()).collect();
        let mut command = support::wrapped_command(&support::wrapper(), binary);
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
        if let Some(slack) = slack {
            command
                .env("SLACK_BOT_TOKEN", slack.bot_token())
                .env("SLACK_APP_TOKEN", slack.app_token())
                .env("SLACK_API_BASE_URL", slack.api_url())
                .env("SLACK_ALLOWED_USERS", "U0BENCH");
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
