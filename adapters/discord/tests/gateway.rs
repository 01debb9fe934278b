//! The Discord adapter driven through the real serenity client (gateway WebSocket and REST)
//! against the fake Discord over loopback: what reaches the gateway's inbox, what reaches the
//! channel, and how the connection survives drops, zombie heartbeats and bad tokens.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

use hermes_adapter::{
    AdapterContext, AdapterError, Button, ChatTarget, ChatType, HealthReporter, InboundEvent, MessageKind, OutboundMessage, Platform,
    PlatformAdapter, SendError, SessionSource,
};
use hermes_discord::{DiscordAdapter, DiscordSettings};
use hermes_fakes::discord::{DiscordOptions, FakeDiscord, Fault, FaultScope};
use hermes_fakes::inbox::{NoSessions, RecordingInbox};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const STRANGER: u64 = 666;

struct Bot {
    fake: FakeDiscord,
    adapter: Arc<DiscordAdapter>,
    inbox: Arc<RecordingInbox>,
    health: HealthReporter,
    stop: CancellationToken,
    task: Option<JoinHandle<Result<(), AdapterError>>>,
}

impl Bot {
    async fn start() -> Bot {
        Self::start_with(FakeDiscord::start().await.unwrap(), |_| {}).await
    }

    async fn start_with(fake: FakeDiscord, tweak: impl FnOnce(&mut DiscordSettings)) -> Bot {
        let mut settings = DiscordSettings::new(fake.token());
        settings.api_base_url = Some(fake.api_url());
        tweak(&mut settings);
        let adapter = Arc::new(DiscordAdapter::new(settings).unwrap());
        let inbox = Arc::new(RecordingInbox::default());
        let health = HealthReporter::new();
        let stop = CancellationToken::new();
        // Everyone but STRANGER is allowed, as the gateway's policy would answer.
        let ctx = AdapterContext::new(inbox.clone(), Arc::new(NoSessions), health.clone(), stop.clone())
            .with_sender_policy(Arc::new(|source: &SessionSource| source.user_id.as_deref() != Some(STRANGER.to_string().as_str())));
        let task = tokio::spawn({
            let adapter = adapter.clone();
            async move { adapter.run(ctx).await }
        });
        Bot { fake, adapter, inbox, health, stop, task: Some(task) }
    }

