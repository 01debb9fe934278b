//! The fake Slack over real HTTP and WebSocket, as the Slack adapter's tests rely on it: the Web
//! API's tokens, bodies, validation and faults; the external file upload; Socket Mode's hello,
//! delivery to one connection, acks, retries, disconnects and queued envelopes; and how the bot's
//! mrkdwn is displayed.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

use futures::{SinkExt, StreamExt};
use hermes_fakes::slack::{FakeSlack, SlFault, SlScope, SlackOptions};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

async fn call(slack: &FakeSlack, method: &str, token: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new().post(format!("{}{method}", slack.api_url())).bearer_auth(token).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn bot(slack: &FakeSlack, method: &str, body: Value) -> Value {
    call(slack, method, &slack.bot_token(), body).await.1
}

/// An `application/x-www-form-urlencoded` body (reqwest's `form` feature is not enabled here).
fn form_body(pairs: &[(&str, &str)]) -> String {
    let encode = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
                b' ' => "+".to_string(),
                b => format!("%{b:02X}"),
            })
            .collect()
    };
    pairs.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect::<Vec<_>>().join("&")
}

async fn fast_slack() -> FakeSlack {
    FakeSlack::start_with(SlackOptions { ack_timeout: Duration::from_millis(300), ..SlackOptions::default() }).await.unwrap()
}

async fn connect(slack: &FakeSlack) -> Ws {
    let (_, opened) = call(slack, "apps.connections.open", &slack.app_token(), json!({})).await;
    let (ws, _) = tokio_tungstenite::connect_async(opened["url"].as_str().unwrap()).await.unwrap();
    ws
}

/// The next text message as JSON (pings and pongs skipped), or None after `wait`.
async fn next_json(ws: &mut Ws, wait: Duration) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let message = tokio::time::timeout_at(deadline, ws.next()).await.ok()??.ok()?;
        if let Message::Text(text) = message {
            return Some(serde_json::from_str(text.as_str()).unwrap());
        }
    }
}

async fn connect_past_hello(slack: &FakeSlack) -> Ws {
    let mut ws = connect(slack).await;
    assert_eq!(next_json(&mut ws, Duration::from_secs(5)).await.unwrap()["type"], "hello");
    ws
}

async fn ack(ws: &mut Ws, envelope: &Value) {
    ws.send(Message::text(json!({"envelope_id": envelope["envelope_id"]}).to_string())).await.unwrap();
}

#[tokio::test]
async fn auth_test_and_bodies_as_json_form_and_query() {
    let slack = FakeSlack::start().await.unwrap();
    let me = bot(&slack, "auth.test", json!({})).await;
    assert_eq!((me["ok"].as_bool(), me["user_id"].as_str(), me["bot_id"].as_str()), (Some(true), Some("U0BOT"), Some("B0BOT")));
    assert_eq!(me["team_id"], "T0FAKE");

    let general = slack.channel("general");
    // A form body: `blocks` is a JSON document inside a form value.
    let blocks = json!([{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}]).to_string();
    let form: Value = reqwest::Client::new()
        .post(format!("{}chat.postMessage", slack.api_url()))
        .bearer_auth(slack.bot_token())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(&[("channel", general.as_str()), ("text", "from a form"), ("blocks", blocks.as_str()), ("unfurl_links", "false")]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(form["ok"], true, "{form}");
    let sent = slack.sent_to(&general);
    assert_eq!(sent[0].text, "from a form");
    assert_eq!(sent[0].blocks[0]["type"], "section");
    assert_eq!(sent[0].unfurl_links, Some(false));
    assert_eq!(slack.calls().last().unwrap().params["blocks"][0]["text"]["text"], "hi", "form JSON values are logged parsed");

    // A GET with a query string, as slack-morphism sends read methods; and `/api//method`.
    let info: Value = reqwest::Client::new()
        .get(format!("{}/conversations.info?channel={general}", slack.api_url()))
        .bearer_auth(slack.bot_token())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["channel"]["name"], "general");
    assert_eq!(info["channel"]["is_im"], false);
    assert!(info["channel"]["created"].is_u64());
    assert_eq!(slack.call_count("conversations.info"), 1);
}

