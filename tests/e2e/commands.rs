//! Slash commands and the busy policy as an API client meets them: commands are answered by the
//! gateway and never reach the model; a message sent while a turn runs interrupts it or queues.

use crate::support::{API_KEY, Setup};
use hermes_fakes::{FakeLlm, Reply};
use serde_json::{Value, json};
use std::time::Duration;

async fn say(setup: &Setup, conversation: &str, text: &str) -> Value {
    say_owned(setup.api(""), conversation.to_string(), text.to_string()).await
}

/// [`say`] with owned inputs, to run in a spawned task beside another request.
async fn say_owned(api_base: String, conversation: String, text: String) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{api_base}/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .header("X-Hermes-Session-Id", conversation)
        .json(&json!({"messages": [{"role": "user", "content": &text}]}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200, "{text}");
    response.json().await.expect("json answer")
}

fn content(answer: &Value) -> &str {
    answer["choices"][0]["message"]["content"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_are_answered_by_the_gateway_and_never_reach_the_model() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let _gateway = setup.start().await;

    let help = say(&setup, "c1", "/help").await;
    for name in ["/new", "/status", "/stop", "/queue", "/whoami", "/commands"] {
        assert!(content(&help).contains(name), "/help lists {name}: {}", content(&help));
    }
    let unknown = say(&setup, "c1", "/frobnicate now").await;
    assert!(content(&unknown).starts_with("Unknown command `/frobnicate`"), "{}", content(&unknown));
    let whoami = say(&setup, "c1", "/WHOAMI@hermes_bot").await;
    assert!(content(&whoami).contains("api_server"), "case-insensitive, @botname stripped: {}", content(&whoami));
    assert_eq!(llm.request_count(), 0, "no command reached the model");

    // A path is a message, not a command.
    let path = say(&setup, "c1", "/usr/bin/env is missing").await;
    assert_eq!(content(&path), "echo: /usr/bin/env is missing");

    let status = say(&setup, "c1", "/status").await;
    assert!(content(&status).contains("Session ID"), "{}", content(&status));
    assert!(content(&status).contains("Messages:** 2"), "{}", content(&status));

    // /new starts a fresh conversation: the model no longer sees the old one.
    say(&setup, "c1", "the code word is walrus").await;
    let reset = say(&setup, "c1", "/reset").await;
    assert!(content(&reset).contains("Session reset"), "{}", content(&reset));
    say(&setup, "c1", "what was the code word?").await;
    let last = llm.requests().last().cloned().unwrap();
    assert!(!last.messages().iter().any(|(_, c)| c.contains("walrus")), "{:?}", last.messages());
    assert_eq!(llm.request_count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_during_a_turn_interrupts_it_by_default() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let _gateway = setup.start().await;

    llm.push(Reply::text("a very slow answer").delayed(Duration::from_secs(30)));
    let first = tokio::spawn(say_owned(setup.api(""), "busy".into(), "take your time".into()));
    assert!(llm.wait_for_requests(1, Duration::from_secs(20)).await);
    let second = say(&setup, "busy", "actually, do this instead").await;
    assert_eq!(content(&second), "echo: actually, do this instead");
    let first = first.await.unwrap();
    assert_eq!(first["choices"][0]["finish_reason"], "interrupted", "{first}");
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_mode_answers_messages_in_order_after_the_running_turn() {
    let llm = FakeLlm::start().await;
    let mut setup = Setup::new(&llm.base_url());
    setup.set("HERMES_GATEWAY_BUSY_INPUT_MODE", "queue");
    let _gateway = setup.start().await;

    llm.push(Reply::text("first answer").delayed(Duration::from_millis(800)));
    let first = tokio::spawn(say_owned(setup.api(""), "queued".into(), "first".into()));
    assert!(llm.wait_for_requests(1, Duration::from_secs(20)).await);
    let second = say(&setup, "queued", "second").await;
    assert_eq!(content(&second), "echo: second");
    let first = first.await.unwrap();
    assert_eq!(first["choices"][0]["message"]["content"], "first answer", "the running turn was not interrupted");
    let history: Vec<String> = llm.requests()[1].messages().into_iter().filter(|(r, _)| r != "system").map(|(_, c)| c).collect();
    assert_eq!(history, ["first", "first answer", "second"], "the queued message ran after the first turn finished");
}
