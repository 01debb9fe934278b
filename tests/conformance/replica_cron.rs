//! Cron across replicas sharing a real PostgreSQL: three whole processes, one job every minute
//! for five minutes, the first replica (holding Telegram) killed half-way. The job is created and
//! paused by `hermes cron` on the shell (into the shared store), every replica ticks, whichever
//! wins the minute's lock runs the occurrence, and each is run once and delivered once to the
//! Telegram home channel, by whichever replica holds Telegram then.

use crate::peer::ChatPeer;
use crate::support::{Gateway, Setup, eventually, scratch_database};
use crate::telegram::TelegramPeer;
use hermes_fakes::FakeLlm;
use std::time::{Duration, Instant};

const TTL_SECS: u64 = 3;
/// A group the bot is in, made the Telegram home channel.
const HOME_GROUP: i64 = -100_778;
/// Hermes' cron instruction starts every scheduled run's prompt.
const CRON_MARK: &str = "You are running as a scheduled cron job";
const PROMPT: &str = "count the replicas";

fn replica(llm: &FakeLlm, peer: &TelegramPeer, url: &str, name: &str) -> Setup {
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    setup.set("DATABASE_URL", url);
    setup.set("TELEGRAM_HOME_CHANNEL", &HOME_GROUP.to_string());
    let platforms = peer.configure(&mut setup);
    setup.write_config(&format!("platforms:\n{platforms}\nstore:\n  lease_ttl_seconds: {TTL_SECS}\n  replica: {name}\n"));
    setup
}

/// The model, fake Telegram with the home group, and a fresh database for the replicas.
async fn peers() -> (FakeLlm, TelegramPeer, String) {
    let llm = FakeLlm::start().await;
    let peer = TelegramPeer::start().await;
    peer.fake.group(HOME_GROUP, "ops", false);
    (llm, peer, scratch_database().await)
}

fn runs(llm: &FakeLlm) -> usize {
    llm.requests().iter().filter(|r| r.last_user_text().is_some_and(|t| t.contains(CRON_MARK) && t.contains(PROMPT))).count()
}

/// The cron sessions in the shared store: one per occurrence (`cron_<job>_<time>`), and the
/// questions asked in them.
async fn stored_occurrences(url: &str) -> (i64, i64) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("the test PostgreSQL answers");
    let driver = tokio::spawn(connection);
    let sessions: i64 =
        client.query_one("SELECT count(DISTINCT session_key) FROM sessions WHERE platform = 'cron'", &[]).await.unwrap().get(0);
    let questions: i64 = client
        .query_one(
            "SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id WHERE s.platform = 'cron' AND m.role = 'user'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    drop(client);
    let _ = driver.await;
    (sessions, questions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_one_job_every_minute_for_five_minutes_each_occurrence_run_and_delivered_once() {
    let (llm, peer, url) = peers().await;
    let setups: Vec<Setup> = ["replica-a", "replica-b", "replica-c"].iter().map(|name| replica(&llm, &peer, &url, name)).collect();
    let (status, out, err) = setups[1].run(&["cron", "create", "* * * * *", PROMPT, "--name", "replicas", "--deliver", "telegram"]);
    assert!(status.success(), "the shell adds the job to the shared store: {out}{err}");
    let mut first = setups[0].start().await;
    let mut others: Vec<Gateway> = setups[1..].iter().map(Setup::spawn).collect();

    // Half-way, just after an occurrence ran (runs take a moment with the instant model), the
    // first replica is killed: another takes Telegram over, and the ticks go on.
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(150)).await;
    let to_half_minute = 30 - (chrono::Utc::now().timestamp() % 60);
    tokio::time::sleep(Duration::from_secs(to_half_minute.rem_euclid(60) as u64)).await;
    assert!(!first.signal(libc::SIGKILL).await.success());
    tokio::time::sleep(Duration::from_secs(300).saturating_sub(started.elapsed())).await;

    let (status, out, err) = setups[2].run(&["cron", "pause", "replicas"]);
    assert!(status.success(), "{out}{err}");
    // The last occurrence may still be delivering: wait until what ran has reached the chat.
    let delivered = || peer.fake.sent_to(HOME_GROUP).iter().filter(|m| m.text.starts_with("Cronjob Response: replicas")).count();
    let caught_up = eventually(Duration::from_secs(30), || delivered() >= runs(&llm)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let logs: String = others.iter().map(Gateway::log_text).collect::<Vec<_>>().join("\n----\n");
    let ran = runs(&llm);
    assert!(caught_up, "every run delivered: {ran} runs, {} delivered\n{logs}", delivered());
    assert!(ran >= 4, "five minutes hold at least four occurrences; ran {ran}\n{}\n{logs}", first.log_text());
    assert_eq!(delivered(), ran, "each run delivered once");
    assert_eq!(stored_occurrences(&url).await, (ran as i64, ran as i64), "one session and one question per occurrence");
    for other in &mut others {
        other.signal(libc::SIGTERM).await;
    }
}

/// `hermes cron run` on a machine with the shared store and no gateway of its own runs the job
/// there, and leaves the delivery to the replica serving Telegram (woken by the store): the
/// answer arrives once, never also from the shell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_run_beside_the_replicas_is_delivered_once_by_the_replica_serving_the_platform() {
    let (llm, peer, url) = peers().await;
    let replica = replica(&llm, &peer, &url, "replica-a");
    let mut gateway = replica.start().await;
    let shell = self::replica(&llm, &peer, &url, "a-laptop");
    let (status, out, err) = shell.run(&["cron", "create", "every 1h", PROMPT, "--name", "by-hand", "--deliver", "telegram"]);
    assert!(status.success(), "{out}{err}");
    for round in 1..=3 {
        let (status, out, err) = shell.run(&["cron", "run", "by-hand"]);
        assert!(status.success() && out.contains("no gateway is running") && out.contains("it ran"), "{out}{err}");
        let delivered = || peer.fake.sent_to(HOME_GROUP).iter().filter(|m| m.text.starts_with("Cronjob Response: by-hand")).count();
        let arrived = eventually(Duration::from_secs(30), || delivered() >= round).await;
        assert!(arrived, "the replica delivered run {round}:\n{}", gateway.log_text());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(delivered(), round, "each run delivered once");
    }
    gateway.signal(libc::SIGTERM).await;
}
