//! Replicas sharing a real PostgreSQL, as whole processes against the fake Telegram (which
//! enforces its limits): one replica holds the connection and runs its turns, the others stand
//! by for it; a holder killed or frozen mid-traffic is replaced within the lease, and every
//! message is still answered exactly once. Two platforms (Telegram and the webhook routes) spread
//! over two replicas, each served where its lease is held; one takes both over when the other
//! dies, and hands one back when it returns, every message through it answered once.

use crate::outages::read_answer;
use crate::peer::ChatPeer;
use crate::replica_failover::{TTL_SECS, replica};
use crate::replica_ingress::{ROUTE_SECRET, answer, body, deliver};
use crate::replica_telegram_webhook::every_answer_once_or_marked;
use crate::support::{Gateway, Setup, eventually, scratch_database, unfenced};
use crate::telegram::TelegramPeer;
use hermes_fakes::{FakeLlm, Receiver, Reply};
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

/// Which replica holds the Telegram connection's lease once it is no longer `old`, and how long
/// after `since` that was seen.
async fn new_holder(url: &str, old: &str, since: Instant) -> (String, Duration) {
    let taken = |leases: &HashMap<String, String>| telegram_holder(leases).is_some_and(|holder| holder != old);
    let leases = leases_until(url, Duration::from_secs(30), taken).await;
    let holder = telegram_holder(&leases).filter(|holder| holder != old);
    (holder.unwrap_or_else(|| panic!("no standby took the connection over: {leases:?}")), since.elapsed())
}

/// Start `setup` (named `replica-a`) and wait until it holds the Telegram connection: the API
/// server answering says nothing of it, every replica runs that.
async fn start_holding(setup: &Setup, url: &str) -> Gateway {
    let gateway = setup.start().await;
    let held = |leases: &HashMap<String, String>| telegram_holder(leases).as_deref() == Some("replica-a");
    let leases = leases_until(url, Duration::from_secs(30), held).await;
    assert!(held(&leases), "the first replica holds the connection: {leases:?}\n{}", gateway.log_text());
    gateway
}