#[tokio::test]
async fn tokens_are_checked_by_kind_and_unknown_methods_are_404() {
    let slack = FakeSlack::start().await.unwrap();
    let channel = slack.channel("general");
    let body = json!({"channel": channel, "text": "x"});
    let none: Value =
        reqwest::Client::new().post(format!("{}chat.postMessage", slack.api_url())).json(&body).send().await.unwrap().json().await.unwrap();
    assert_eq!(none, json!({"ok": false, "error": "not_authed"}));
    assert_eq!(call(&slack, "chat.postMessage", "xoxb-wrong", body.clone()).await, (200, json!({"ok": false, "error": "invalid_auth"})));
    assert_eq!(call(&slack, "chat.postMessage", &slack.app_token(), body.clone()).await.1["error"], "not_allowed_token_type");
    assert_eq!(call(&slack, "apps.connections.open", &slack.bot_token(), json!({})).await.1["error"], "not_allowed_token_type");
    let (_, opened) = call(&slack, "apps.connections.open", &slack.app_token(), json!({})).await;
    assert!(opened["url"].as_str().unwrap().starts_with("ws://127.0.0.1:"));
    assert_eq!(call(&slack, "chat.nonsense", &slack.bot_token(), json!({})).await, (404, json!({"ok": false, "error": "unknown_method"})));
    assert!(slack.sent().is_empty(), "refused calls post nothing");
    assert_eq!(slack.calls().iter().filter(|c| !c.ok).count(), 5);
}

#[tokio::test]
async fn post_message_validation_threads_and_increasing_ts() {
    let slack = FakeSlack::start().await.unwrap();
    let general = slack.channel("general");
    let alice = slack.user("U0100", "alice");
    assert_eq!(bot(&slack, "chat.postMessage", json!({"channel": "C404", "text": "x"})).await["error"], "channel_not_found");
    assert_eq!(bot(&slack, "chat.postMessage", json!({"channel": general, "text": ""})).await["error"], "no_text");
    let long = "a".repeat(40_001);
    assert_eq!(bot(&slack, "chat.postMessage", json!({"channel": general, "text": long})).await["error"], "msg_too_long");
    let at_limit = "a".repeat(40_000);
    assert_eq!(bot(&slack, "chat.postMessage", json!({"channel": general, "text": at_limit})).await["ok"], true);
    let bogus = bot(&slack, "chat.postMessage", json!({"channel": general, "text": "x", "thread_ts": "1.000001"})).await;
    assert_eq!(bogus["error"], "thread_not_found");

    let question = slack.channel_message(&general, &alice, "question", false);
    let reply = bot(
        &slack,
        "chat.postMessage",
        json!({"channel": general, "text": "answer", "thread_ts": question.ts,
        "metadata": {"event_type": "hermes", "event_payload": {"k": "v"}}}),
    )
    .await;
    assert_eq!(reply["message"]["thread_ts"], question.ts.as_str());
    assert_eq!(reply["message"]["user"], "U0BOT");
    let again = bot(&slack, "chat.postMessage", json!({"channel": general, "text": "more", "thread_ts": question.ts})).await;
    assert!(again["ts"].as_str().unwrap() > reply["ts"].as_str().unwrap(), "ts strictly increases");
    // Posting to a user id lands in the bot's DM with them.
    let dm = bot(&slack, "chat.postMessage", json!({"channel": "U0100", "text": "psst"})).await;
    assert_eq!(dm["channel"], slack.dm_channel(&alice).as_str());

    // History is newest first and top level only; replies are the thread oldest first.
    let history = bot(&slack, "conversations.history", json!({"channel": general})).await;
    let texts: Vec<&str> = history["messages"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts.len(), 2);
    assert_eq!(texts[0], "question");
    let thread = bot(&slack, "conversations.replies", json!({"channel": general, "ts": question.ts})).await;
    let texts: Vec<&str> = thread["messages"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["question", "answer", "more"]);
    assert!(thread["messages"][1].get("metadata").is_none(), "metadata only when asked for");
    let with_metadata =
        bot(&slack, "conversations.replies", json!({"channel": general, "ts": question.ts, "include_all_metadata": true})).await;
    assert_eq!(with_metadata["messages"][1]["metadata"]["event_type"], "hermes");
}

