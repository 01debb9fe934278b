//! The Telegram adapter driven through the real teloxide client against the fake Bot API over
//! loopback: what reaches the gateway's inbox, what reaches the chat, and how failures end.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

mod support;

use hermes_adapter::{AcceptError, Button, ChatType, MessageKind, PlatformAdapter, Refusal, SendError};
use hermes_fakes::telegram::{FakeTelegram, Fault, FaultScope};
use std::time::Duration;
use support::{Bot, STRANGER, context, message};

#[tokio::test]
async fn a_dm_arrives_with_its_sender_and_the_answer_is_rendered_as_html() {
    let bot = Bot::start().await;
    let alice = bot.fake.user(42, "alice");
    let injected = bot.fake.dm(&alice, "hi there");
    let event = bot.events(1).await.remove(0);
    assert_eq!(event.event_id, format!("telegram:123456:{}", injected.update_id));
    assert_eq!(event.text, "hi there");
    assert_eq!(event.source.chat_type, ChatType::Dm);
    assert_eq!(event.source.chat_id, "42");
    assert_eq!(event.source.user_id.as_deref(), Some("42"));
    assert_eq!(event.source.user_handle.as_deref(), Some("alice"));
    assert_eq!(event.source.user_display_name.as_deref(), Some("alice"));
    assert_eq!(event.message_id, Some(injected.message_id.to_string()));

    let mut reply = message("42", None, "**Done**: `x < y` & [docs](https://d.test)");
    reply.reply_to = event.message_id.clone();
    let receipt = bot.adapter.send(&reply).await.unwrap();
    let sent = bot.fake.sent_to(42);
    assert_eq!(sent.len(), 1);
    assert_eq!(Some(sent[0].message_id.to_string()), receipt.message_id);
    assert_eq!(sent[0].text, "Done: x < y & docs");
    assert_eq!(sent[0].parse_mode.as_deref(), Some("HTML"));
    assert_eq!(sent[0].reply_to, Some(injected.message_id));
    let kinds: Vec<&str> = sent[0].entities.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds, ["bold", "code", "text_link"]);
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn groups_need_a_mention_a_reply_or_a_command_for_this_bot() {
    let bot = Bot::start().await;
    let bob = bot.fake.user(7, "bob");
    bot.fake.group_message(-100, &bob, "just chatting");
    bot.fake.group_message(-100, &bob, "/status@other_bot");
    bot.fake.group_message(-100, &bob, "hey @HERMES_TEST_BOT what's new");
    bot.fake.group_message(-100, &bob, "/status@hermes_test_bot");
    let answer = bot.adapter.send(&message("-100", None, "an earlier answer")).await.unwrap();
    bot.fake.reply(-100, &bob, answer.message_id.unwrap().parse().unwrap(), "and a follow-up");
    let events = bot.events(3).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let texts: Vec<String> = bot.inbox.events().iter().map(|e| e.text.clone()).collect();
    assert_eq!(texts.len(), 3, "gated: {events:#?}");
    assert_eq!(texts[..2], ["hey what's new", "/status@hermes_test_bot"]);
    let marked_quote = format!("an earlier answer{}\n\nand a follow-up", hermes_adapter::untrusted::CLOSE);
    assert!(
        texts[2].starts_with("[Replying to] ") && texts[2].ends_with(&marked_quote),
        "the reply carries the answer marked: {:?}",
        texts[2]
    );
    assert!(events.iter().all(|e| e.source.chat_type == ChatType::Group && e.source.chat_name.as_deref() == Some("Team")));
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn forum_topics_are_threads_and_answers_go_back_to_the_topic() {
    let bot = Bot::start().await;
    let bob = bot.fake.user(7, "bob");
    bot.fake.topic_message(-100, 7, &bob, "@hermes_test_bot deploy status?");
    let event = bot.events(1).await.remove(0);
    assert_eq!(event.source.thread_id.as_deref(), Some("7"));
    bot.adapter.send(&message("-100", Some("7"), "all green")).await.unwrap();
    assert_eq!(bot.fake.sent_to(-100)[0].thread_id, Some(7));
    // A topic that no longer exists: the answer still reaches the chat.
    bot.adapter.send(&message("-100", Some("99"), "still here")).await.unwrap();
    let last = bot.fake.sent_to(-100).pop().unwrap();
    assert_eq!((last.text.as_str(), last.thread_id), ("still here", None));
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn buttons_are_an_inline_keyboard_and_a_press_is_an_event() {
    let bot = Bot::start().await;
    let alice = bot.fake.user(42, "alice");
    bot.fake.dm(&alice, "hello");
    bot.events(1).await;
    let mut choices = message("42", None, "Pick a model");
    choices.buttons = vec![
        vec![Button { label: "gpt-x".into(), data: "/model gpt-x".into() }],
        vec![Button { label: "too long".into(), data: "x".repeat(65) }],
    ];
    let sent = bot.adapter.send(&choices).await.unwrap();
    let keyboard = bot.fake.sent_to(42)[0].reply_markup.clone().expect("a keyboard");
    assert_eq!(keyboard["inline_keyboard"].as_array().unwrap().len(), 1, "the over-long button is left out: {keyboard}");
    assert_eq!(keyboard["inline_keyboard"][0][0]["callback_data"], "/model gpt-x");
    bot.fake.callback(42, sent.message_id.clone().unwrap().parse().unwrap(), &alice, "/model gpt-x");
    let press = bot.events(2).await.remove(1);
    assert_eq!(press.kind, MessageKind::ButtonPress);
    assert_eq!(press.text, "/model gpt-x");
    assert_eq!(press.source.user_id.as_deref(), Some("42"));
    assert!(bot.fake.wait_until(Duration::from_secs(5), |f| f.answered_callbacks().len() == 1).await, "the button stops spinning");
    assert!(bot.fake.callback_toasts().is_empty(), "an allowed press gets no toast");
    // A stranger's press is stored for the gateway to refuse, and the stranger alone is told.
    let stranger = bot.fake.user(STRANGER, "mallory");
    bot.fake.callback(42, sent.message_id.unwrap().parse().unwrap(), &stranger, "/model gpt-x");
    assert_eq!(bot.events(3).await.remove(2).source.user_id.as_deref(), Some(STRANGER.to_string().as_str()));
    assert!(
        bot.fake.wait_until(Duration::from_secs(5), |f| f.callback_toasts().iter().any(|t| t.contains("Not allowed"))).await,
        "the stranger's press is refused in its toast: {:?}",
        bot.fake.callback_toasts()
    );
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn the_command_menu_is_published_with_valid_names_only() {
    let bot = Bot::start().await;
    assert!(bot.fake.wait_until(Duration::from_secs(5), |f| !f.commands().is_empty()).await);
    assert_eq!(
        bot.fake.commands(),
        [("help".to_string(), "Show what I can do".to_string()), ("model".to_string(), "Switch the model".to_string())]
    );
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn photos_and_documents_are_saved_to_the_cache_and_oversized_ones_are_refused() {
    let bot = Bot::start().await;
    let alice = bot.fake.user(42, "alice");
    bot.fake.photo(42, &alice, vec![7u8; 300], Some("what is this?"));
    bot.fake.document(42, &alice, "../../etc/notes.txt", b"hello file".to_vec(), None);
    bot.fake.document(42, &alice, "big.bin", vec![0u8; 5000], Some("too big"));
    let events = bot.events(3).await;
    assert_eq!((events[0].kind, events[0].text.as_str()), (MessageKind::Photo, "what is this?"));
    let photo = std::path::Path::new(events[0].attachments[0].path.as_deref().unwrap());
    assert!(photo.starts_with(bot.media.path().join("images")));
    assert_eq!(std::fs::read(photo).unwrap(), vec![7u8; 300]);
    let doc = std::path::Path::new(events[1].attachments[0].path.as_deref().unwrap());
    assert!(doc.starts_with(bot.media.path().join("documents")), "a crafted file name stays inside the cache: {doc:?}");
    assert_eq!(std::fs::read(doc).unwrap(), b"hello file");
    let big = &events[2].attachments[0];
    assert_eq!((big.path.as_ref(), big.refused.as_ref()), (None, Some(&Refusal::TooLarge { limit_bytes: 1024 })), "{big:?}");
    assert_eq!(events[2].text, "too big", "the gateway words the refusal; the text is the user's alone");
    assert_eq!(bot.fake.call_count("getFile"), 2, "the oversized file was refused from its declared size");
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn a_strangers_attachments_are_never_fetched_but_the_message_is_still_stored() {
    let bot = Bot::start().await;
    let stranger = bot.fake.user(STRANGER, "mallory");
    let alice = bot.fake.user(42, "alice");
    bot.fake.photo(STRANGER, &stranger, vec![1u8; 300], Some("look"));
    bot.fake.document(STRANGER, &stranger, "payload.bin", vec![2u8; 300], None);
    bot.fake.document(42, &alice, "notes.txt", b"mine".to_vec(), None);
    let events = bot.events(3).await;
    let listed = [&events[0].attachments[0], &events[1].attachments[0]];
    assert!(listed.iter().all(|a| a.path.is_none() && a.refused.is_none()), "listed as declared, never fetched: {events:#?}");
    assert_eq!((listed[0].kind, listed[1].name.as_str()), (MessageKind::Photo, "payload.bin"));
    assert_eq!(events[0].text, "look", "the stranger's message reaches the gateway, which denies and logs it");
    assert_eq!(bot.fake.call_count("getFile"), 1, "only the allowed sender's file was looked up");
    assert_eq!(bot.fake.downloads().len(), 1, "only the allowed sender's file was downloaded");
    let saved = std::path::Path::new(events[2].attachments[0].path.as_deref().unwrap());
    assert_eq!(std::fs::read(saved).unwrap(), b"mine");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(saved).unwrap().permissions().mode() & 0o777, 0o600, "a saved file is private");
    let folder = saved.parent().unwrap();
    assert_eq!(std::fs::metadata(folder).unwrap().permissions().mode() & 0o777, 0o700, "and so is its folder");
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn an_update_the_inbox_refused_is_fetched_again() {
    let bot = Bot::start().await;
    bot.inbox.fail_with(Some(|| AcceptError::Storage("disk full (test)".into())));
    let alice = bot.fake.user(42, "alice");
    bot.fake.dm(&alice, "keep me");
    let run = bot.adapter.clone();
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        let mut bot = bot;
        let result = bot.task.take().unwrap().await.unwrap();
        (bot, result)
    })
    .await
    .expect("the run ends when the inbox refuses");
    let (bot, result) = ended;
    assert!(result.as_ref().is_err_and(|e| e.is_retryable()), "{result:?}");
    assert_eq!(bot.fake.pending_updates(), 1, "not confirmed to Telegram");
    // The supervisor's next run gets it again.
    bot.inbox.fail_with(None);
    let ctx = context(bot.inbox.clone(), bot.health.clone(), bot.stop.clone());
    let task = tokio::spawn(async move { run.run(ctx).await });
    let events = bot.events(1).await;
    assert_eq!(events[0].text, "keep me");
    assert!(bot.fake.wait_until(Duration::from_secs(5), |f| f.pending_updates() == 0).await);
    bot.stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_second_poller_is_a_recoverable_conflict_reported_as_degraded() {
    let bot = Bot::start().await;
    assert!(bot.fake.wait_until(Duration::from_secs(5), |f| f.call_count("getUpdates") >= 1).await);
    bot.fake.fail_next(FaultScope::Polls, 1, Fault::Conflict);
    let alice = bot.fake.user(42, "alice");
    bot.fake.dm(&alice, "wake the poll");
    let mut degraded = false;
    for _ in 0..300 {
        degraded |= bot.health.degraded_reason().is_some_and(|r| r.contains("409"));
        if degraded {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(degraded, "the conflict is visible in health");
    bot.fake.dm(&alice, "after the conflict");
    let events = bot.events(2).await;
    assert_eq!(events[1].text, "after the conflict");
    assert!(bot.health.degraded_reason().is_none(), "healthy again once polling works");
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn a_quiet_bot_is_connected_while_its_first_long_poll_waits() {
    let bot = Bot::start_with(FakeTelegram::start().await.unwrap(), |s| s.poll_timeout = Duration::from_secs(30)).await;
    assert!(bot.fake.wait_until(Duration::from_secs(5), |f| f.call_count("getMe") >= 1).await);
    let mut connected = false;
    for _ in 0..300 {
        connected = bot.health.is_connected();
        if connected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(connected, "connected once the token was accepted, not after the 30 s poll");
    assert_eq!(bot.fake.calls().iter().filter(|c| c.method == "getupdates" && c.status != 0).count(), 0, "the first poll still waits");
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn a_rejected_token_parks_the_adapter_without_printing_it() {
    let fake = FakeTelegram::start().await.unwrap();
    let bot = Bot::start_with(fake, |s| s.token = "999:WRONG-SECRET-abcdef".into()).await;
    let result = tokio::time::timeout(Duration::from_secs(5), async move {
        let mut bot = bot;
        bot.task.take().unwrap().await.unwrap()
    })
    .await
    .unwrap();
    let error = result.unwrap_err();
    assert!(!error.is_retryable(), "{error}");
    assert!(error.to_string().contains("TELEGRAM_BOT_TOKEN"));
    assert!(!error.to_string().contains("WRONG-SECRET"));
}

#[tokio::test]
async fn send_errors_are_classified_and_never_show_the_token() {
    let bot = Bot::start().await;
    let err = bot.adapter.send(&message("555", None, "to nowhere")).await.unwrap_err();
    assert!(matches!(err, SendError::NotFound(_)), "{err}");
    let alice = bot.fake.user(42, "alice");
    bot.fake.dm(&alice, "hi");
    bot.events(1).await;
    // A long flood wait goes back to the caller instead of blocking the send.
    bot.fake.fail_next(FaultScope::Method("sendMessage".into()), 1, Fault::RateLimited { retry_after: 30 });
    let err = bot.adapter.send(&message("42", None, "x")).await.unwrap_err();
    assert!(matches!(err, SendError::RateLimited { retry_after } if retry_after == Duration::from_secs(30)), "{err}");
    // A short one is waited out inside the send.
    bot.fake.fail_next(FaultScope::Method("sendMessage".into()), 2, Fault::RateLimited { retry_after: 0 });
    bot.adapter.send(&message("42", None, "after a short wait")).await.unwrap();
    assert_eq!(bot.fake.sent_to(42).iter().filter(|m| m.text == "after a short wait").count(), 1);
    bot.fake.fail_next(FaultScope::Method("sendMessage".into()), 1, Fault::Reset);
    let err = bot.adapter.send(&message("42", None, "x")).await.unwrap_err();
    assert!(matches!(err, SendError::Ambiguous(_)), "a cut connection may have delivered it: {err}");
    assert!(!err.to_string().contains("TEST-TOKEN"), "{err}");
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn a_clean_stop_confirms_what_was_accepted() {
    let bot = Bot::start().await;
    let alice = bot.fake.user(42, "alice");
    bot.fake.dm(&alice, "one");
    bot.events(1).await;
    let fake = bot.fake.clone();
    bot.stop().await.unwrap();
    assert_eq!(fake.pending_updates(), 0, "the last batch was confirmed before stopping");
}

#[tokio::test]
async fn files_go_out_as_photos_or_documents_with_their_caption() {
    let bot = Bot::start().await;
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("chart.png");
    std::fs::write(&chart, [0x89, b'P', b'N', b'G', 1, 2, 3]).unwrap();
    let data = dir.path().join("data.csv");
    std::fs::write(&data, "a,b\n1,2\n").unwrap();
    let mut photo = message("-100", None, "**the** chart");
    photo.file = Some(hermes_adapter::OutboundFile::new(chart, false));
    bot.adapter.send(&photo).await.unwrap();
    let mut document = message("-100", None, "");
    document.file = Some(hermes_adapter::OutboundFile::new(data, false));
    bot.adapter.send(&document).await.unwrap();
    let sent = bot.fake.sent_to(-100);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].kind, hermes_fakes::telegram::SentKind::Photo { len: 7 });
    assert_eq!(sent[0].caption.as_deref(), Some("the chart"), "the caption is rendered like a message");
    assert_eq!(sent[1].kind, hermes_fakes::telegram::SentKind::Document { file_name: "data.csv".into(), len: 8 });
    bot.stop().await.unwrap();
}
