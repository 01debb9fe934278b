//! The Slack adapter on its own, driven through slack-morphism's Web API client and the Socket
//! Mode loop against the fake Slack over loopback: what reaches the inbox and when Slack is
//! acknowledged, how dead sockets and refused tokens end, and what a send looks like on the wire.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

use hermes_adapter::{
    AcceptError, AdapterContext, AdapterError, Button, ChatTarget, HealthReporter, OutboundMessage, Platform, PlatformAdapter,
};
use hermes_fakes::inbox::{NoSessions, RecordingInbox};
use hermes_fakes::slack::{FakeSlack, SlackOptions};
use hermes_slack::{SlackAdapter, SlackSettings};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

struct Bot {
    fake: FakeSlack,
    adapter: Arc<SlackAdapter>,
    inbox: Arc<RecordingInbox>,
    health: HealthReporter,
    stop: CancellationToken,
    task: Option<JoinHandle<Result<(), AdapterError>>>,
}

impl Bot {
    async fn start(fake: FakeSlack, tweak: impl FnOnce(&mut SlackSettings)) -> Bot {
        let mut settings = SlackSettings::new(fake.bot_token(), fake.app_token());
        settings.api_base_url = Some(fake.api_url());
        tweak(&mut settings);
        let adapter = Arc::new(SlackAdapter::new(settings).unwrap());
        let inbox = Arc::new(RecordingInbox::default());
        let health = HealthReporter::new();
        let stop = CancellationToken::new();
        let ctx = AdapterContext::new(inbox.clone(), Arc::new(NoSessions), health.clone(), stop.clone())
            .with_sender_policy(Arc::new(|_: &hermes_adapter::SessionSource| true));
        let task = tokio::spawn({
            let adapter = adapter.clone();
            async move { adapter.run(ctx).await }
        });
        Bot { fake, adapter, inbox, health, stop, task: Some(task) }
    }