    async fn connected(&self) {
        assert!(self.fake.wait_connected(Duration::from_secs(15)).await, "the bot connected to the gateway");
        for _ in 0..500 {
            if self.health.is_connected() && self.health.degraded_reason().is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the adapter never reported itself connected");
    }

    async fn events(&self, n: usize) -> Vec<InboundEvent> {
        for _ in 0..1000 {
            let events = self.inbox.events();
            if events.len() >= n {
                return events;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("expected {n} accepted events, got {:#?}", self.inbox.events());
    }

    async fn stop(mut self) -> Result<(), AdapterError> {
        self.stop.cancel();
        self.task.take().unwrap().await.unwrap()
    }
}

fn message(chat: u64, thread: Option<u64>, text: &str) -> OutboundMessage {
    OutboundMessage {
        target: ChatTarget { platform: Platform::new("discord"), chat_id: chat.to_string(), thread_id: thread.map(|t| t.to_string()) },
        text: text.into(),
        reply_to: None,
        idempotency_key: format!("turn:{text}"),
        is_final: true,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_arrives_with_its_sender_and_the_answer_replies_without_pinging_anyone() {
    let bot = Bot::start().await;
    bot.connected().await;
    let alice = bot.fake.user(42, "alice");
    let injected = bot.fake.dm(&alice, "hi there");
    let event = bot.events(1).await.remove(0);
    assert_eq!(event.event_id, format!("discord:{}", injected.id));
    assert_eq!(event.text, "hi there");
    assert_eq!(event.source.chat_type, ChatType::Dm);
    assert_eq!(event.source.chat_id, injected.channel_id.to_string());
    assert_eq!(event.source.user_id.as_deref(), Some("42"));

    let mut answer = message(injected.channel_id, None, "**hello** @everyone");
    answer.reply_to = event.message_id.clone();
    let receipt = bot.adapter.send(&answer).await.unwrap();
    let sent = bot.fake.sent_to(injected.channel_id);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].content, "**hello** @everyone", "markdown goes through as typed");
    assert_eq!(sent[0].reply_to, Some(injected.id));
    assert_eq!(sent[0].allowed_mentions.as_ref().unwrap()["parse"], serde_json::json!([]), "the model's text never pings");
    bot.adapter.edit(&answer.target, receipt.message_id.as_deref().unwrap(), "edited").await.unwrap();
    bot.adapter.typing(&answer.target).await.unwrap();
    let sent = bot.fake.sent_to(injected.channel_id);
    assert_eq!(sent[0].content, "edited");
    assert_eq!(sent[0].edits, vec!["**hello** @everyone".to_string()]);
    assert_eq!(bot.fake.typing(injected.channel_id), 1);
    bot.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guild_channels_need_a_mention_or_a_reply_and_threads_are_their_own_conversations() {
    let bot = Bot::start().await;
    bot.connected().await;
    let general = bot.fake.text_channel("general");
    let thread = bot.fake.thread(general, "plans");
    let mut bob = bot.fake.user(7, "bob");
    bob.nick = Some("Bobby".into());
    bot.fake.channel_message(general, &bob, "talking among ourselves", false);
    let mentioned = bot.fake.channel_message(general, &bob, "what time is it", true);
    let events = bot.events(1).await;
    assert_eq!(events[0].event_id, format!("discord:{}", mentioned.id));
    assert_eq!(events[0].text, "what time is it", "the bot's mention is stripped");
    assert_eq!(events[0].source.chat_type, ChatType::Group);
    assert_eq!(events[0].source.scope_id, Some(bot.fake.guild_id().to_string()));
    assert_eq!(events[0].source.user_id.as_deref(), Some("7"), "the snowflake identifies");
    assert_eq!(events[0].source.user_display_name.as_deref(), Some("Bobby"), "the server nickname names");
    assert_eq!(events[0].source.user_handle, None, "Discord names are never handles allowlists match");

    let posted = bot.adapter.send(&message(general, None, "it is noon")).await.unwrap();
    bot.fake.reply(general, &bob, posted.message_id.unwrap().parse().unwrap(), "thanks");
    bot.fake.channel_message(thread, &bob, "in the thread, no mention", false);
    let events = bot.events(3).await;
    assert_eq!(
        events[1].text,
        hermes_adapter::untrusted::with_reply_context(Some("hermes"), "it is noon", "thanks"),
        "a reply to the bot needs no mention, and carries the replied-to words marked"
    );
    assert_eq!(events[2].source.chat_type, ChatType::Thread);
    assert_eq!(events[2].source.chat_id, general.to_string(), "a thread's chat is its parent channel");
    assert_eq!(events[2].source.thread_id, Some(thread.to_string()));
    bot.adapter.send(&message(general, Some(thread), "answer in the thread")).await.unwrap();
    assert_eq!(bot.fake.sent_to(thread).len(), 1, "a thread's answer is posted in the thread");
    assert_eq!(bot.fake.sent_to(general).len(), 1);
    assert_eq!(bot.inbox.events().len(), 3, "the unmentioned channel message never arrived");
    bot.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_messages_reaches_the_inbox_in_the_order_it_was_written() {
    let bot = Bot::start().await;
    bot.connected().await;
    let carol = bot.fake.user(9, "carol");
    for i in 0..60 {
        bot.fake.dm(&carol, &format!("message {i}"));
    }
    let texts: Vec<String> = bot.events(60).await.into_iter().map(|e| e.text).collect();
    let expected: Vec<String> = (0..60).map(|i| format!("message {i}")).collect();
    assert_eq!(texts, expected);
    bot.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buttons_are_posted_and_a_press_becomes_an_acknowledged_event() {
    let bot = Bot::start().await;
    bot.connected().await;
    let dave = bot.fake.user(11, "dave");
    let channel = bot.fake.dm_channel(&dave);
    let mut offer = message(channel, None, "Pick a model");
    offer.buttons = vec![vec![
        Button { label: "fast".into(), data: "/model fast".into() },
        Button { label: "smart".into(), data: "/model smart".into() },
    ]];
    let posted: u64 = bot.adapter.send(&offer).await.unwrap().message_id.unwrap().parse().unwrap();
    let components = bot.fake.sent_to(channel)[0].components.clone();
    assert_eq!(components[0]["components"][1]["custom_id"], "/model smart");
    assert_eq!(components[0]["components"][1]["label"], "smart");
    let press = bot.fake.button(&dave, posted, "/model smart");
    let event = bot.events(1).await.remove(0);
    assert_eq!(event.kind, MessageKind::ButtonPress);
    assert_eq!(event.text, "/model smart");
    assert_eq!(event.source.user_id.as_deref(), Some("11"));
    assert!(
        bot.fake.wait_until(Duration::from_secs(5), |f| f.interaction_callbacks() == vec![(press.id, 6)]).await,
        "the press was acknowledged (deferred update): {:?}",
        bot.fake.interaction_callbacks()
    );
    assert!(bot.fake.interaction_messages().is_empty(), "an allowed press gets no message");
    // A stranger's press is stored for the gateway to refuse, and the stranger alone is told.
    let mallory = bot.fake.user(STRANGER, "mallory");
    bot.fake.button(&mallory, posted, "/model smart");
    assert_eq!(bot.events(2).await.remove(1).source.user_id.as_deref(), Some("666"));
    assert!(
        bot.fake
            .wait_until(Duration::from_secs(5), |f| f.interaction_messages().iter().any(|(t, eph)| *eph && t.contains("Not allowed")))
            .await,
        "the stranger is refused privately: {:?}",
        bot.fake.interaction_messages()
    );
    bot.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_resumes_and_what_was_said_meanwhile_arrives_once() {
    let bot = Bot::start().await;
    bot.connected().await;
    let erin = bot.fake.user(12, "erin");
    bot.fake.dm(&erin, "before");
    bot.events(1).await;
    assert!(bot.fake.drop_connection());
    bot.fake.dm(&erin, "while away");
    assert!(bot.fake.wait_until(Duration::from_secs(15), |f| f.resumes() == 1 && f.connected()).await, "the session was resumed");
    bot.fake.dm(&erin, "after");
    let texts: Vec<String> = bot.events(3).await.into_iter().map(|e| e.text).collect();
    assert_eq!(texts, vec!["before", "while away", "after"]);
    assert_eq!(bot.fake.identifies(), 1, "resumed, not re-identified");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(bot.inbox.events().len(), 3);
    bot.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_are_published_and_answered_in_their_thinking_response() {
    let commands = vec![("status".to_string(), "Show the session".to_string()), ("model".to_string(), "Switch the model".to_string())];
    let bot = Bot::start_with(FakeDiscord::start().await.unwrap(), |s| s.commands = commands).await;
    bot.connected().await;
    assert!(bot.fake.wait_until(Duration::from_secs(10), |f| f.commands().as_array().is_some_and(|c| c.len() == 2)).await);
    let published = bot.fake.commands();
    assert_eq!(published[1]["name"], "model");
    assert_eq!(published[1]["options"][0]["name"], "input", "arguments go in one text option");

    let general = bot.fake.text_channel("general");
    let ivy = bot.fake.user(16, "ivy");
    let invoked = bot.fake.slash_command(&ivy, general, "model", Some("gpt-5"));
    let events = bot.events(1).await;
    assert_eq!(events[0].text, "/model gpt-5", "the same text as a typed command; no mention needed");
    assert_eq!(events[0].source.chat_type, ChatType::Group);
    assert_eq!(bot.fake.interaction_callbacks(), vec![(invoked.id, 5)], "acknowledged as thinking");

    let mut answer = message(general, None, "Model switched to gpt-5");
    answer.reply_to = events[0].message_id.clone();
    let first = bot.adapter.send(&answer).await.unwrap();
    answer.text = "and a second part".into();
    bot.adapter.send(&answer).await.unwrap();
    let posted = bot.fake.sent_to(general);
    let texts: Vec<&str> = posted.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, vec!["Model switched to gpt-5", "and a second part"], "the first part replaced the thinking response");
    assert_eq!(first.message_id, Some(posted[0].id.to_string()));
    assert!(bot.fake.calls().iter().any(|c| c.method == "PATCH" && c.path.ends_with("/messages/@original")));
    let target = ChatTarget { platform: Platform::new("discord"), chat_id: general.to_string(), thread_id: None };
    bot.adapter.edit(&target, &posted[0].id.to_string(), "Model switched to gpt-5 (edited)").await.unwrap();
    assert_eq!(bot.fake.sent_to(general)[0].content, "Model switched to gpt-5 (edited)", "streaming edits reach the response");
    bot.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_written_while_the_session_was_lost_is_read_back_once_in_order() {
    let bot = Bot::start().await;
    bot.connected().await;
    let general = bot.fake.text_channel("general");
    let (gina, hal) = (bot.fake.user(14, "gina"), bot.fake.user(15, "hal"));
    bot.fake.dm(&gina, "before");
    bot.fake.channel_message(general, &hal, "hello bot", true);
    bot.events(2).await;
    // A session Discord forgot: a new one starts from now, nothing is replayed into it.
    assert!(bot.fake.invalidate_session(false));
    bot.fake.dm(&gina, "while away 1");
    bot.fake.channel_message(general, &hal, "not for the bot", false);
    bot.fake.channel_message(general, &hal, "while away 2", true);
    bot.fake.dm(&gina, "while away 3");
    assert_eq!(bot.fake.lost_events(), 4, "no session received them");
    assert!(bot.fake.wait_until(Duration::from_secs(20), |f| f.identifies() == 2 && f.connected()).await, "a new session");
    bot.connected().await;
    bot.fake.dm(&gina, "after");
    let events = bot.events(6).await;
    let texts: Vec<&str> = events.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts, vec!["before", "hello bot", "while away 1", "while away 2", "while away 3", "after"]);
    assert_eq!(events[3].source.chat_type, ChatType::Group, "a guild message read back is still a guild message");
    assert_eq!(events[3].source.scope_id, Some(bot.fake.guild_id().to_string()));
    assert_eq!(events[4].source.chat_type, ChatType::Dm);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(bot.inbox.events().len(), 6, "nothing twice, and the unmentioned message stays unanswered");
    bot.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacknowledged_heartbeats_are_noticed_reported_and_the_connection_rebuilt() {
    let bot = Bot::start().await;
    bot.connected().await;
    assert!(bot.fake.stop_acking_heartbeats());
    // Discord takes a moment to answer IDENTIFY; the fake takes long enough to look at the gap.
    bot.fake.set_ready_delay(Duration::from_secs(2));
    let mut degraded = None;
    for _ in 0..1500 {
        degraded = bot.health.degraded_reason();
        if degraded.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(degraded.is_some(), "the zombie connection was reported degraded");
    assert!(bot.fake.wait_until(Duration::from_secs(20), |f| f.identifies() == 2 && f.connected()).await, "a new connection was made");
    bot.connected().await;
    assert_eq!(bot.fake.open_connections(), 1, "the zombie connection was closed: one client, one connection");
    let frank = bot.fake.user(13, "frank");
    bot.fake.dm(&frank, "are you back?");
    assert_eq!(bot.events(1).await[0].text, "are you back?");
    bot.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_token_parks_the_adapter_without_printing_it() {
    let fake = FakeDiscord::start_with(DiscordOptions { token: "the-real-token".into(), ..DiscordOptions::default() }).await.unwrap();
    let mut bot = Bot::start_with(fake, |s| s.token = "wrong-secret-token".into()).await;
    let ended = tokio::time::timeout(Duration::from_secs(15), bot.task.take().unwrap()).await.expect("run ended").unwrap();
    let error = ended.expect_err("a bad token ends the run");
    assert!(!error.is_retryable(), "retrying a rejected token cannot help: {error}");
    assert!(error.to_string().contains("DISCORD_BOT_TOKEN"), "{error}");
    assert!(!error.to_string().contains("wrong-secret-token"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_errors_are_classified_and_a_lost_answer_is_retried_without_a_duplicate() {
    let bot = Bot::start().await;
    let grace = bot.fake.user(14, "grace");
    let channel = bot.fake.dm_channel(&grace);
    match bot.adapter.send(&message(999, None, "nowhere")).await {
        Err(SendError::NotFound(_)) => {}
        other => panic!("an unknown channel is NotFound, got {other:?}"),
    }
    bot.fake.fail_next(FaultScope::Create, 1, Fault::RateLimited { retry_after: 0.5 });
    match bot.adapter.send(&message(channel, None, "throttled")).await {
        Err(SendError::RateLimited { .. }) => {}
        other => panic!("a 429 is RateLimited, got {other:?}"),
    }
    bot.fake.fail_next(FaultScope::Create, 1, Fault::ServerError(502));
    assert!(matches!(bot.adapter.send(&message(channel, None, "5xx")).await, Err(SendError::Transient(_))));
    match bot.adapter.send(&message(channel, None, &"x".repeat(2001))).await {
        Err(SendError::TooLong) => {}
        other => panic!("over 2000 characters is TooLong, got {other:?}"),
    }
    assert_eq!(bot.fake.sent_to(channel).len(), 0, "nothing was posted by the failures");
    let path = format!("/channels/{channel}/messages");
    let creates_before = bot.fake.call_count("POST", &path);
    bot.fake.fail_next(FaultScope::Create, 1, Fault::LostAnswer);
    bot.adapter.send(&message(channel, None, "exactly once")).await.expect("the retry with the same nonce succeeds");
    let sent = bot.fake.sent_to(channel);
    assert_eq!(sent.len(), 1, "Discord kept one copy: {sent:#?}");
    assert_eq!(bot.fake.call_count("POST", &path) - creates_before, 2, "sent, answer lost, sent again");
    bot.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_closes_the_gateway_connection() {
    let bot = Bot::start().await;
    bot.connected().await;
    let fake = bot.fake.clone();
    bot.stop().await.unwrap();
    assert!(fake.wait_until(Duration::from_secs(10), |f| f.open_connections() == 0).await, "no connection left open");
}
