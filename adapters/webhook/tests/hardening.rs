//! Attacks on the webhook listener, each run against the real listener on loopback: a captured
//! delivery replayed with a fresh delivery id, signature guessing, requests from web pages, DNS
//! rebinding of an unsigned route, and answers redirected to another host.

mod support;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use hermes_adapter::{ChatTarget, OutboundMessage, Platform, PlatformAdapter, SendError};
use hermes_webhook::{INSECURE_NO_AUTH, WebhookAdapter};
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{SECRET, github_post, hmac_hex, now, route, settings, start};

#[tokio::test]
async fn a_captured_delivery_replayed_with_a_fresh_delivery_id_is_a_duplicate() {
    let running = start(settings(&[("gh", route("{action}", "log"))])).await;
    let body = r#"{"action": "deploy production"}"#;
    let (first, _, _) = github_post(&running, "gh", body, "gh-delivery-1", "push").await;
    assert_eq!(first, StatusCode::ACCEPTED);

    // The attacker has the signed body and its signature, and invents a new delivery id.
    let (replay, _, answer) = github_post(&running, "gh", body, "attacker-chosen-id", "push").await;
    assert_eq!(replay, StatusCode::OK, "{answer}");
    assert_eq!(answer["status"], "duplicate");
    assert_eq!(answer["delivery_id"], "attacker-chosen-id", "the id is only echoed");
    assert_eq!(running.sink.events().len(), 1, "the replay never reached the inbox");

    // Under V2 the same holds within the timestamp window, and the sender's own retry, signed
    // again with a new timestamp, is recognised as the same delivery as well.
    let v2_body = r#"{"action": "rotate keys"}"#;
    let v2 = |ts: String, request_id: &'static str| {
        let signature = hmac_hex(SECRET, &[ts.as_bytes(), b".", v2_body.as_bytes()]);
        running
            .http
            .post(running.url("gh"))
            .header("Content-Type", "application/json")
            .header("X-Webhook-Timestamp", ts)
            .header("X-Webhook-Signature-V2", signature)
            .header("X-Request-ID", request_id)
            .body(v2_body)
            .send()
    };
    let ts = (now() - 5).to_string();
    assert_eq!(v2(ts.clone(), "v2-1").await.expect("request").status(), 202);
    for (ts, id) in [(ts, "v2-forged"), (now().to_string(), "v2-1")] {
        let again = v2(ts, id).await.expect("request");
        assert_eq!(again.status(), 200, "{id}");
        assert_eq!(again.json::<serde_json::Value>().await.expect("json")["status"], "duplicate");
    }
    assert_eq!(running.sink.events().len(), 2);
    running.stop().await;
}

/// A client whose requests come from `127.0.0.2`, another peer than the tests' `127.0.0.1`.
fn client_from_another_address() -> reqwest::Client {
    reqwest::Client::builder().local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))).build().expect("client")
}

#[tokio::test]
async fn a_peer_guessing_signatures_is_locked_out_even_with_a_good_one() {
    let running = start(settings(&[("gh", route("{n}", "log"))])).await;
    for guess in 0..10 {
        let body = format!(r#"{{"n": {guess}}}"#);
        let forged = format!("sha256={}", hmac_hex(&format!("guess-{guess}"), &[body.as_bytes()]));
        let response = running
            .http
            .post(running.url("gh"))
            .header("Content-Type", "application/json")
            .header("X-Hub-Signature-256", forged)
            .body(body)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 401, "guess {guess}");
    }
    let (status, headers, answer) = github_post(&running, "gh", r#"{"n": "genuine"}"#, "real-1", "push").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{answer}");
    let retry_after: u64 = headers[header::RETRY_AFTER].to_str().expect("ascii").parse().expect("seconds");
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert!(answer["error"].as_str().is_some_and(|e| e.contains("try again")), "{answer}");
    assert!(running.sink.events().is_empty());

    // The real sender, from another address, is not affected.
    let body = r#"{"n": "from the real sender"}"#;
    let signature = format!("sha256={}", hmac_hex(SECRET, &[body.as_bytes()]));
    let other = client_from_another_address()
        .post(running.url("gh"))
        .header("Content-Type", "application/json")
        .header("X-Hub-Signature-256", signature)
        .body(body)
        .send()
        .await
        .expect("request");
    assert_eq!(other.status(), 202);
    assert_eq!(running.sink.events().len(), 1);
    running.stop().await;
}

#[tokio::test]
async fn requests_a_web_page_can_send_are_refused() {
    let running = start(settings(&[("gh", route("{x}", "log"))])).await;
    let body = r#"{"x": "from a page"}"#;
    let signature = format!("sha256={}", hmac_hex(SECRET, &[body.as_bytes()]));
    let signed = |content_type: Option<&'static str>| {
        let mut request = running.http.post(running.url("gh")).header("X-Hub-Signature-256", signature.clone()).body(body);
        if let Some(content_type) = content_type {
            request = request.header("Content-Type", content_type);
        }
        request
    };
    for content_type in [Some("text/plain;charset=UTF-8"), Some("application/x-www-form-urlencoded"), None] {
        let response = signed(content_type).send().await.expect("request");
        assert_eq!(response.status(), 415, "{content_type:?}");
        let answer: serde_json::Value = response.json().await.expect("json");
        assert!(answer["error"].as_str().is_some_and(|e| e.contains("application/json")), "{answer}");
    }
    let from_page = signed(Some("application/json")).header("Origin", "https://evil.example").send().await.expect("request");
    assert_eq!(from_page.status(), 403);
    assert!(running.sink.events().is_empty(), "nothing reached the inbox");
    assert_eq!(signed(Some("application/json")).send().await.expect("request").status(), 202, "the sender itself is fine");
    running.stop().await;
}

