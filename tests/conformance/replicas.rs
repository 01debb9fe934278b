//! Replicas sharing a real PostgreSQL, as whole processes against the fake Telegram (which
//! enforces its limits): one replica holds the connection and runs its turns, the others stand
//! by for it; a holder killed or frozen mid-traffic is replaced within the lease, and every
//! message is still answered exactly once. Two platforms spread over two replicas, each served
//! where its lease is held, and one takes both over when the other dies.

use crate::outages::read_answer;
use crate::peer::ChatPeer;
use crate::replica_failover::{TTL_SECS, replica};
use crate::support::{Gateway, Setup, eventually, scratch_database};
use crate::telegram::TelegramPeer;
use hermes_fakes::{FakeLlm, Reply};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How many times each answer reached its chat, however it was marked.
fn answer_counts(peer: &TelegramPeer) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for (answer, _, _) in peer.fake.sent().iter().filter_map(|m| read_answer(&m.text)) {
        *counts.entry(answer).or_insert(0) += 1;
    }
    counts
}

/// Waits until every expected answer arrived; then none may have arrived twice.
async fn every_answer_once(peer: &TelegramPeer, expected: &[String], logs: &str) {
    let all = eventually(Duration::from_secs(240), || {
        let counts = answer_counts(peer);
        expected.iter().all(|a| counts.contains_key(a))
    })
    .await;
    let counts = answer_counts(peer);
    let missing: Vec<&String> = expected.iter().filter(|a| !counts.contains_key(*a)).collect();
    assert!(all, "{} answers lost: {:?}…\n{logs}", missing.len(), missing.iter().take(10).collect::<Vec<_>>());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let doubled: Vec<(String, usize)> = answer_counts(peer).into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(doubled.is_empty(), "delivered twice: {doubled:?}");
    assert_eq!(answer_counts(peer).len(), expected.len(), "every answer exactly once");
    assert_eq!(peer.fake.pending_updates(), 0, "every update was confirmed to Telegram");
}

/// The events whose answer the shared history holds more than once (a woken replica appending
/// what the new holder stored too).
async fn answers_stored_twice(url: &str) -> Vec<(String, i64)> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("the test PostgreSQL answers");
    let driver = tokio::spawn(connection);
    let rows = client
        .query("SELECT event_id, count(*) FROM messages WHERE role = 'assistant' GROUP BY event_id HAVING count(*) > 1", &[])
        .await
        .expect("the history reads");
    drop(client);
    let _ = driver.await;
    rows.iter().map(|row| (row.get::<_, Option<String>>(0).unwrap_or_default(), row.get(1))).collect()
}