#[tokio::test]
async fn update_delete_reactions_users_and_dm_open() {
    let slack = FakeSlack::start().await.unwrap();
    let general = slack.channel("general");
    let alice = slack.user("U0100", "alice");
    let posted = bot(&slack, "chat.postMessage", json!({"channel": general, "text": "draft"})).await;
    let ts = posted["ts"].as_str().unwrap();
    let updated = bot(&slack, "chat.update", json!({"channel": general, "ts": ts, "text": "*final*"})).await;
    assert_eq!(updated["ok"], true, "{updated}");
    assert_eq!(bot(&slack, "chat.update", json!({"channel": general, "ts": "1.2", "text": "x"})).await["error"], "message_not_found");
    assert_eq!(bot(&slack, "chat.update", json!({"channel": general, "ts": ts, "text": ""})).await["error"], "no_text");
    let long = "b".repeat(40_001);
    assert_eq!(bot(&slack, "chat.update", json!({"channel": general, "ts": ts, "text": long})).await["error"], "msg_too_long");
    let sent = &slack.sent_to(&general)[0];
    assert_eq!((sent.text.as_str(), sent.edits.clone()), ("*final*", vec!["draft".to_string()]));
    assert_eq!((sent.shown.as_str(), sent.styles.clone()), ("final", vec!["bold".to_string()]));

    let reaction = json!({"channel": general, "timestamp": ts, "name": "eyes"});
    assert_eq!(bot(&slack, "reactions.add", reaction.clone()).await["ok"], true);
    assert_eq!(bot(&slack, "reactions.add", reaction.clone()).await["error"], "already_reacted");
    assert_eq!(slack.reactions(), vec![(general.clone(), ts.to_string(), "eyes".to_string())]);
    assert_eq!(bot(&slack, "reactions.remove", reaction.clone()).await["ok"], true);
    assert_eq!(bot(&slack, "reactions.remove", reaction).await["error"], "no_reaction");

    assert_eq!(bot(&slack, "chat.delete", json!({"channel": general, "ts": ts})).await["ok"], true);
    assert!(slack.sent_to(&general)[0].deleted);
    assert_eq!(bot(&slack, "chat.delete", json!({"channel": general, "ts": ts})).await["error"], "message_not_found");

    let user = bot(&slack, "users.info", json!({"user": "U0100"})).await;
    assert_eq!((user["user"]["name"].as_str(), user["user"]["is_bot"].as_bool()), (Some("alice"), Some(false)));
    assert_eq!(user["user"]["profile"]["display_name"], "alice");
    assert_eq!(bot(&slack, "users.info", json!({"user": "U0999"})).await["error"], "user_not_found");
    // slack-morphism sends `users` as a JSON array; the form style is a comma list.
    let opened = bot(&slack, "conversations.open", json!({"users": ["U0100"]})).await;
    let dm = opened["channel"]["id"].as_str().unwrap().to_string();
    assert!(dm.starts_with('D'));
    assert_eq!(dm, slack.dm_channel(&alice));
    let info = bot(&slack, "conversations.info", json!({"channel": dm})).await;
    assert_eq!((info["channel"]["is_im"].as_bool(), info["channel"]["user"].as_str()), (Some(true), Some("U0100")));
}