#[tokio::test]
async fn an_unsigned_route_answers_only_to_loopback_names() {
    let mut open = route("{x}", "log");
    open.secret = Some(INSECURE_NO_AUTH.into());
    let running = start(settings(&[("local", open)])).await;
    let post = |host: &'static str, x: &'static str| {
        running
            .http
            .post(running.url("local"))
            .header("Host", host)
            .header("Content-Type", "application/json")
            .body(json!({ "x": x }).to_string())
            .send()
    };
    let rebound = post("evil.example:8644", "rebound").await.expect("request");
    assert_eq!(rebound.status(), 421);
    assert!(running.sink.events().is_empty());
    assert_eq!(post("localhost:8644", "local").await.expect("request").status(), 202);
    assert_eq!(post("127.0.0.1", "loopback").await.expect("request").status(), 202);
    running.stop().await;

    // With signed routes only, any name will do: the signature is the authentication.
    let signed = start(settings(&[("gh", route("{x}", "log"))])).await;
    let body = r#"{"x": "proxied"}"#;
    let response = signed
        .http
        .post(signed.url("gh"))
        .header("Host", "hooks.example.org")
        .header("Content-Type", "application/json")
        .header("X-Hub-Signature-256", format!("sha256={}", hmac_hex(SECRET, &[body.as_bytes()])))
        .body(body)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 202);
    signed.stop().await;
}

/// Requests a server received: their `Authorization` header, if any.
type Seen = Arc<Mutex<Vec<Option<String>>>>;

/// A loopback server that records each request's `Authorization` and answers `answer`.
async fn recording_server(answer: impl Fn() -> axum::response::Response + Clone + Send + Sync + 'static) -> (u16, Seen) {
    let seen = Seen::default();
    let app = axum::Router::new()
        .route(
            "/hook",
            post(move |State(seen): State<Seen>, headers: HeaderMap| {
                let answer = answer.clone();
                async move {
                    let auth = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_string);
                    seen.lock().expect("lock").push(auth);
                    answer()
                }
            }),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (port, seen)
}

#[tokio::test]
async fn an_answer_is_never_carried_across_a_redirect_to_another_host() {
    let (other_port, other_seen) = recording_server(|| StatusCode::OK.into_response()).await;
    let target = format!("http://localhost:{other_port}/hook");
    let (first_port, first_seen) =
        recording_server(move || (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, target.clone())]).into_response()).await;
    // Credentials in the deliver URL become `Authorization: Basic …` on the first hop.
    let url = format!("http://hermes:deliver-pw@127.0.0.1:{first_port}/hook");
    let adapter = WebhookAdapter::new(settings(&[("gh", route("{x}", &url))])).expect("valid settings");
    let answer = OutboundMessage {
        target: ChatTarget { platform: Platform::new("webhook"), chat_id: "webhook:gh:k1".into(), thread_id: None },
        text: "the answer".into(),
        reply_to: Some("d-1".into()),
        idempotency_key: "turn-1:0".into(),
        is_final: true,
        usage: None,
        finish_reason: Some("stop".into()),
        buttons: Vec::new(),
        file: None,
    };
    let result = adapter.send(&answer).await;
    assert!(matches!(&result, Err(SendError::Other(m)) if m.contains("redirects are not followed")), "{result:?}");
    let first = first_seen.lock().expect("lock").clone();
    assert_eq!(first.len(), 1);
    assert!(first[0].as_deref().is_some_and(|a| a.starts_with("Basic ")), "the first hop had credentials: {first:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(other_seen.lock().expect("lock").is_empty(), "the other host received nothing, credentials least of all");
}