    async fn healthy(&self) -> bool {
        for _ in 0..750 {
            if self.fake.connected() && self.health.is_connected() && self.health.degraded_reason().is_none() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    async fn inbox_has(&self, n: usize) -> bool {
        for _ in 0..750 {
            if self.inbox.events().len() >= n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    async fn stopped(mut self) -> Result<(), AdapterError> {
        self.stop.cancel();
        self.task.take().unwrap().await.unwrap()
    }
}

fn dm_target(channel: &str) -> ChatTarget {
    ChatTarget { platform: Platform::new("slack"), chat_id: channel.to_string(), thread_id: None }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envelope_is_acked_only_after_the_inbox_took_it_and_a_refused_one_comes_again() {
    let fake = FakeSlack::start_with(SlackOptions { ack_timeout: Duration::from_millis(800), ..SlackOptions::default() }).await.unwrap();
    let bot = Bot::start(fake, |_| {}).await;
    assert!(bot.healthy().await);
    let alice = bot.fake.user("U0100", "alice");
    bot.inbox.fail_with(Some(|| AcceptError::Storage("disk full".into())));
    let first = bot.fake.dm(&alice, "are you there?");
    // Three tries inside the adapter, then no ack: Slack keeps the envelope.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!bot.fake.acked(&first.envelope_ids[0]), "an event the inbox refused is not acknowledged");
    assert!(bot.inbox.events().is_empty());
    bot.inbox.fail_with(None);
    assert!(bot.inbox_has(1).await, "Slack's retry reached the inbox");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let events = bot.inbox.events();
    assert_eq!(events.len(), 1, "once, however often it came: {events:#?}");
    assert_eq!(events[0].text, "are you there?");
    assert!(bot.fake.deliveries_of(&first.event_ids[0]) >= 2, "it really was delivered again");
    assert!(bot.stopped().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_that_stops_answering_pings_is_replaced_and_health_shows_it_meanwhile() {
    let fake = FakeSlack::start().await.unwrap();
    let bot = Bot::start(fake, |s| {
        s.ping_interval = Duration::from_millis(300);
        s.missed_pings = 2;
    })
    .await;
    assert!(bot.healthy().await);
    // The socket goes quiet, and for a while no new one can be opened.
    bot.fake.refuse_connections(true);
    bot.fake.stop_answering_pings();
    let mut down = false;
    for _ in 0..500 {
        down = !bot.health.is_connected() && bot.health.degraded_reason().is_some_and(|r| r.contains("pings went unanswered"));
        if down {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(down, "health shows the adapter down and why: {:?}", bot.health.degraded_reason());
    let opened = bot.fake.connections_opened();
    bot.fake.refuse_connections(false);
    assert!(bot.healthy().await, "the new socket's hello made it healthy again");
    assert!(bot.fake.connections_opened() > opened, "on a new socket");
    let bob = bot.fake.user("U0200", "bob");
    bot.fake.dm(&bob, "still here?");
    assert!(bot.inbox_has(1).await, "messages flow on the new socket");
    assert!(bot.stopped().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_tokens_end_the_run_for_good_and_name_the_variable() {
    let fake = FakeSlack::start().await.unwrap();
    let mut bot = Bot::start(fake, |s| s.bot_token = "xoxb-wrong-token".into()).await;
    let result = tokio::time::timeout(Duration::from_secs(10), bot.task.take().unwrap()).await.unwrap().unwrap();
    let error = result.unwrap_err();
    assert!(!error.is_retryable(), "a wrong token is not retried: {error}");
    assert!(error.to_string().contains("SLACK_BOT_TOKEN"), "{error}");

    let fake = FakeSlack::start().await.unwrap();
    let mut bot = Bot::start(fake, |s| s.app_token = "xapp-wrong".into()).await;
    let result = tokio::time::timeout(Duration::from_secs(10), bot.task.take().unwrap()).await.unwrap().unwrap();
    let error = result.unwrap_err();
    assert!(!error.is_retryable() && error.to_string().contains("SLACK_APP_TOKEN"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_carries_its_key_no_unfurling_and_buttons_as_block_kit() {
    let fake = FakeSlack::start().await.unwrap();
    let bot = Bot::start(fake, |_| {}).await;
    assert!(bot.healthy().await);
    let alice = bot.fake.user("U0100", "alice");
    let channel = bot.fake.dm_channel(&alice);
    let message = OutboundMessage {
        target: dm_target(&channel),
        text: "Run `rm -rf build`? &lt;!channel&gt;".into(),
        reply_to: None,
        idempotency_key: "turn-7:0".into(),
        is_final: true,
        usage: None,
        finish_reason: None,
        buttons: vec![vec![
            Button { label: "Approve once".into(), data: "/approve".into() },
            Button { label: "Deny".into(), data: "/deny".into() },
        ]],
        file: None,
    };
    let receipt = bot.adapter.send(&message).await.unwrap();
    let sent = bot.fake.sent_to(&channel);
    assert_eq!(sent.len(), 1);
    assert_eq!(receipt.message_id.as_deref(), Some(sent[0].ts.as_str()));
    assert_eq!((sent[0].unfurl_links, sent[0].unfurl_media), (Some(false), Some(false)), "links are never unfurled");
    assert_eq!(sent[0].metadata.as_ref().unwrap()["event_payload"]["key"], "turn-7:0");
    let actions = sent[0].blocks.as_array().unwrap().iter().find(|b| b["type"] == "actions").unwrap().clone();
    assert_eq!(actions["elements"][0]["value"], "/approve");
    assert!(sent[0].shown.contains("<!channel>"), "the mention is shown as text: {}", sent[0].shown);
    // An edit of it, and an edit of a message that does not exist.
    bot.adapter.edit(&dm_target(&channel), &sent[0].ts, "done").await.unwrap();
    assert_eq!(bot.fake.sent_to(&channel)[0].text, "done");
    let missing = bot.adapter.edit(&dm_target(&channel), "1.000000", "x").await.unwrap_err();
    assert!(matches!(missing, hermes_adapter::SendError::NotFound(_)), "{missing:?}");
    // A channel id that is not one never reaches Slack.
    let calls = bot.fake.calls().len();
    assert!(bot.adapter.send(&OutboundMessage { target: dm_target("C1/../x"), ..message.clone() }).await.is_err());
    assert_eq!(bot.fake.calls().len(), calls);
    assert!(bot.stopped().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_send_is_looked_up_by_its_key_in_the_channel() {
    let fake = FakeSlack::start().await.unwrap();
    let bot = Bot::start(fake, |_| {}).await;
    assert!(bot.healthy().await);
    let alice = bot.fake.user("U0100", "alice");
    let channel = bot.fake.dm_channel(&alice);
    let message = OutboundMessage {
        target: dm_target(&channel),
        text: "the answer".into(),
        reply_to: None,
        idempotency_key: "turn-9:0".into(),
        is_final: true,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file: None,
    };
    // Never posted: Slack does not have it, so sending it is no repeat.
    let before = bot.adapter.find_sent(&message, Duration::from_secs(3600)).await.unwrap();
    assert_eq!(before, hermes_adapter::Lookup::NotThere);
    let receipt = bot.adapter.send(&message).await.unwrap();
    // Posted (say the answer was lost to a restart): found by the key in its metadata.
    let after = bot.adapter.find_sent(&message, Duration::from_secs(3600)).await.unwrap();
    assert_eq!(after, hermes_adapter::Lookup::Found(receipt));
    let other = OutboundMessage { idempotency_key: "turn-9:1".into(), ..message.clone() };
    assert_eq!(bot.adapter.find_sent(&other, Duration::ZERO).await.unwrap(), hermes_adapter::Lookup::NotThere, "another key is not");
    assert_eq!(bot.fake.sent_to(&channel).len(), 1, "looking sends nothing");
    assert!(bot.stopped().await.is_ok());
}
