//! Telegram in webhook mode on every replica: three whole processes on one real PostgreSQL, each
//! with the Telegram webhook listener on its own port, behind a real nginx (round-robin) that the
//! fake Telegram reaches for the bot's public HTTPS address (as DNS and a load balancer
//! terminating TLS would). Every replica takes updates in; the one holding `platform:telegram`
//! runs the turns and sends. The holder is killed mid-way: nginx moves on to the survivors, a
//! standby takes the platform over, and every message is still answered exactly once.

use crate::outages::read_answer;
use crate::peer::ChatPeer;
use crate::replica_ingress::Nginx;
use crate::replicas::leases_until;
use crate::support::{Gateway, Setup, eventually, free_port, not_run, scratch_database};
use crate::telegram::TelegramPeer;
use hermes_fakes::{FakeLlm, Reply};
use std::collections::HashMap;
use std::time::Duration;

/// The bot's public webhook address, as Telegram is told it (HTTPS on 443, as Telegram requires).
const PUBLIC: &str = "https://bot.example.org";
const SECRET: &str = "tg-replica-secret_0123456789";
/// The lease saying where Telegram's turns run (its updates come in on every replica).
const LEASE: &str = "platform:telegram";
/// Users writing, and messages each.
const USERS: u32 = 20;
const ROUNDS: u32 = 4;

/// One replica: its own home and webhook port, the shared database and bot, the webhook mode.
fn replica(llm: &FakeLlm, peer: &TelegramPeer, url: &str, name: &str, port: u16, admin: u16) -> Setup {
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    setup.set("DATABASE_URL", url);
    let platforms = peer.configure(&mut setup);
    setup.write_config(&format!(
        "platforms:\n{platforms}    mode: webhook\n    webhook_url: {PUBLIC}/telegram\n    webhook_host: 127.0.0.1\n    webhook_port: {port}\n    webhook_secret: {SECRET}\n\
         display:\n  busy_input_mode: queue\ngateway:\n  admin_port: {admin}\nstore:\n  lease_ttl_seconds: 3\n  replica: {name}\n"
    ));
    setup
}

/// How many Telegram updates the replica behind `admin` stored itself (`/metrics`).
async fn received(admin: u16) -> u64 {
    let Ok(response) = reqwest::get(format!("http://127.0.0.1:{admin}/metrics")).await else { return 0 };
    let text = response.text().await.unwrap_or_default();
    text.lines()
        .find(|line| line.starts_with("hermes_messages_received_total") && line.contains("platform=\"telegram\""))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|n| n.parse::<f64>().ok())
        .map_or(0, |n| n as u64)
}

/// Waits until every expected answer arrived. None may arrive twice as sent; the only repeat
/// allowed is one marked as such: a send cut off by the kill, which Telegram cannot be asked about
/// (the Bot API has no idempotency key and no history), is resent once by the new holder with
/// the "possible repeat" mark. Returns the answers resent so.
pub(crate) async fn every_answer_once_or_marked(peer: &TelegramPeer, expected: &[String], logs: &str) -> Vec<String> {
    let copies = || {
        let mut copies: HashMap<String, (usize, usize)> = HashMap::new();
        for (answer, marked, _) in peer.fake.sent().iter().filter_map(|m| read_answer(&m.text)) {
            let (plain, resent) = copies.entry(answer).or_default();
            if marked { *resent += 1 } else { *plain += 1 }
        }
        copies
    };
    let all = eventually(Duration::from_secs(240), || {
        let copies = copies();
        expected.iter().all(|a| copies.contains_key(a))
    })
    .await;
    let missing: Vec<&String> = expected.iter().filter(|a| !copies().contains_key(*a)).collect();
    assert!(all, "{} answers lost: {:?}…\n{logs}", missing.len(), missing.iter().take(10).collect::<Vec<_>>());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let copies = copies();
    let doubled: Vec<(&String, &(usize, usize))> = copies.iter().filter(|(_, (plain, resent))| *plain > 1 || *resent > 1).collect();
    assert!(doubled.is_empty(), "sent twice as such (plain, marked): {doubled:?}\n{logs}");
    assert_eq!(copies.len(), expected.len(), "no answer nobody asked for");
    assert_eq!(peer.fake.pending_updates(), 0, "every update was confirmed to Telegram");
    copies.into_iter().filter(|(_, (_, resent))| *resent > 0).map(|(answer, _)| answer).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_take_telegram_updates_behind_nginx_and_the_holder_killed_loses_none() {
    let Some(binary) = Nginx::binary() else {
        not_run("replica_telegram_webhook", "nginx is not installed (Debian: nginx-light)");
        return;
    };
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Echo);
    let peer = TelegramPeer::start().await;
    let url = scratch_database().await;
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let admins: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let nginx = Nginx::start(&binary, &ports).await;
    peer.fake.route_webhook(PUBLIC, &nginx.base());

    let names = ["replica-a", "replica-b", "replica-c"];
    let setups: Vec<Setup> = (0..3).map(|i| replica(&llm, &peer, &url, names[i], ports[i], admins[i])).collect();
    // The first holds the platform (it starts alone); the others take updates in beside it.
    let mut gateways: Vec<Gateway> = vec![setups[0].start().await];
    for setup in &setups[1..] {
        gateways.push(setup.spawn());
    }
    for (i, port) in ports.iter().enumerate() {
        let up = eventually(Duration::from_secs(30), || std::net::TcpStream::connect(("127.0.0.1", *port)).is_ok()).await;
        assert!(up, "{} takes Telegram updates in:\n{}", names[i], gateways[i].log_text());
    }

    // Whichever replica took the platform's lease runs the turns: that one is killed.
    let leases = leases_until(&url, Duration::from_secs(30), |l| l.contains_key(LEASE)).await;
    let holder = names.iter().position(|n| leases.get(LEASE).is_some_and(|h| h == n)).expect("a replica serves Telegram");

    let mut expected = Vec::new();
    for round in 1..=ROUNDS {
        for user in 1..=USERS {
            let text = format!("u{user}-r{round}");
            peer.dm(user, &text).await;
            expected.push(format!("echo: {text}"));
        }
        if round == ROUNDS / 2 {
            // Let the first half spread over the replicas before the holder goes.
            tokio::time::sleep(Duration::from_millis(500)).await;
            assert!(!gateways[holder].signal(libc::SIGKILL).await.success(), "the holder was killed");
        }
    }
    let logs: String = gateways.iter().map(|g| g.log_text()).collect::<Vec<_>>().join("\n----\n");
    let repeats = every_answer_once_or_marked(&peer, &expected, &format!("nginx: {}\n{logs}", nginx.errors())).await;

    // The survivors both took updates in, and one of them took the platform over.
    let survivors: Vec<usize> = (0..3).filter(|i| *i != holder).collect();
    let taken: Vec<u64> = futures::future::join_all(survivors.iter().map(|i| received(admins[*i]))).await;
    assert!(taken.iter().all(|n| *n > 0), "nginx spread the updates over both survivors: {taken:?}");
    let leases = leases_until(&url, Duration::from_secs(10), |l| l.get(LEASE).is_some_and(|h| h != names[holder])).await;
    assert!(leases.get(LEASE).is_some_and(|h| h != names[holder]), "a survivor serves Telegram: {leases:?}\n{logs}");
    println!(
        "{} updates through nginx; {} killed; stored by the survivors {taken:?}; now {leases:?}; resent marked: {repeats:?}",
        expected.len(),
        names[holder]
    );
}