#[tokio::test]
async fn faults_rate_limit_cut_before_and_after_apply() {
    let slack = FakeSlack::start().await.unwrap();
    let general = slack.channel("general");
    let body = json!({"channel": general, "text": "hello"});
    slack.fail_next(SlScope::PostMessage, 1, SlFault::RateLimited { retry_after_secs: 7 });
    let response = reqwest::Client::new()
        .post(format!("{}chat.postMessage", slack.api_url()))
        .bearer_auth(slack.bot_token())
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    assert_eq!(response.json::<Value>().await.unwrap(), json!({"ok": false, "error": "ratelimited"}));
    assert!(slack.sent().is_empty(), "a 429 posts nothing");

    slack.fail_next(SlScope::Method("chat.postMessage".into()), 1, SlFault::ServerError);
    assert_eq!(call(&slack, "chat.postMessage", &slack.bot_token(), body.clone()).await.0, 500);

    let post =
        || reqwest::Client::new().post(format!("{}chat.postMessage", slack.api_url())).bearer_auth(slack.bot_token()).json(&body).send();
    slack.fail_next(SlScope::AnyMethod, 1, SlFault::CutBeforeApply);
    let cut = match post().await {
        Ok(response) => response.bytes().await.is_err(),
        Err(_) => true,
    };
    assert!(cut, "the answer is lost");
    assert!(slack.sent().is_empty());
    slack.fail_next(SlScope::PostMessage, 1, SlFault::CutAfterApply);
    let cut = match post().await {
        Ok(response) => response.bytes().await.is_err(),
        Err(_) => true,
    };
    assert!(cut, "the answer is lost");
    assert_eq!(slack.sent().len(), 1, "but the message was posted");
    assert_eq!(slack.calls().iter().map(|c| c.status).collect::<Vec<_>>(), [429, 500, 0, 0]);

    // Rules run out; latency delays.
    slack.set_latency(SlScope::Update, Duration::from_millis(200));
    assert_eq!(bot(&slack, "chat.postMessage", body.clone()).await["ok"], true);
    let ts = slack.sent()[0].ts.clone();
    let started = std::time::Instant::now();
    assert_eq!(bot(&slack, "chat.update", json!({"channel": general, "ts": ts, "text": "x"})).await["ok"], true);
    assert!(started.elapsed() >= Duration::from_millis(200));
    slack.clear_faults();
    slack.fail_fraction(SlScope::AnyMethod, 1.0, SlFault::ServerError);
    assert_eq!(call(&slack, "auth.test", &slack.bot_token(), json!({})).await.0, 500);
}

#[tokio::test]
async fn external_upload_pair_attaches_files_to_a_message() {
    let slack = FakeSlack::start().await.unwrap();
    let general = slack.channel("general");
    let client = reqwest::Client::new();
    // slack-morphism asks for the URL with a GET and query parameters.
    let url: Value = client
        .get(format!("{}files.getUploadURLExternal?filename=notes.txt&length=5", slack.api_url()))
        .bearer_auth(slack.bot_token())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let file_id = url["file_id"].as_str().unwrap().to_string();
    assert!(file_id.starts_with('F'));
    let premature = bot(&slack, "files.completeUploadExternal", json!({"files": [{"id": file_id}], "channel_id": general})).await;
    assert_eq!(premature["error"], "invalid_arguments", "bytes not uploaded yet");
    let uploaded = client.post(url["upload_url"].as_str().unwrap()).body("hello").send().await.unwrap();
    assert_eq!(uploaded.status().as_u16(), 200);
    assert_eq!(uploaded.text().await.unwrap(), "OK - 5");
    let done = bot(
        &slack,
        "files.completeUploadExternal",
        json!({"files": [{"id": file_id, "title": "Notes"}], "channel_id": general, "initial_comment": "here"}),
    )
    .await;
    assert_eq!(done["files"][0]["name"], "notes.txt");
    let sent = slack.sent_to(&general);
    assert_eq!((sent[0].text.as_str(), sent[0].files.clone()), ("here", vec![("notes.txt".to_string(), 5)]));
    let history = bot(&slack, "conversations.history", json!({"channel": general})).await;
    assert_eq!(history["messages"][0]["files"][0]["id"], file_id.as_str(), "clients need the file id");
    assert_eq!(bot(&slack, "files.completeUploadExternal", json!({"files": [{"id": "F404"}]})).await["error"], "file_not_found");

    // A multipart upload counts the file part's bytes.
    let url = bot(&slack, "files.getUploadURLExternal", json!({"filename": "a.bin", "length": 3})).await;
    let body = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n\r\nabc\r\n--XyZ--\r\n";
    let uploaded = client
        .post(url["upload_url"].as_str().unwrap())
        .header("content-type", "multipart/form-data; boundary=XyZ")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(uploaded.text().await.unwrap(), "OK - 3");
}

