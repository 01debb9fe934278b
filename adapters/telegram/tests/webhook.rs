//! Webhook mode, through the real teloxide client and real HTTP on loopback: the fake Bot API's
//! webhooks (`setWebhook`, delivery by POST, retries), and the adapter serving them.

// A test crate: its helpers run only under tests, where a panic is how a test fails.
#![allow(clippy::unwrap_used)]

mod support;

use hermes_adapter::{AcceptError, PlatformAdapter, Secret};
use hermes_fakes::Receiver;
use hermes_fakes::telegram::FakeTelegram;
use hermes_telegram::{Mode, TelegramAdapter, WebhookSettings};
use std::time::Duration;
use teloxide::payloads::SetWebhookSetters;
use teloxide::prelude::Requester;
use teloxide::{Bot, RequestError};

const SECRET: &str = "f3A9_k2L-q8Zr7Xw1bN0";

fn client(fake: &FakeTelegram) -> Bot {
    Bot::new(fake.token()).set_api_url(url::Url::parse(&fake.api_url()).unwrap())
}

#[tokio::test]
async fn while_a_webhook_is_set_the_fake_posts_updates_with_the_secret_and_refuses_polling() {
    let fake = FakeTelegram::start().await.unwrap();
    let receiver = Receiver::start().await;
    let bot = client(&fake);
    bot.set_webhook(url::Url::parse(&receiver.url("/tg/hook")).unwrap()).secret_token(SECRET.to_string()).await.unwrap();
    let polled = bot.get_updates().await;
    assert!(polled.as_ref().is_err_and(hermes_telegram::errors::is_webhook_active), "{polled:?}");

    let alice = fake.user(42, "alice");
    let injected = fake.dm(&alice, "hello");
    assert!(receiver.wait_for(1, Duration::from_secs(5)).await);
    let post = receiver.received().remove(0);
    assert_eq!(post.path, "/tg/hook");
    assert_eq!(post.header("x-telegram-bot-api-secret-token"), Some(SECRET));
    assert_eq!(post.body["update_id"].as_i64(), Some(injected.update_id));
    assert_eq!(post.body["message"]["text"], "hello");
    let info = bot.get_webhook_info().await.unwrap();
    assert_eq!(info.pending_update_count, 0, "a 2xx confirms the update");

    bot.delete_webhook().await.unwrap();
    assert!(bot.get_updates().await.unwrap().is_empty(), "polling works again, with nothing left over");
}

#[tokio::test]
async fn an_update_refused_by_the_webhook_is_posted_again_until_it_is_taken() {
    let fake = FakeTelegram::start().await.unwrap();
    let receiver = Receiver::start().await;
    receiver.fail_next(503, 2);
    client(&fake).set_webhook(url::Url::parse(&receiver.url("/hook")).unwrap()).await.unwrap();
    let injected = fake.dm(&fake.user(42, "alice"), "retry me");
    assert!(fake.wait_until(Duration::from_secs(5), |f| f.webhook_posts().len() >= 3).await);
    let statuses: Vec<u16> = fake.webhook_posts().iter().map(|(_, status)| *status).collect();
    assert_eq!(statuses, [503, 503, 200]);
    assert!(fake.webhook_posts().iter().all(|(id, _)| *id == injected.update_id));
    assert_eq!(fake.webhook_info()["last_error_message"], "Wrong response from the webhook: 503");
    assert_eq!(fake.pending_updates(), 0);
}

#[tokio::test]
async fn a_secret_token_outside_telegrams_alphabet_is_refused_by_the_fake() {
    let fake = FakeTelegram::start().await.unwrap();
    let result =
        client(&fake).set_webhook(url::Url::parse("https://example.org/hook").unwrap()).secret_token("has space".to_string()).await;
    assert!(matches!(result, Err(RequestError::Api(_))), "{result:?}");
}

fn webhook_settings() -> WebhookSettings {
    WebhookSettings { url: "https://bot.example.org/tg".into(), host: "127.0.0.1".into(), port: 0, secret: Secret::new(SECRET) }
}

#[tokio::test]
async fn webhook_mode_leases_nothing_and_polling_mode_leases_the_token() {
    let fake = FakeTelegram::start().await.unwrap();
    let media = tempfile::tempdir().unwrap();
    let mut settings = support::settings(&fake, &media);
    let polling = TelegramAdapter::new(settings.clone()).unwrap();
    assert!(polling.credential().is_some() && !polling.takes_events_on_any_replica(), "one replica polls");
    settings.mode = Mode::Webhook(webhook_settings());
    let adapter = TelegramAdapter::new(settings).unwrap();
    assert!(adapter.credential().is_none(), "any replica may serve a webhook");
    assert!(adapter.takes_events_on_any_replica(), "every replica behind the load balancer takes deliveries");
    assert!(adapter.liveness_timeout().is_none(), "a quiet webhook is not a stuck one");
}

#[tokio::test]
async fn a_polling_bot_deletes_a_webhook_left_set_and_receives() {
    let fake = FakeTelegram::start().await.unwrap();
    fake.group(-100, "Team", true);
    client(&fake).set_webhook(url::Url::parse("http://127.0.0.1:9/hook").unwrap()).await.unwrap();
    let bot = support::Bot::start_with(fake, |_| {}).await;
    let alice = bot.fake.user(42, "alice");
    bot.fake.dm(&alice, "after the switch");
    assert_eq!(bot.events(1).await[0].text, "after the switch");
    assert_eq!(bot.fake.webhook_info()["url"], "");
    assert_eq!(bot.fake.call_count("deleteWebhook"), 1);
    bot.stop().await.unwrap();
}

