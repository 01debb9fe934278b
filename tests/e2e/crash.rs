//! A crash in the middle of a turn: kill -9 while the model hangs; after the restart the
//! accepted event is replayed and answered exactly once.

use crate::support::{Setup, count, eventually, is_fenced, open_db, unfenced};
use crate::webhook::{deliver, rig, route_config};
use hermes_fakes::{FakeLlm, Receiver, Reply};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_mid_turn_replays_the_event_and_answers_once() {
    let (llm, receiver, setup) = rig().await;
    let body = json!({"service": {"name": "payments"}, "status": "ok"}).to_string();

    let mut first = setup.start().await;
    llm.push(Reply::Hang);
    assert_eq!(deliver(&setup, &body, "crash-1", "deploy-route-secret-42").await.status(), 202);
    assert!(llm.wait_for_requests(1, Duration::from_secs(20)).await, "the turn reached the model");
    let killed = first.signal(libc::SIGKILL).await;
    assert_eq!(killed.code(), None, "killed by a signal");
    {
        let db = open_db(&setup.state_db());
        // Webhook events are keyed by route and signed body (the delivery id is not in the key).
        assert_eq!(count(&db, "SELECT count(*) FROM inbox WHERE event_id LIKE 'webhook:deploy:%' AND state = 'processing'", []), 1);
    }
    assert!(receiver.received().is_empty());

    // Restart: the event is replayed (the fake now answers at once).
    let second = setup.start().await;
    assert!(receiver.wait_for(1, Duration::from_secs(20)).await, "the replayed turn is answered:\n{}", second.log_text());
    let answer = receiver.received()[0].body["text"].as_str().unwrap_or_default().to_owned();
    assert_eq!(unfenced(&answer), "echo: Deploy of payments finished: ok");
    assert!(is_fenced(&answer, "payments"), "payload values reach the model fenced: {answer}");
    assert!(second.log_text().contains("did not stop cleanly"), "the unclean stop is reported");

    // A redelivery by the sender after the restart is still a duplicate.
    let again = deliver(&setup, &body, "crash-1", "deploy-route-secret-42").await;
    assert!(again.status().is_success());
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(receiver.received().len(), 1, "answered exactly once");
    assert_eq!(llm.request_count(), 2, "one hung attempt, one replay");

    let db = open_db(&setup.state_db());
    assert!(eventually(Duration::from_secs(5), || count(&db, "SELECT count(*) FROM inbox WHERE state = 'done'", []) == 1).await);
    assert_eq!(count(&db, "SELECT count(*) FROM messages WHERE role = 'user'", []), 1, "the user message is stored once");
    assert_eq!(count(&db, "SELECT count(*) FROM messages WHERE role = 'assistant'", []), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_lets_a_running_turn_finish_then_exits_0() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let mut gateway = setup.start().await;
    llm.push(Reply::text("finished in time").delayed(Duration::from_millis(800)));
    let request = tokio::spawn({
        let url = setup.api("/v1/chat/completions");
        async move {
            reqwest::Client::new()
                .post(url)
                .bearer_auth(crate::support::API_KEY)
                .json(&json!({"messages": [{"role": "user", "content": "slow one"}]}))
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    });
    assert!(llm.wait_for_requests(1, Duration::from_secs(20)).await);
    let exit = gateway.signal(libc::SIGTERM).await;
    let answer = request.await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "finished in time", "the in-flight turn was completed");
    assert_eq!(exit.code(), Some(0), "{}", gateway.log_text());
}

#[tokio::test(flavor = "multi_thread")]
async fn drain_timeout_keeps_the_unfinished_turn_for_the_next_start() {
    let llm = FakeLlm::start().await;
    let receiver = Receiver::start().await;
    let setup = Setup::new(&llm.base_url());
    setup.write_config(&format!("{}gateway:\n  drain_timeout_secs: 1\n", route_config(&receiver)));
    let body = json!({"service": {"name": "drain"}, "status": "ok"}).to_string();

    let mut first = setup.start().await;
    llm.push(Reply::Hang);
    assert_eq!(deliver(&setup, &body, "drain-1", "deploy-route-secret-42").await.status(), 202);
    assert!(llm.wait_for_requests(1, Duration::from_secs(20)).await);
    let exit = first.signal(libc::SIGTERM).await;
    assert_eq!(exit.code(), Some(0), "{}", first.log_text());
    assert!(first.log_text().contains("drain timeout"), "{}", first.log_text());
    assert!(receiver.received().is_empty());

    let second = setup.start().await;
    assert!(receiver.wait_for(1, Duration::from_secs(20)).await, "{}", second.log_text());
    let answer = receiver.received()[0].body["text"].as_str().unwrap_or_default().to_owned();
    assert_eq!(unfenced(&answer), "echo: Deploy of drain finished: ok");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), 1);
}