#[tokio::test]
async fn hello_first_and_each_envelope_to_one_of_two_connections() {
    // Slack's 3 s ack timeout: no retry may blur "exactly one connection".
    let slack = FakeSlack::start().await.unwrap();
    let alice = slack.user("U0100", "alice");
    let mut first = connect(&slack).await;
    let hello = next_json(&mut first, Duration::from_secs(5)).await.unwrap();
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["connection_info"]["app_id"], "A0FAKE");
    assert_eq!(hello["debug_info"]["host"], "fake-slack");
    let mut second = connect_past_hello(&slack).await;
    assert_eq!((slack.open_connections(), slack.connections_opened()), (2, 2));

    let injected = slack.dm(&alice, "hi there");
    let on_first = next_json(&mut first, Duration::from_millis(300)).await;
    let on_second = next_json(&mut second, Duration::from_millis(300)).await;
    assert!(on_first.is_some() != on_second.is_some(), "exactly one connection gets it: {on_first:?} {on_second:?}");
    let envelope = on_first.or(on_second).unwrap();
    assert_eq!(envelope["type"], "events_api");
    assert_eq!(envelope["envelope_id"], injected.envelope_ids[0].as_str());
    assert_eq!(envelope["payload"]["event_id"], injected.event_ids[0].as_str());
    let event = &envelope["payload"]["event"];
    assert_eq!((event["type"].as_str(), event["channel_type"].as_str()), (Some("message"), Some("im")));
    assert_eq!(
        (event["user"].as_str(), event["text"].as_str(), event["ts"].as_str()),
        (Some("U0100"), Some("hi there"), Some(injected.ts.as_str()))
    );
    assert_eq!(slack.deliveries(), 1);
}

#[tokio::test]
async fn an_ack_stops_redelivery_and_a_missing_one_gets_a_retry() {
    let slack = fast_slack().await;
    let alice = slack.user("U0100", "alice");
    let mut ws = connect_past_hello(&slack).await;

    let acked = slack.dm(&alice, "one");
    let envelope = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    ack(&mut ws, &envelope).await;
    assert!(slack.wait_until(Duration::from_secs(2), |f| f.acked(&acked.envelope_ids[0])).await);
    assert!(next_json(&mut ws, Duration::from_millis(700)).await.is_none(), "acked: no retry");
    assert_eq!(slack.deliveries_of(&acked.event_ids[0]), 1);

    let unacked = slack.dm(&alice, "two");
    let original = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    let retry = next_json(&mut ws, Duration::from_secs(2)).await.expect("redelivered after the ack timeout");
    assert_eq!(retry["retry_attempt"], 1);
    assert_eq!(retry["retry_reason"], "timeout");
    assert_eq!(retry["payload"]["event_id"], unacked.event_ids[0].as_str());
    assert_ne!(retry["envelope_id"], original["envelope_id"]);
    ack(&mut ws, &retry).await;
    assert!(next_json(&mut ws, Duration::from_millis(700)).await.is_none());
    assert_eq!(slack.deliveries_of(&unacked.event_ids[0]), 2);

    // A lost ack is as good as none.
    slack.lose_next_acks(1);
    slack.dm(&alice, "three");
    let lost = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    ack(&mut ws, &lost).await;
    let retry = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    assert_eq!(retry["retry_attempt"], 1);
    assert!(!slack.acked(lost["envelope_id"].as_str().unwrap()));

    // redeliver() makes a retry on demand.
    assert!(slack.redeliver(&acked.event_ids[0]));
    let again = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    assert_eq!((again["payload"]["event_id"].as_str(), again["retry_attempt"].as_u64()), (Some(acked.event_ids[0].as_str()), Some(1)));
    assert!(!slack.redeliver("Ev-unknown"));
}