/// The adapter in webhook mode on `fake`, listening on a free loopback port.
async fn webhook_bot(fake: FakeTelegram) -> support::Bot {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let hook = WebhookSettings { url: format!("http://127.0.0.1:{port}/tg/hook"), port, ..webhook_settings() };
    let bot = support::Bot::start_with(fake, |s| s.mode = Mode::Webhook(hook)).await;
    assert!(bot.fake.wait_until(Duration::from_secs(5), |f| f.webhook_info()["url"] != "").await, "setWebhook was called");
    bot
}

#[tokio::test]
async fn in_webhook_mode_a_message_is_received_and_answered() {
    let bot = webhook_bot(FakeTelegram::start().await.unwrap()).await;
    let alice = bot.fake.user(42, "alice");
    let injected = bot.fake.dm(&alice, "hello over the webhook");
    let event = bot.events(1).await.remove(0);
    assert_eq!(event.text, "hello over the webhook");
    assert_eq!(event.source.user_id.as_deref(), Some("42"));
    assert!(bot.health.is_connected());
    bot.adapter.send(&support::message("42", None, "**hi**")).await.unwrap();
    assert_eq!(bot.fake.wait_sent(42, 1, Duration::from_secs(5)).await[0].text, "hi");

    let set = bot.fake.calls().into_iter().find(|c| c.method == "setwebhook").unwrap();
    assert_eq!(set.params["secret_token"], SECRET);
    // teloxide sends setWebhook as a form: every value arrives as text.
    assert_eq!(set.params["drop_pending_updates"].to_string().trim_matches('"'), "false");
    assert!(set.params["allowed_updates"].to_string().contains("callback_query"), "{}", set.params);
    assert_eq!(bot.fake.call_count("deleteWebhook"), 0);
    assert_eq!(bot.fake.call_count("getUpdates"), 0);
    assert_eq!(bot.fake.webhook_posts(), [(injected.update_id, 200)]);
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn a_post_without_or_with_a_wrong_secret_token_is_refused_and_nothing_is_stored() {
    let bot = webhook_bot(FakeTelegram::start().await.unwrap()).await;
    let update = serde_json::json!({"update_id": 900, "message": {"message_id": 1, "date": 0,
        "chat": {"id": 42, "type": "private", "first_name": "Mallory"}, "from": {"id": 42, "is_bot": false, "first_name": "Mallory"},
        "text": "forged"}});
    assert_eq!(bot.fake.forge_webhook_post(update.clone(), None).await, 401);
    assert_eq!(bot.fake.forge_webhook_post(update.clone(), Some("f3A9_k2L-q8Zr7Xw1bN1")).await, 401);
    assert_eq!(bot.fake.forge_webhook_post(update.clone(), Some("short")).await, 401);
    assert!(bot.inbox.events().is_empty());
    assert_eq!(bot.fake.forge_webhook_post(update, Some(SECRET)).await, 200, "the same POST with the token is taken");
    assert_eq!(bot.events(1).await.len(), 1);
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn a_redelivered_update_is_stored_once() {
    let bot = webhook_bot(FakeTelegram::start().await.unwrap()).await;
    let injected = bot.fake.dm(&bot.fake.user(42, "alice"), "once");
    bot.events(1).await;
    bot.fake.redeliver(injected.update_id);
    assert!(bot.fake.wait_until(Duration::from_secs(5), |f| f.webhook_posts().len() >= 2).await);
    assert_eq!(bot.fake.webhook_posts(), [(injected.update_id, 200), (injected.update_id, 200)], "a duplicate is acknowledged");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(bot.inbox.events().len(), 1);
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn an_update_the_inbox_cannot_store_is_refused_and_comes_again() {
    let bot = webhook_bot(FakeTelegram::start().await.unwrap()).await;
    bot.inbox.fail_with(Some(|| AcceptError::ShuttingDown));
    let injected = bot.fake.dm(&bot.fake.user(42, "alice"), "not lost");
    assert!(bot.fake.wait_until(Duration::from_secs(5), |f| f.webhook_posts().len() >= 2).await);
    assert!(bot.fake.webhook_posts().iter().all(|(id, status)| *id == injected.update_id && *status == 503));
    assert!(bot.inbox.events().is_empty());
    bot.inbox.fail_with(None);
    assert_eq!(bot.events(1).await[0].text, "not lost");
    assert!(bot.fake.wait_until(Duration::from_secs(5), |f| f.pending_updates() == 0).await);
    assert_eq!(bot.fake.webhook_posts().last(), Some(&(injected.update_id, 200)));
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn a_button_press_delivered_twice_is_answered_once() {
    let bot = webhook_bot(FakeTelegram::start().await.unwrap()).await;
    let alice = bot.fake.user(42, "alice");
    let press = bot.fake.callback(42, 1, &alice, "/model gpt-x");
    bot.events(1).await;
    assert!(bot.fake.wait_until(Duration::from_secs(5), |f| f.answered_callbacks().len() == 1).await);
    bot.fake.redeliver(press.update_id);
    assert!(bot.fake.wait_until(Duration::from_secs(5), |f| f.webhook_posts().len() >= 2).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(bot.fake.answered_callbacks().len(), 1, "the spinner was stopped the first time");
    assert_eq!(bot.inbox.events().len(), 1);
    bot.stop().await.unwrap();
}
