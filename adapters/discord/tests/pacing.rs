//! Discord's send limits kept by the adapter, against the fake Discord enforcing the published
//! ones (5 messages per 5 s per channel, 50 a second overall) with 429s. Against a fake,
//! serenity's own header-driven limiter is off, so nothing but our pacing holds a burst back.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

use hermes_adapter::{ChatTarget, OutboundMessage, Platform, PlatformAdapter, SendError};
use hermes_discord::{DiscordAdapter, DiscordSendBudget, DiscordSettings};
use hermes_fakes::discord::FakeDiscord;
use std::sync::Arc;
use std::time::Duration;

fn message(channel: u64, text: &str) -> OutboundMessage {
    OutboundMessage {
        target: ChatTarget { platform: Platform::new("discord"), chat_id: channel.to_string(), thread_id: None },
        text: text.into(),
        reply_to: None,
        idempotency_key: format!("turn:{channel}:{text}"),
        is_final: true,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file: None,
    }
}

fn adapter(fake: &FakeDiscord, budget: DiscordSendBudget) -> Arc<DiscordAdapter> {
    let mut settings = DiscordSettings::new(fake.token());
    settings.api_base_url = Some(fake.api_url());
    settings.budget = budget;
    Arc::new(DiscordAdapter::new(settings).unwrap())
}

async fn send_all(adapter: &DiscordAdapter, channel: u64, texts: &[String]) -> Vec<Result<(), SendError>> {
    let mut outcomes = Vec::new();
    for text in texts {
        outcomes.push(adapter.send(&message(channel, text)).await.map(|_| ()));
    }
    outcomes
}

fn parts(name: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{name} {i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_beyond_the_channel_limit_waits_for_its_slots_instead_of_collecting_429s() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.enforce_published_limits();
    let channel = fake.text_channel("general");
    let flood = parts("flood", 6);

    let outcomes = send_all(&adapter(&fake, DiscordSendBudget::default()), channel, &flood).await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(fake.rate_limited_count(), 0, "no message create was refused");
    let sent: Vec<String> = fake.sent_to(channel).into_iter().map(|m| m.content).collect();
    assert_eq!(sent, flood, "every message once, in order");

    // The control: unpaced, the same burst runs into the limit the fake enforces.
    let other = fake.text_channel("random");
    let outcomes = send_all(&adapter(&fake, DiscordSendBudget::unlimited()), other, &parts("flood", 6)).await;
    assert!(matches!(outcomes.last(), Some(Err(SendError::RateLimited { .. }))), "{outcomes:?}");
    assert_eq!(fake.rate_limited_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_part_answer_goes_out_at_once_while_another_channel_waits() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.enforce_published_limits();
    let busy = fake.text_channel("busy");
    let quiet = fake.text_channel("quiet");
    let adapter = adapter(&fake, DiscordSendBudget::default());

    // A flood in one channel: its burst goes at once, its fourth message waits for a slot.
    let flood = tokio::spawn({
        let adapter = adapter.clone();
        async move { send_all(&adapter, busy, &parts("flood", 4)).await }
    });
    assert_eq!(fake.wait_sent(busy, 3, Duration::from_secs(10)).await.len(), 3);
    // Meanwhile a three-part answer in another channel is not held behind it: all three parts
    // arrive before the flood's held-back fourth.
    let answer = send_all(&adapter, quiet, &parts("answer", 3)).await;
    assert!(answer.iter().all(Result::is_ok), "{answer:?}");
    assert!(flood.await.unwrap().iter().all(Result::is_ok));
    let order: Vec<String> = fake.sent().into_iter().map(|m| m.content).collect();
    assert_eq!(order, ["flood 1", "flood 2", "flood 3", "answer 1", "answer 2", "answer 3", "flood 4"]);
    assert_eq!(fake.rate_limited_count(), 0);
}
