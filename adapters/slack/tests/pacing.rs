//! Slack's posting limits kept by the adapter, against the fake Slack enforcing
//! `chat.postMessage`'s published limit (about one message a second per channel, short bursts
//! allowed) with 429s.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

use hermes_adapter::{ChatTarget, OutboundMessage, Platform, PlatformAdapter, SendError};
use hermes_fakes::slack::FakeSlack;
use hermes_slack::{SlackAdapter, SlackSendBudget, SlackSettings};
use std::sync::Arc;
use std::time::Duration;

fn message(channel: &str, text: &str) -> OutboundMessage {
    OutboundMessage {
        target: ChatTarget { platform: Platform::new("slack"), chat_id: channel.to_string(), thread_id: None },
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

fn adapter(fake: &FakeSlack, budget: SlackSendBudget) -> Arc<SlackAdapter> {
    let mut settings = SlackSettings::new(fake.bot_token(), fake.app_token());
    settings.api_base_url = Some(fake.api_url());
    settings.budget = budget;
    Arc::new(SlackAdapter::new(settings).unwrap())
}

async fn send_all(adapter: &SlackAdapter, channel: &str, texts: &[String]) -> Vec<Result<(), SendError>> {
    let mut outcomes = Vec::new();
    for text in texts {
        outcomes.push(adapter.send(&message(channel, text)).await.map(|_| ()));
    }
    outcomes
}

fn parts(name: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{name} {i}")).collect()
}

fn texts(fake: &FakeSlack, channel: &str) -> Vec<String> {
    fake.sent_to(channel).into_iter().map(|m| m.text).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_beyond_the_channel_limit_waits_for_its_slots_instead_of_collecting_429s() {
    let fake = FakeSlack::start().await.unwrap();
    fake.enforce_published_limits();
    let channel = fake.channel("general");
    let flood = parts("flood", 7);

    let outcomes = send_all(&adapter(&fake, SlackSendBudget::default()), &channel, &flood).await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(fake.rate_limited_count(), 0, "no post was refused");
    assert_eq!(texts(&fake, &channel), flood, "every message once, in order");

    // The control: unpaced, the same burst runs into the limit the fake enforces.
    let other = fake.channel("random");
    let outcomes = send_all(&adapter(&fake, SlackSendBudget::unlimited()), &other, &parts("flood", 7)).await;
    assert!(outcomes.iter().any(|o| matches!(o, Err(SendError::RateLimited { .. }))), "{outcomes:?}");
    assert!(fake.rate_limited_count() > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_part_answer_goes_out_at_once_while_another_channel_waits() {
    let fake = FakeSlack::start().await.unwrap();
    fake.enforce_published_limits();
    let busy = fake.channel("busy");
    let quiet = fake.channel("quiet");
    let adapter = adapter(&fake, SlackSendBudget::default());

    // A flood in one channel: its burst goes at once, its fourth message waits for a slot.
    let flood = tokio::spawn({
        let adapter = adapter.clone();
        let busy = busy.clone();
        async move { send_all(&adapter, &busy, &parts("flood", 4)).await }
    });
    assert_eq!(fake.wait_sent(&busy, 3, Duration::from_secs(10)).await.len(), 3);
    // Meanwhile a three-part answer in another channel is not held behind it: all three parts
    // arrive before the flood's held-back fourth.
    let answer = send_all(&adapter, &quiet, &parts("answer", 3)).await;
    assert!(answer.iter().all(Result::is_ok), "{answer:?}");
    assert!(flood.await.unwrap().iter().all(Result::is_ok));
    let order: Vec<String> = fake.sent().into_iter().map(|m| m.text).collect();
    assert_eq!(order, ["flood 1", "flood 2", "flood 3", "answer 1", "answer 2", "answer 3", "flood 4"]);
    assert_eq!(fake.rate_limited_count(), 0);
}