/// Whichever of `standbys` answers the API server's `/health` first (it takes the API server over
/// with the connection: the first replica held both), and how long it took.
async fn new_holder(standbys: &mut [(Setup, Gateway)], since: Instant) -> (usize, Duration) {
    let client = reqwest::Client::new();
    loop {
        for (i, (setup, _)) in standbys.iter().enumerate() {
            if client.get(setup.api("/health")).send().await.is_ok_and(|r| r.status().is_success()) {
                return (i, since.elapsed());
            }
        }
        assert!(since.elapsed() < Duration::from_secs(30), "no standby took over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_300_messages_the_holder_killed_mid_way_every_message_answered_once() {
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Echo);
    let peer = TelegramPeer::start().await;
    let url = scratch_database().await;
    let first = replica(&llm, &peer, &url, "replica-a");
    let mut holder = first.start().await;
    let mut standbys: Vec<(Setup, Gateway)> = ["replica-b", "replica-c"]
        .into_iter()
        .map(|name| {
            let setup = replica(&llm, &peer, &url, name);
            let gateway = setup.spawn();
            (setup, gateway)
        })
        .collect();

    let (users, per_user) = (30u32, 10u32);
    let mut expected = Vec::new();
    let mut killed = None;
    for k in 1..=per_user {
        for user in 1..=users {
            peer.dm(user, &format!("u{user}-m{k}")).await;
            expected.push(format!("echo: u{user}-m{k}"));
        }
        if k == per_user / 2 {
            assert!(!holder.signal(libc::SIGKILL).await.success());
            killed = Some(Instant::now());
        }
    }
    let (which, took) = new_holder(&mut standbys, killed.expect("killed mid-way")).await;
    assert!(took < Duration::from_secs(TTL_SECS + 5), "a standby took over within the {TTL_SECS} s lease (and its start): {took:?}");
    let logs = standbys[which].1.log_text();
    every_answer_once(&peer, &expected, &logs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_frozen_for_twice_the_lease_wakes_up_sends_nothing_and_steps_down() {
    let llm = FakeLlm::start().await;
    // Slow answers: the holder is frozen with turns under way.
    llm.set_default(Reply::Delay(Duration::from_millis(800), Box::new(Reply::Echo)));
    let peer = TelegramPeer::start().await;
    let url = scratch_database().await;
    let first = replica(&llm, &peer, &url, "replica-a");
    let mut holder = first.start().await;
    let second = replica(&llm, &peer, &url, "replica-b");
    let mut standby = second.spawn();

    let mut expected = Vec::new();
    for user in 1..=10 {
        peer.dm(user, &format!("before-{user}")).await;
        expected.push(format!("echo: before-{user}"));
    }
    // Frozen with the model's answers on their way: on waking, its turns have answers to store.
    assert!(eventually(Duration::from_secs(20), || llm.request_count() >= 10).await, "{}", holder.log_text());
    let pid = holder.pid().expect("the holder runs") as libc::pid_t;
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let frozen = Instant::now();
    for user in 1..=10 {
        peer.dm(user, &format!("during-{user}")).await;
        expected.push(format!("echo: during-{user}"));
    }
    standby.wait_healthy(&second.api(""), Duration::from_secs(20)).await;
    let took = frozen.elapsed();
    tokio::time::sleep(Duration::from_secs(2 * TTL_SECS).saturating_sub(took)).await;
    let sent_before_waking = peer.fake.sent().len();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let exit = holder.wait_exit().await;
    assert_eq!(exit.code(), Some(75), "the woken replica steps down to come back as a new replica:\n{}", holder.log_text());
    assert!(holder.log_text().contains("lost a platform's lease"), "{}", holder.log_text());
    every_answer_once(&peer, &expected, &standby.log_text()).await;
    assert!(peer.fake.sent().len() >= sent_before_waking);
    assert_eq!(answers_stored_twice(&url).await, Vec::new(), "the woken replica appended no answer the new holder stored too");
}

/// Which replica holds each live lease, by lease name (none before a replica made the table).
pub(crate) async fn holders(url: &str) -> HashMap<String, String> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("the test PostgreSQL answers");
    let driver = tokio::spawn(connection);
    let rows = client
        .query("SELECT name, holder FROM leases WHERE expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint", &[])
        .await
        .unwrap_or_default();
    drop(client);
    let _ = driver.await;
    rows.iter().map(|row| (row.get(0), row.get(1))).collect()
}

/// Waits until the live leases satisfy `done`; the last ones seen.
pub(crate) async fn leases_until(url: &str, timeout: Duration, done: impl Fn(&HashMap<String, String>) -> bool) -> HashMap<String, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let now = holders(url).await;
        if done(&now) || Instant::now() > deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One chat completion through `setup`'s API server: the status, and the answer when 200.
async fn ask_api(setup: &Setup, text: &str) -> Result<String, String> {
    let response = reqwest::Client::new()
        .post(setup.api("/v1/chat/completions"))
        .bearer_auth(crate::support::API_KEY)
        .header("X-Hermes-Session-Id", "conv-spread")
        .json(&serde_json::json!({"model": "hermes-agent", "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .map_err(|e| format!("unreachable: {e}"))?;
    let status = response.status();
    let body: serde_json::Value = response.json().await.map_err(|e| format!("{status}: {e}"))?;
    match body["choices"][0]["message"]["content"].as_str() {
        Some(answer) if status.is_success() => Ok(answer.to_string()),
        _ => Err(format!("{status}: {body}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_platforms_spread_over_two_replicas_each_served_where_its_lease_is_and_the_survivor_takes_both() {
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Echo);
    let peer = TelegramPeer::start().await;
    let url = scratch_database().await;
    let setups = [replica(&llm, &peer, &url, "replica-a"), replica(&llm, &peer, &url, "replica-b")];
    // Started together, as a deployment starts them: a replica holding a lease waits before it
    // takes another, so the other replica takes it.
    let mut gateways: Vec<Gateway> = setups.iter().map(Setup::spawn).collect();
    let both_held = |leases: &HashMap<String, String>| leases.len() == 2;
    let leases = leases_until(&url, Duration::from_secs(30), both_held).await;
    let logs = |gateways: &[Gateway]| gateways.iter().map(Gateway::log_text).collect::<Vec<_>>().join("\n----\n");
    assert!(both_held(&leases), "both platforms leased: {leases:?}\n{}", logs(&gateways));
    let api_holder = leases.get("platform:api_server").cloned().unwrap_or_default();
    let telegram_holder = leases.iter().find(|(name, _)| name.starts_with("connection:")).map(|(_, h)| h.clone()).unwrap_or_default();
    assert_ne!(api_holder, telegram_holder, "the two platforms spread over the two replicas: {leases:?}");
    let api = usize::from(api_holder == "replica-b");
    let other = 1 - api;

    // Each platform is served where its lease is: the API server answers on its holder only...
    gateways[api].wait_healthy(&setups[api].api(""), Duration::from_secs(20)).await;
    assert_eq!(ask_api(&setups[api], "hello over the API").await, Ok("echo: hello over the API".to_string()));
    assert!(ask_api(&setups[other], "anyone?").await.is_err_and(|e| e.starts_with("unreachable")), "one API server at a time");
    // ...and Telegram's turns run on its holder, each answered once.
    let mut expected = Vec::new();
    for user in 1..=5 {
        peer.dm(user, &format!("spread-{user}")).await;
        expected.push(format!("echo: spread-{user}"));
    }
    every_answer_once(&peer, &expected, &logs(&gateways)).await;

    // The API server's holder dies: the survivor takes it over within the lease and serves both.
    assert!(!gateways[api].signal(libc::SIGKILL).await.success());
    let killed = Instant::now();
    gateways[other].wait_healthy(&setups[other].api(""), Duration::from_secs(20)).await;
    let took = killed.elapsed();
    assert!(took < Duration::from_secs(TTL_SECS + 5), "taken over within the {TTL_SECS} s lease: {took:?}");
    let survivor = if other == 0 { "replica-a" } else { "replica-b" };
    let leases = leases_until(&url, Duration::from_secs(10), |l| l.values().all(|h| h == survivor) && l.len() == 2).await;
    assert!(leases.values().all(|h| h == survivor), "{leases:?}");
    let history = ask_api(&setups[other], "still there?").await;
    assert_eq!(history, Ok("echo: still there?".to_string()));
    for user in 1..=5 {
        peer.dm(user, &format!("after-{user}")).await;
        expected.push(format!("echo: after-{user}"));
    }
    every_answer_once(&peer, &expected, &gateways[other].log_text()).await;
    println!("spread: api_server on {api_holder}, telegram on {telegram_holder}; taken over in {took:?}");
}
