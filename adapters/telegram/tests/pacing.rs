//! The send budget against the fake Bot API enforcing Telegram's published flood limits with
//! 429s: a burst to many chats is spread under them without a single refusal, where the same
//! burst unpaced is refused.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

use hermes_adapter::{ChatTarget, OutboundMessage, Platform, PlatformAdapter, SendError};
use hermes_fakes::telegram::FakeTelegram;
use hermes_telegram::{SendBudget, TelegramAdapter, TelegramSettings};
use std::sync::Arc;

const CHATS: i64 = 20;
const PER_CHAT: usize = 10;

fn message(chat: i64, text: &str) -> OutboundMessage {
    OutboundMessage {
        target: ChatTarget { platform: Platform::new("telegram"), chat_id: chat.to_string(), thread_id: None },
        text: text.into(),
        reply_to: None,
        idempotency_key: format!("turn:{chat}:{text}"),
        is_final: true,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file: None,
    }
}

async fn adapter(fake: &FakeTelegram, budget: SendBudget, media: &tempfile::TempDir) -> Arc<TelegramAdapter> {
    let mut settings = TelegramSettings::new(fake.token(), media.path().to_path_buf());
    settings.api_base_url = Some(fake.api_url());
    settings.budget = budget;
    Arc::new(TelegramAdapter::new(settings).unwrap())
}

/// Each user writes first, which opens the private chat the answers go to.
fn open_chats(fake: &FakeTelegram) {
    for chat in 1..=CHATS {
        fake.dm(&fake.user(chat, &format!("user{chat}")), "hello");
    }
}

/// Every chat's answers at once, each chat's in order (as the outbox sends one session's parts),
/// the chats side by side. Returns the outcome of every send.
async fn burst(adapter: &Arc<TelegramAdapter>) -> Vec<Result<(), SendError>> {
    let tasks: Vec<_> = (1..=CHATS)
        .map(|chat| {
            let adapter = adapter.clone();
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                for part in 0..PER_CHAT {
                    outcomes.push(adapter.send(&message(chat, &format!("part {part}"))).await.map(|_| ()));
                }
                outcomes
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.extend(task.await.unwrap());
    }
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_200_messages_to_20_chats_gets_no_429_under_telegrams_limits() {
    let fake = FakeTelegram::start().await.unwrap();
    open_chats(&fake);
    fake.enforce_published_limits();
    let media = tempfile::tempdir().unwrap();
    let paced = adapter(&fake, SendBudget::default(), &media).await;

    let outcomes = burst(&paced).await;
    assert!(outcomes.iter().all(Result::is_ok), "{:?}", outcomes.iter().find(|o| o.is_err()));
    assert_eq!(fake.rate_limited_count(), 0, "no send was refused");
    for chat in 1..=CHATS {
        let texts: Vec<String> = fake.sent_to(chat).into_iter().map(|m| m.text).collect();
        let expected: Vec<String> = (0..PER_CHAT).map(|part| format!("part {part}")).collect();
        assert_eq!(texts, expected, "chat {chat} got every part once, in order");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_burst_unpaced_is_refused_by_the_fake() {
    // The control: the limits the fake enforces do bite, so the test above proves the pacing.
    let fake = FakeTelegram::start().await.unwrap();
    open_chats(&fake);
    fake.enforce_published_limits();
    let media = tempfile::tempdir().unwrap();
    let unpaced = adapter(&fake, SendBudget::unlimited(), &media).await;

    let outcomes = burst(&unpaced).await;
    assert!(fake.rate_limited_count() > 0, "an unpaced burst collects 429s");
    // A 429 is waited out inside the adapter (a short one) or handed back to be retried later,
    // and a later send to that chat waits for it too: nothing is lost or doubled.
    for chat in 1..=CHATS {
        let texts: Vec<String> = fake.sent_to(chat).into_iter().map(|m| m.text).collect();
        let mut unique = texts.clone();
        unique.dedup();
        assert_eq!(texts, unique, "chat {chat}: no part was sent twice");
    }
    let delivered: usize = (1..=CHATS).map(|chat| fake.sent_to(chat).len()).sum();
    assert_eq!(delivered, outcomes.iter().filter(|o| o.is_ok()).count());
}
