//! `/platform` from chat: an admin (an API-server client is one) pauses the webhook adapter, which
//! then receives nothing, and resumes it, which brings deliveries back. Pausing the platform the
//! admin talks on is refused.

use crate::support::{API_KEY, Setup};
use crate::webhook::{rig, sign};
use serde_json::json;
use std::time::Duration;

const ROUTE_SECRET: &str = "deploy-route-secret-42";

async fn say(setup: &Setup, text: &str) -> String {
    let answer: serde_json::Value = reqwest::Client::new()
        .post(setup.api("/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .header("X-Hermes-Session-Id", "ops")
        .json(&json!({"messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json answer");
    answer["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_string()
}

/// POST a signed delivery; `Err` when nothing accepts the connection.
async fn try_deliver(setup: &Setup, delivery_id: &str) -> Result<u16, reqwest::Error> {
    let body = json!({"service": {"name": "billing"}, "status": delivery_id}).to_string();
    let timestamp = chrono::Utc::now().timestamp().to_string();
    let signature = sign(ROUTE_SECRET, format!("{timestamp}.{body}").as_bytes());
    let response = reqwest::Client::new()
        .post(setup.webhook("/webhooks/deploy"))
        .header("Content-Type", "application/json")
        .header("X-Request-ID", delivery_id)
        .header("X-Webhook-Timestamp", timestamp)
        .header("X-Webhook-Signature-V2", signature)
        .timeout(Duration::from_secs(5))
        .body(body)
        .send()
        .await?;
    Ok(response.status().as_u16())
}

#[tokio::test(flavor = "multi_thread")]
async fn pausing_a_platform_stops_its_deliveries_and_resuming_brings_them_back() {
    let (llm, receiver, setup) = rig().await;
    let _gateway = setup.start().await;

    let list = say(&setup, "/platform list").await;
    assert!(list.contains("api_server — connected") && list.contains("webhook — connected"), "{list}");
    let refused = say(&setup, "/platform pause api_server").await;
    assert!(refused.contains("Not pausing api_server"), "pausing the platform we talk on is refused: {refused}");
    let unknown = say(&setup, "/platform pause telegramm").await;
    assert!(unknown.contains("Known: api_server, webhook"), "{unknown}");

    let paused = say(&setup, "/platform pause webhook").await;
    assert!(paused.contains("webhook paused"), "{paused}");
    let mut list = String::new();
    for _ in 0..100 {
        list = say(&setup, "/platform list").await;
        if list.contains("webhook — paused") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(list.contains("webhook — paused"), "{list}");
    assert!(try_deliver(&setup, "while-paused").await.is_err(), "the paused webhook still accepts deliveries");
    assert_eq!(llm.request_count(), 0, "nothing reached the agent while paused");

    let resumed = say(&setup, "/platform resume webhook").await;
    assert!(resumed.contains("webhook resumed"), "{resumed}");
    let mut accepted = None;
    for _ in 0..100 {
        if let Ok(status) = try_deliver(&setup, "after-resume").await {
            accepted = Some(status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(accepted, Some(202), "the resumed webhook accepts deliveries again");
    assert!(receiver.wait_for(1, Duration::from_secs(20)).await, "the resumed delivery ran and was answered");
}