#[tokio::test]
async fn a_mention_in_a_channel_is_two_envelopes() {
    let slack = fast_slack().await;
    let alice = slack.user("U0100", "alice");
    let general = slack.channel("general");
    let mut ws = connect_past_hello(&slack).await;
    let injected = slack.channel_message(&general, &alice, "help", true);
    assert_eq!((injected.event_ids.len(), injected.envelope_ids.len()), (2, 2));
    assert_ne!(injected.event_ids[0], injected.event_ids[1]);
    let message = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    let mention = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    ack(&mut ws, &message).await;
    ack(&mut ws, &mention).await;
    assert_eq!(message["payload"]["event"]["type"], "message");
    assert_eq!(message["payload"]["event"]["channel_type"], "channel");
    assert_eq!(message["payload"]["event"]["text"], "<@U0BOT> help");
    assert_eq!(mention["payload"]["event"]["type"], "app_mention");
    assert_eq!(mention["payload"]["event"]["ts"], message["payload"]["event"]["ts"]);
    assert_ne!(mention["payload"]["event_id"], message["payload"]["event_id"]);

    // Without a mention only the message event comes; a thread reply carries thread_ts.
    let plain = slack.thread_message(&general, &injected.ts, &alice, "more", false);
    assert_eq!(plain.event_ids.len(), 1);
    let reply = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    assert_eq!(reply["payload"]["event"]["thread_ts"], injected.ts.as_str());
    assert_eq!(reply["payload"]["event"]["parent_user_id"], "U0100");
}

#[tokio::test]
async fn buttons_and_slash_commands_have_slacks_shapes() {
    let slack = fast_slack().await;
    let alice = slack.user("U0100", "alice");
    let general = slack.channel("general");
    let mut ws = connect_past_hello(&slack).await;
    let blocks = json!([{"type": "actions", "block_id": "approval", "elements": [
        {"type": "button", "action_id": "approve", "value": "yes", "text": {"type": "plain_text", "text": "Approve"}}]}]);
    let posted = bot(&slack, "chat.postMessage", json!({"channel": general, "text": "ok?", "blocks": blocks})).await;
    let ts = posted["ts"].as_str().unwrap();
    slack.press_button(&alice, &general, ts, "approve", "yes");
    let press = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    assert_eq!((press["type"].as_str(), press["payload"]["type"].as_str()), (Some("interactive"), Some("block_actions")));
    let action = &press["payload"]["actions"][0];
    assert_eq!(
        (action["block_id"].as_str(), action["text"]["text"].as_str(), action["value"].as_str()),
        (Some("approval"), Some("Approve"), Some("yes"))
    );
    assert_eq!(press["payload"]["container"]["message_ts"], ts);
    assert_eq!(press["payload"]["message"]["text"], "ok?");
    assert_eq!(press["payload"]["user"]["id"], "U0100");

    let command = slack.slash_command(&alice, &general, "/hermes", "sethome");
    let envelope = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    assert_eq!((envelope["type"].as_str(), envelope["accepts_response_payload"].as_bool()), (Some("slash_commands"), Some(true)));
    assert_eq!((envelope["payload"]["command"].as_str(), envelope["payload"]["text"].as_str()), (Some("/hermes"), Some("sethome")));
    let reply = json!({"envelope_id": envelope["envelope_id"], "payload": {"text": "done"}});
    ws.send(Message::text(reply.to_string())).await.unwrap();
    assert!(slack.wait_until(Duration::from_secs(2), |f| f.acked(&command.envelope_ids[0])).await);
    assert_eq!(slack.ack_payload(&command.envelope_ids[0]).unwrap()["text"], "done");
    // Raw envelopes arrive as given, with an envelope id added.
    slack.send_raw_envelope(json!({"type": "some_new_envelope_kind", "payload": {"whatever": true}}));
    let raw = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    assert_eq!((raw["type"].as_str(), raw["payload"]["whatever"].as_bool()), (Some("some_new_envelope_kind"), Some(true)));
    assert!(raw["envelope_id"].is_string());
    // Neither interactions nor raw envelopes are retried when unacknowledged (Slack shows the
    // user an error for an interaction instead).
    assert!(next_json(&mut ws, Duration::from_millis(700)).await.is_none());
}

