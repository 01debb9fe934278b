//! The update offset recorded through the gateway's fenced cursors before Telegram hears it: a
//! replica whose lease on the bot is over confirms nothing and stops.

// A test crate: its helpers run only under tests, where a panic is how a test fails.
#![allow(clippy::unwrap_used)]

mod support;

use hermes_adapter::{AdapterError, Cursors, HealthReporter, MemoryCursors, PlatformAdapter};
use hermes_fakes::inbox::RecordingInbox;
use hermes_fakes::telegram::FakeTelegram;
use hermes_telegram::TelegramAdapter;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

struct Run {
    fake: FakeTelegram,
    inbox: Arc<RecordingInbox>,
    shared: Arc<MemoryCursors>,
    stop: CancellationToken,
    task: JoinHandle<Result<(), AdapterError>>,
    _media: tempfile::TempDir,
}

/// The adapter polling the fake with cursors in `shared`, as under a connection lease.
async fn start() -> Run {
    let fake = FakeTelegram::start().await.unwrap();
    let media = tempfile::tempdir().unwrap();
    let adapter = Arc::new(TelegramAdapter::new(support::settings(&fake, &media)).unwrap());
    let inbox = Arc::new(RecordingInbox::default());
    let shared = MemoryCursors::new();
    let stop = CancellationToken::new();
    let ctx = support::context(inbox.clone(), HealthReporter::new(), stop.clone()).with_cursors(Cursors::shared(shared.clone()));
    let task = tokio::spawn(async move { adapter.run(ctx).await });
    Run { fake, inbox, shared, stop, task, _media: media }
}

async fn accepted(inbox: &RecordingInbox, n: usize) {
    for _ in 0..500 {
        if inbox.events().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("expected {n} accepted events, got {}", inbox.events().len());
}

#[tokio::test]
async fn the_offset_is_recorded_before_telegram_is_told() {
    let run = start().await;
    let alice = run.fake.user(42, "alice");
    let first = run.fake.dm(&alice, "one");
    accepted(&run.inbox, 1).await;
    let next = first.update_id + 1;
    assert!(run.fake.wait_until(Duration::from_secs(5), |f| f.confirmed_offset() == next).await, "confirmed by the next poll");
    assert_eq!(run.shared.get("offset"), Some(next.to_string()), "recorded under the lease");
    run.stop.cancel();
    run.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_fenced_poller_stops_and_confirms_nothing() {
    let run = start().await;
    let alice = run.fake.user(42, "alice");
    let first = run.fake.dm(&alice, "one");
    accepted(&run.inbox, 1).await;
    assert!(run.fake.wait_until(Duration::from_secs(5), |f| f.confirmed_offset() == first.update_id + 1).await);

    // Another replica holds the bot now.
    run.shared.fence();
    run.fake.dm(&alice, "two");
    let ended = tokio::time::timeout(Duration::from_secs(5), run.task).await.expect("a fenced run ends on its own").unwrap();
    match ended {
        Err(AdapterError::Retryable { code, .. }) => assert_eq!(code, "fenced"),
        other => panic!("expected a fenced end, got {other:?}"),
    }
    assert_eq!(run.fake.confirmed_offset(), first.update_id + 1, "the second update is not confirmed");
    assert_eq!(run.fake.pending_updates(), 1, "Telegram still holds it for the replica that leads");
    assert_eq!(run.shared.get("offset"), Some((first.update_id + 1).to_string()), "the cursor did not move");
}
