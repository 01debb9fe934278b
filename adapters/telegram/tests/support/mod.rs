//! The harness the adapter's loopback tests share: the real adapter on the fake Bot API, a
//! recording inbox, a sender policy that allows everyone but [`STRANGER`], and messages as the
//! gateway hands them over.

// Each test crate uses part of the harness.
#![allow(dead_code)]

use hermes_adapter::{
    AdapterContext, AdapterError, ChatTarget, HealthReporter, InboundEvent, OutboundMessage, Platform, PlatformAdapter, SessionSource,
};
use hermes_fakes::inbox::{NoSessions, RecordingInbox};
use hermes_fakes::telegram::FakeTelegram;
use hermes_telegram::{SendBudget, TelegramAdapter, TelegramSettings};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub(crate) struct Bot {
    pub(crate) fake: FakeTelegram,
    pub(crate) adapter: Arc<TelegramAdapter>,
    pub(crate) inbox: Arc<RecordingInbox>,
    pub(crate) health: HealthReporter,
    pub(crate) stop: CancellationToken,
    pub(crate) task: Option<JoinHandle<Result<(), AdapterError>>>,
    pub(crate) media: tempfile::TempDir,
}

/// The one user the gateway's allowlist leaves out in these tests.
pub(crate) const STRANGER: i64 = 666;

/// Everyone but [`STRANGER`] is allowed, as the gateway's policy would answer.
pub(crate) fn context(inbox: Arc<RecordingInbox>, health: HealthReporter, stop: CancellationToken) -> AdapterContext {
    AdapterContext::new(inbox, Arc::new(NoSessions), health, stop)
        .with_sender_policy(Arc::new(|source: &SessionSource| source.user_id.as_deref() != Some(&STRANGER.to_string())))
}

pub(crate) fn settings(fake: &FakeTelegram, media: &tempfile::TempDir) -> TelegramSettings {
    let mut s = TelegramSettings::new(fake.token(), media.path().to_path_buf());
    s.api_base_url = Some(fake.api_url());
    s.poll_timeout = Duration::from_secs(2);
    s.budget = SendBudget::unlimited();
    s.require_mention = true;
    s.max_media_bytes = 1024;
    s.commands =
        vec![("help".into(), "Show what I can do".into()), ("model".into(), "Switch the model".into()), ("bad-name".into(), "x".into())];
    s
}

impl Bot {
    pub(crate) async fn start() -> Bot {
        let fake = FakeTelegram::start().await.unwrap();
        fake.group(-100, "Team", true);
        fake.topic(-100, 7, "Ops");
        Self::start_with(fake, |_| {}).await
    }

    pub(crate) async fn start_with(fake: FakeTelegram, tweak: impl FnOnce(&mut TelegramSettings)) -> Bot {
        let media = tempfile::tempdir().unwrap();
        let mut s = settings(&fake, &media);
        tweak(&mut s);
        let adapter = Arc::new(TelegramAdapter::new(s).unwrap());
        let inbox = Arc::new(RecordingInbox::default());
        let health = HealthReporter::new();
        let stop = CancellationToken::new();
        let ctx = context(inbox.clone(), health.clone(), stop.clone());
        let task = tokio::spawn({
            let adapter = adapter.clone();
            async move { adapter.run(ctx).await }
        });
        Bot { fake, adapter, inbox, health, stop, task: Some(task), media }
    }

    pub(crate) async fn events(&self, n: usize) -> Vec<InboundEvent> {
        for _ in 0..500 {
            let events = self.inbox.events();
            if events.len() >= n {
                return events;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("expected {n} accepted events, got {:#?}", self.inbox.events());
    }

    pub(crate) async fn stop(mut self) -> Result<(), AdapterError> {
        self.stop.cancel();
        self.task.take().unwrap().await.unwrap()
    }
}

/// A message as the gateway hands it over: the agent's Markdown rendered to Telegram HTML.
pub(crate) fn message(chat: &str, thread: Option<&str>, markdown: &str) -> OutboundMessage {
    OutboundMessage {
        target: ChatTarget { platform: Platform::new("telegram"), chat_id: chat.into(), thread_id: thread.map(str::to_string) },
        text: hermes_adapter::render::render(markdown, hermes_adapter::MarkdownDialect::TelegramHtml),
        reply_to: None,
        idempotency_key: "k".into(),
        is_final: true,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file: None,
    }
}
