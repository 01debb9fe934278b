//! Failover on every platform whose connection only one process may hold (Telegram's is shown at
//! scale in `replicas`): two replicas share a real PostgreSQL and one platform account; the
//! replica holding the connection is killed with SIGKILL while users write; the standby takes
//! the connection over (resuming from the cursor the holder left, fenced by the lease) and every
//! message, before, during and after the takeover, is answered exactly once.

use crate::peer::{Chat, ChatPeer};
use crate::support::{Gateway, Setup, scratch_database};
use hermes_fakes::{FakeLlm, Reply};
use std::time::{Duration, Instant};

/// The replicas' lease: short, so a test sees its takeovers quickly.
pub(crate) const TTL_SECS: u64 = 3;
/// Users writing at once, and the rounds each writes.
const USERS: u32 = 4;
const ROUNDS: u32 = 6;

/// One replica of the bot: its own home, the shared database, the peer's account.
pub(crate) fn replica<P: ChatPeer>(llm: &FakeLlm, peer: &P, url: &str, name: &str) -> Setup {
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    setup.set("DATABASE_URL", url);
    let platforms = peer.configure(&mut setup);
    setup.write_config(&format!(
        "platforms:\n{platforms}\ndisplay:\n  busy_input_mode: queue\nstore:\n  lease_ttl_seconds: {TTL_SECS}\n  replica: {name}\n"
    ));
    setup
}

/// How many of the bot's messages in `chat` read exactly `text`.
fn times_posted<P: ChatPeer>(peer: &P, chat: &Chat, text: &str) -> usize {
    peer.posted(chat).iter().filter(|m| m.text.trim() == text).count()
}

/// Waits until every expected answer is in its chat, then checks none came twice.
async fn every_answer_once<P: ChatPeer>(peer: &P, expected: &[(Chat, String)], replicas: &[&Gateway]) {
    let logs = || replicas.iter().map(|g| g.log_text()).collect::<Vec<_>>().join("\n--- next replica ---\n");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let missing: Vec<&String> = expected.iter().filter(|(chat, text)| times_posted(peer, chat, text) == 0).map(|(_, t)| t).collect();
        if missing.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "{}: {} answers lost: {missing:?}\n{}", P::PLATFORM, missing.len(), logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Time for a stale copy to arrive, were one sent.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let doubled: Vec<(&String, usize)> =
        expected.iter().map(|(chat, text)| (text, times_posted(peer, chat, text))).filter(|(_, n)| *n > 1).collect();
    assert!(doubled.is_empty(), "{}: answered more than once: {doubled:?}", P::PLATFORM);
}

/// The holder is killed after half the rounds; the standby answers the rest and what the holder
/// had accepted but not answered, each once.
pub(crate) async fn holder_killed_the_standby_answers_everything_once<P: ChatPeer>() {
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Echo);
    let peer = P::start().await;
    let url = scratch_database().await;
    let first = replica(&llm, &peer, &url, "replica-a");
    let mut holder = first.start().await;
    // The holder is connected and answering before the standby starts: it holds the lease. Each
    // user has written once, as they would have before: a Discord DM channel no replica has seen
    // cannot be read back after a takeover (see the Discord adapter's `backfill`).
    let mut expected = Vec::new();
    for user in 1..=USERS {
        let chat = peer.dm(user, &format!("u{user}-hello")).await;
        expected.push((chat, format!("echo: u{user}-hello")));
    }
    every_answer_once(&peer, &expected, &[&holder]).await;
    let second = replica(&llm, &peer, &url, "replica-b");
    let standby = second.spawn();

    for round in 1..=ROUNDS {
        for user in 1..=USERS {
            let text = format!("u{user}-r{round}");
            let chat = peer.dm(user, &text).await;
            expected.push((chat, format!("echo: {text}")));
        }
        if round == ROUNDS / 2 {
            assert!(!holder.signal(libc::SIGKILL).await.success(), "the holder was killed");
        }
    }
    every_answer_once(&peer, &expected, &[&holder, &standby]).await;
    assert!(
        standby.log_text().contains("this replica holds the connection"),
        "the standby took the connection over:\n{}",
        standby.log_text()
    );
}