/// The holder of the Telegram connection's lease, among `leases`.
fn telegram_holder(leases: &HashMap<String, String>) -> Option<String> {
    leases.iter().find(|(name, _)| name.starts_with("connection:")).map(|(_, holder)| holder.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_300_messages_the_holder_killed_mid_way_every_message_answered_once() {
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Echo);
    let peer = TelegramPeer::start().await;
    let url = scratch_database().await;
    let first = replica(&llm, &peer, &url, "replica-a");
    let mut holder = start_holding(&first, &url).await;
    let standbys: Vec<(Setup, Gateway)> = ["replica-b", "replica-c"]
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
    let (which, took) = new_holder(&url, "replica-a", killed.expect("killed mid-way")).await;
    assert!(took < Duration::from_secs(TTL_SECS + 5), "a standby took over within the {TTL_SECS} s lease: {took:?}");
    let logs = standbys.iter().map(|(_, g)| g.log_text()).collect::<Vec<_>>().join("\n----\n");
    // A send the kill cut off cannot be looked up on Telegram: it may come once more, marked.
    let resent = every_answer_once_or_marked(&peer, &expected, &format!("new holder {which}:\n{logs}")).await;
    println!("300 messages, holder killed: taken over by {which} in {took:?}; resent marked: {resent:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_frozen_for_twice_the_lease_wakes_up_sends_nothing_and_steps_down() {
    let llm = FakeLlm::start().await;
    // Slow answers: the holder is frozen with turns under way.
    llm.set_default(Reply::Delay(Duration::from_millis(800), Box::new(Reply::Echo)));
    let peer = TelegramPeer::start().await;
    let url = scratch_database().await;
    let first = replica(&llm, &peer, &url, "replica-a");
    let mut holder = start_holding(&first, &url).await;
    let second = replica(&llm, &peer, &url, "replica-b");
    let standby = second.spawn();

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
    let (taken_by, took) = new_holder(&url, "replica-a", frozen).await;
    assert_eq!(taken_by, "replica-b", "{}", standby.log_text());
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

/// A replica serving Telegram (`peer`) and the webhook route `deploy` (answering to `receiver`).
fn spread_replica(llm: &FakeLlm, peer: &TelegramPeer, receiver: &Receiver, url: &str, name: &str) -> Setup {
    let mut setup = Setup::new(&llm.base_url());
    setup.set("DATABASE_URL", url);
    let telegram = peer.configure(&mut setup);
    setup.write_config(&format!(
        "platforms:\n{telegram}  webhook:\n    rate_limit_per_minute: 0\n    routes:\n      deploy:\n        secret: {ROUTE_SECRET}\n        prompt: \"Deploy of {{service.name}} finished: {{status}}\"\n        deliver: {}\nstore:\n  lease_ttl_seconds: {TTL_SECS}\n  replica: {name}\n",
        receiver.url("/answers")
    ));
    setup
}

/// How many times `text` reached the webhook route's callback.
fn delivered(receiver: &Receiver, text: &str) -> usize {
    receiver.received().iter().filter(|r| unfenced(r.body["text"].as_str().unwrap_or_default()) == text).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_platforms_spread_over_two_replicas_the_survivor_takes_both_and_hands_one_back_when_the_other_returns() {
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Echo);
    let peer = TelegramPeer::start().await;
    let receiver = Receiver::start().await;
    let url = scratch_database().await;
    let setups = [spread_replica(&llm, &peer, &receiver, &url, "replica-a"), spread_replica(&llm, &peer, &receiver, &url, "replica-b")];
    // Started together, as a deployment starts them: a replica holding a lease waits before it
    // takes another, so the other replica takes it.
    let mut gateways: Vec<Gateway> = setups.iter().map(Setup::spawn).collect();
    let both_held = |leases: &HashMap<String, String>| leases.contains_key("platform:webhook") && telegram_holder(leases).is_some();
    let leases = leases_until(&url, Duration::from_secs(30), both_held).await;
    let logs = |gateways: &[Gateway]| gateways.iter().map(Gateway::log_text).collect::<Vec<_>>().join("\n----\n");
    assert!(both_held(&leases), "both platforms leased: {leases:?}\n{}", logs(&gateways));
    let webhook_holder = leases.get("platform:webhook").cloned().unwrap_or_default();
    let telegram = telegram_holder(&leases).unwrap_or_default();
    assert_ne!(webhook_holder, telegram, "the two platforms spread over the two replicas: {leases:?}");
    let webhook = usize::from(webhook_holder == "replica-b");
    let other = 1 - webhook;

    // A delivery to the replica not serving the webhook routes is run by the one that does...
    let client = reqwest::Client::new();
    let up = eventually(Duration::from_secs(30), || std::net::TcpStream::connect(("127.0.0.1", setups[other].webhook_port)).is_ok()).await;
    assert!(up, "{}", logs(&gateways));
    let (status, json) = deliver(&client, &setups[other].webhook(""), &body(1)).await;
    assert_eq!(status, 202, "{json}");
    assert!(eventually(Duration::from_secs(30), || delivered(&receiver, &answer(1)) == 1).await, "{}", logs(&gateways));
    // ...and Telegram's turns run on its holder, each answered once.
    let mut expected = Vec::new();
    for user in 1..=5 {
        peer.dm(user, &format!("spread-{user}")).await;
        expected.push(format!("echo: spread-{user}"));
    }
    every_answer_once(&peer, &expected, &logs(&gateways)).await;

    // The webhook routes' holder dies: the survivor takes them over within the lease and serves both.
    assert!(!gateways[webhook].signal(libc::SIGKILL).await.success());
    let killed = Instant::now();
    let survivor = if other == 0 { "replica-a" } else { "replica-b" };
    let leases = leases_until(&url, Duration::from_secs(30), |l| l.len() == 2 && l.values().all(|h| h == survivor)).await;
    let took = killed.elapsed();
    assert!(leases.len() == 2 && leases.values().all(|h| h == survivor), "{leases:?}");
    assert!(took < Duration::from_secs(TTL_SECS + 5), "taken over within the {TTL_SECS} s lease: {took:?}");
    let (status, json) = deliver(&client, &setups[other].webhook(""), &body(2)).await;
    assert_eq!(status, 202, "{json}");
    assert!(eventually(Duration::from_secs(30), || delivered(&receiver, &answer(2)) == 1).await, "{}", gateways[other].log_text());
    for user in 1..=5 {
        peer.dm(user, &format!("after-{user}")).await;
        expected.push(format!("echo: after-{user}"));
    }
    every_answer_once(&peer, &expected, &gateways[other].log_text()).await;
    assert_eq!((delivered(&receiver, &answer(1)), delivered(&receiver, &answer(2))), (1, 1), "each delivery answered once");

    // The dead replica comes back while both platforms are busy: the survivor, holding both,
    // hands one over to it once that platform's turns there have finished.
    let returned = if webhook == 0 { "replica-a" } else { "replica-b" };
    gateways[webhook] = setups[webhook].spawn();
    let back = Instant::now();
    let spread = |l: &HashMap<String, String>| l.len() == 2 && l.values().any(|h| h == returned) && l.values().any(|h| h == survivor);
    let mut deliveries = 2;
    let mut sent = 0;
    let leases = loop {
        // Traffic through the hand-over: a message every 300 ms, on one platform then the other.
        sent += 1;
        if sent % 2 == 0 {
            deliveries += 1;
            let (status, json) = deliver(&client, &setups[other].webhook(""), &body(deliveries)).await;
            assert_eq!(status, 202, "{json}");
        } else {
            let user = 1 + sent % 5;
            peer.dm(user, &format!("back-{sent}")).await;
            expected.push(format!("echo: back-{sent}"));
        }
        let leases = holders(&url).await;
        if spread(&leases) || back.elapsed() > Duration::from_secs(60) {
            break leases;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let handed = back.elapsed();
    assert!(spread(&leases), "the returned replica holds one platform, the survivor the other: {leases:?}\n{}", logs(&gateways));
    // Nothing moves back and forth once they are even.
    tokio::time::sleep(Duration::from_secs(3 * TTL_SECS)).await;
    assert_eq!(holders(&url).await, leases, "the leases stay where they are once spread");
    for user in 1..=5 {
        peer.dm(user, &format!("spread-again-{user}")).await;
        expected.push(format!("echo: spread-again-{user}"));
    }
    deliveries += 1;
    let (status, json) = deliver(&client, &setups[webhook].webhook(""), &body(deliveries)).await;
    assert_eq!(status, 202, "{json}");
    every_answer_once(&peer, &expected, &logs(&gateways)).await;
    let all_once = || (1..=deliveries).all(|i| delivered(&receiver, &answer(i)) == 1);
    assert!(eventually(Duration::from_secs(30), all_once).await, "each delivery answered once\n{}", logs(&gateways));
    let moved: Vec<&String> = leases.iter().filter(|(_, holder)| *holder == returned).map(|(name, _)| name).collect();
    println!(
        "spread: webhook on {webhook_holder}, telegram on {telegram}; taken over in {took:?}; {moved:?} handed back in {handed:?}, {sent} messages meanwhile"
    );
}
