//! Outbound pacing against a fake that enforces the platform's published limits: the gateway
//! with its default send budget answers a group with more parts than Telegram lets into one
//! minute, and the fake — whose limits are written from Telegram's Bots FAQ, not from the pacer
//! (see `FakeTelegram::enforce_published_limits`) — never has to refuse one.
//!
//! Real time, because a limit of 20 a minute can only be shown over more than a minute: the
//! fewest parts that prove it are 25 (20 inside the first minute, 5 that must wait for it).

use crate::peer::ChatPeer;
use crate::support::Setup;
use crate::telegram::{GROUP, TelegramPeer};
use hermes_fakes::{FakeLlm, Reply};
use std::time::{Duration, Instant};

/// More parts than one minute may carry to a group.
const PARTS: usize = 25;
/// Telegram's published group limit: "not able to send more than 20 messages per minute to the
/// same group" (https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this).
const PUBLISHED_GROUP_LIMIT: usize = 20;

/// An answer Telegram's 4,096-character limit splits into exactly `PARTS` messages: paragraphs
/// of about 3,900 characters (two never fit in one message), each opening with its tag.
fn answer_in_parts() -> (String, Vec<String>) {
    let tags: Vec<String> = (1..=PARTS).map(|n| format!("part{n:02}")).collect();
    let paragraphs: Vec<String> = tags.iter().map(|tag| format!("{tag} {}", "word ".repeat(780).trim_end())).collect();
    (paragraphs.join("\n\n"), tags)
}

/// The most of `times` (sorted) inside any half-open window of `window`.
fn most_in_any_window(times: &[Instant], window: Duration) -> usize {
    times.iter().enumerate().map(|(i, from)| times[i..].iter().take_while(|t| t.duration_since(*from) < window).count()).max().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_group_burst_stays_within_the_published_limit() {
    let llm = FakeLlm::start().await;
    let peer = TelegramPeer::start().await;
    peer.fake.enforce_published_limits();
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    setup.set("TELEGRAM_BOT_TOKEN", &peer.fake.token());
    setup.set("TELEGRAM_API_BASE_URL", &peer.fake.api_url());
    setup.set("TELEGRAM_ALLOWED_USERS", &TelegramPeer::allowed_users());
    // The send budget a user gets: nothing about pacing is configured.
    setup.write_config("platforms:\n  telegram:\n    require_mention: false\n");
    let gateway = setup.start().await;

    let (answer, tags) = answer_in_parts();
    llm.push(Reply::text(answer));
    let chat = peer.group(3, "tell me everything", false).await;
    let all_there = |sent: &[hermes_fakes::telegram::SentMessage]| sent.iter().filter(|m| m.text.starts_with("part")).count() >= PARTS;
    // 20 parts go in the first ~17 s, the other 5 after the first minute: 90 s is ample.
    let delivered = peer.fake.wait_until(Duration::from_secs(90), |f| all_there(&f.sent_to(GROUP))).await;
    assert!(delivered, "not every part arrived: {:#?}\n--- gateway log ---\n{}", peer.posted(&chat), gateway.log_text());
    crate::suite::settle().await;

    let sent: Vec<_> = peer.fake.sent_to(GROUP).into_iter().filter(|m| m.text.starts_with("part")).collect();
    assert_eq!(peer.fake.rate_limited_count(), 0, "the fake refused sends with 429:\n{}", gateway.log_text());
    assert_eq!(sent.len(), PARTS, "every part once, no duplicates");
    let order: Vec<&str> = sent.iter().map(|m| &m.text[..6]).collect();
    assert_eq!(order, tags.iter().map(String::as_str).collect::<Vec<_>>(), "the parts arrive in order");
    let arrivals: Vec<Instant> = sent.iter().map(|m| m.at).collect();
    let offsets: Vec<Duration> = arrivals.iter().map(|t| t.duration_since(arrivals[0])).collect();
    eprintln!("parts arrived at (after the first): {offsets:.1?}");
    assert_eq!(
        most_in_any_window(&arrivals, Duration::from_secs(60)),
        PUBLISHED_GROUP_LIMIT,
        "a full minute's worth goes out, and never more (arrivals after the first: {offsets:?})"
    );
}