#[tokio::test]
async fn disconnect_then_close_and_queued_envelopes_after_reconnect() {
    let slack = fast_slack().await;
    let alice = slack.user("U0100", "alice");
    let mut ws = connect_past_hello(&slack).await;
    assert!(slack.send_disconnect("refresh_requested"));
    let disconnect = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    assert_eq!((disconnect["type"].as_str(), disconnect["reason"].as_str()), (Some("disconnect"), Some("refresh_requested")));
    assert!(!slack.connected(), "a connection told to leave takes no envelopes");
    // The client does not close: the fake does, about a second later, with a close frame.
    let closed = tokio::time::timeout(Duration::from_secs(3), ws.next()).await.unwrap();
    assert!(matches!(closed, Some(Ok(Message::Close(_)))), "{closed:?}");
    assert!(slack.wait_until(Duration::from_secs(2), |f| f.open_connections() == 0).await);

    // Events while nobody is connected wait, then arrive after hello on the next connection.
    let queued = slack.dm(&alice, "while away");
    assert_eq!(slack.deliveries(), 0);
    let mut ws = connect_past_hello(&slack).await;
    let envelope = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    assert_eq!(envelope["envelope_id"], queued.envelope_ids[0].as_str());

    // Tickets are single use, and unknown ones are refused before the upgrade.
    let (_, opened) = call(&slack, "apps.connections.open", &slack.app_token(), json!({})).await;
    let url = opened["url"].as_str().unwrap();
    assert!(tokio_tungstenite::connect_async(url).await.is_ok());
    assert!(tokio_tungstenite::connect_async(url).await.is_err());
    let http = url.replace("ws://", "http://");
    assert_eq!(reqwest::get(format!("{http}x")).await.unwrap().status().as_u16(), 401);
    slack.refuse_connections(true);
    let (_, opened) = call(&slack, "apps.connections.open", &slack.app_token(), json!({})).await;
    assert!(tokio_tungstenite::connect_async(opened["url"].as_str().unwrap()).await.is_err());
}

#[tokio::test]
async fn dropped_and_frozen_connections() {
    let slack = fast_slack().await;
    let alice = slack.user("U0100", "alice");
    let mut ws = connect_past_hello(&slack).await;
    assert!(slack.drop_connections());
    let next = tokio::time::timeout(Duration::from_secs(2), ws.next()).await.unwrap();
    assert!(!matches!(next, Some(Ok(Message::Close(_)))), "no close frame: {next:?}");
    assert!(!slack.connected());
    // Said right after the drop: waits for the next connection, first time round.
    let waiting = slack.dm(&alice, "after the drop");
    let mut ws = connect_past_hello(&slack).await;
    let envelope = next_json(&mut ws, Duration::from_secs(2)).await.unwrap();
    assert_eq!((envelope["envelope_id"].as_str(), envelope["retry_attempt"].as_u64()), (Some(waiting.envelope_ids[0].as_str()), Some(0)));
    ack(&mut ws, &envelope).await;
    drop(ws);
    assert!(slack.wait_until(Duration::from_secs(2), |f| f.open_connections() == 0).await);

    let mut ws = connect_past_hello(&slack).await;
    ws.send(Message::Ping(vec![1].into())).await.unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(2), ws.next()).await.unwrap();
    assert!(matches!(pong, Some(Ok(Message::Pong(_)))), "{pong:?}");
    slack.stop_answering_pings();
    assert!(!slack.connected());
    ws.send(Message::Ping(vec![2].into())).await.unwrap();
    let injected = slack.dm(&alice, "lost?");
    assert!(tokio::time::timeout(Duration::from_millis(500), ws.next()).await.is_err(), "neither pong nor envelope");
    // The event waits for a healthy connection.
    let mut fresh = connect_past_hello(&slack).await;
    let envelope = next_json(&mut fresh, Duration::from_secs(2)).await.unwrap();
    assert_eq!(envelope["payload"]["event_id"], injected.event_ids[0].as_str());
}

#[tokio::test]
async fn shown_text_follows_slacks_mrkdwn() {
    let slack = FakeSlack::start().await.unwrap();
    let general = slack.channel("general");
    slack.user("U0100", "alice");
    let text = "*Done* for <@U0100>: see <https://x.io|the report> and `a_b*c` &amp; snake_case_name";
    bot(&slack, "chat.postMessage", json!({"channel": general, "text": text})).await;
    let sent = &slack.sent_to(&general)[0];
    assert_eq!(sent.shown, "Done for @alice: see the report and a_b*c & snake_case_name");
    assert_eq!(sent.styles, ["bold", "text_link", "code"]);
    bot(&slack, "chat.postMessage", json!({"channel": general, "text": "**not** _it_", "mrkdwn": false})).await;
    let raw = &slack.sent_to(&general)[1];
    assert_eq!((raw.shown.as_str(), raw.styles.len()), ("**not** _it_", 0));
}
