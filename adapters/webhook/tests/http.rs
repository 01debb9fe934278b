//! The webhook adapter over real HTTP on loopback: signatures, limits, filters, the inbox
//! hand-off and URL delivery.

mod support;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use hermes_adapter::untrusted::unmarked;
use hermes_adapter::{AcceptError, AdapterContext, ChatTarget, HealthReporter, OutboundMessage, Platform, PlatformAdapter, SendError};
use hermes_fakes::inbox::{NoSessions, RecordingInbox};
use hermes_webhook::{WebhookAdapter, WebhookError, WebhookSettings};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{SECRET, expected_key, github_post, hmac_hex, now, route, send_raw, settings, start};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn health_endpoint() {
    let running = start(settings(&[])).await;
    let body: Value = reqwest::get(format!("{}/health", running.base)).await.expect("get").json().await.expect("json");
    assert_eq!(body, json!({"status": "ok", "platform": "webhook"}));
    running.stop().await;
}

#[tokio::test]
async fn github_signature_accepted_and_prompt_rendered() {
    let running = start(settings(&[("gh", route("PR '{pull_request.title}' #{number} on {route}", "log"))])).await;
    let body = r#"{"number": 7, "pull_request": {"title": "Fix the flux capacitor"}}"#;
    let (status, _, json) = github_post(&running, "gh", body, "d-1", "pull_request").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(json, json!({"status": "accepted", "delivery_id": "d-1"}));

    let events = running.sink.events();
    assert_eq!(events.len(), 1);
    let event = &events[0];
    assert_eq!(unmarked(&event.text), "PR 'Fix the flux capacitor' #7 on gh");
    assert_eq!(event.toolsets.as_deref(), Some(&[][..]), "a route that lists no toolsets gives the agent none");
    // Identified by what the signature covers; the sender's id is kept as the message id only.
    let key = expected_key("gh", body.as_bytes());
    assert_eq!(event.event_id, format!("webhook:gh:{key}"));
    assert_eq!(event.message_id.as_deref(), Some("d-1"));
    assert_eq!(event.source.platform, Platform::new("webhook"));
    assert_eq!(event.source.chat_id, format!("webhook:gh:{key}"));
    assert_eq!(event.source.chat_type, hermes_adapter::ChatType::Webhook);
    assert_eq!(event.source.user_id.as_deref(), Some("webhook:gh"));
    assert_eq!(event.source.chat_name.as_deref(), Some("gh"));
    assert!(event.authorized_upstream && event.one_shot);
    assert_eq!(event.reply_target, None);
    assert!(running.health.last_progress_ms() > 0);
    running.stop().await;
}

#[tokio::test]
async fn v2_signature_accepted() {
    let running = start(settings(&[("gen", route("{msg}", "log"))])).await;
    let body = r#"{"msg": "hello"}"#;
    let ts = now().to_string();
    let sig = hmac_hex(SECRET, &[ts.as_bytes(), b".", body.as_bytes()]);
    let (status, json) = send_raw(
        &running,
        running
            .http
            .post(running.url("gen"))
            .header("X-Webhook-Timestamp", &ts)
            .header("X-Webhook-Signature-V2", format!("sha256={sig}"))
            .header("X-Request-ID", "req-9")
            .body(body),
    )
    .await;
    assert_eq!(status, 202, "{json}");
    assert_eq!(json["delivery_id"], "req-9");
    let event = &running.sink.events()[0];
    assert_eq!(unmarked(&event.text), "hello");
    assert_eq!(event.event_id, format!("webhook:gen:{}", expected_key("gen", body.as_bytes())), "the key is the signed body");
    running.stop().await;
}

#[tokio::test]
async fn gitlab_token_and_delivery_id_from_the_body() {
    let running = start(settings(&[("gl", route("{object_kind}", "log"))])).await;
    let body = r#"{"object_kind":"push"}"#;
    let (status, json) = send_raw(&running, running.http.post(running.url("gl")).header("X-Gitlab-Token", SECRET).body(body)).await;
    assert_eq!(status, 202, "{json}");
    let key = expected_key("gl", body.as_bytes());
    assert_eq!(json["delivery_id"], key.as_str(), "without a sender's id the delivery is named by its key");
    assert_eq!(running.sink.events()[0].event_id, format!("webhook:gl:{key}"));
    running.stop().await;
}

#[tokio::test]
async fn bad_missing_and_stale_signatures_are_rejected() {
    let running = start(settings(&[("gh", route("{x}", "log"))])).await;
    let body = r#"{"x": 1}"#;

    let wrong = format!("sha256={}", hmac_hex("not-the-secret", &[body.as_bytes()]));
    let (status, json) = send_raw(&running, running.http.post(running.url("gh")).header("X-Hub-Signature-256", wrong).body(body)).await;
    assert_eq!(status, 401);
    assert!(json["error"].as_str().is_some_and(|e| e.contains("X-Hub-Signature-256")), "{json}");

    let (status, json) = send_raw(&running, running.http.post(running.url("gh")).body(body)).await;
    assert_eq!(status, 401);
    assert!(json["error"].as_str().is_some_and(|e| e.contains("missing signature")), "{json}");

    let stale = (now() - 301).to_string();
    let sig = hmac_hex(SECRET, &[stale.as_bytes(), b".", body.as_bytes()]);
    let (status, json) = send_raw(
        &running,
        running.http.post(running.url("gh")).header("X-Webhook-Timestamp", stale).header("X-Webhook-Signature-V2", sig).body(body),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(json["error"], "timestamp outside the 300 s window");

    // The legacy body-only signature still works (with a logged deprecation warning).
    let legacy = hmac_hex(SECRET, &[body.as_bytes()]);
    let (status, _) = send_raw(&running, running.http.post(running.url("gh")).header("X-Webhook-Signature", legacy).body(body)).await;
    assert_eq!(status, 202);
    assert_eq!(running.sink.events().len(), 1, "only the legacy delivery reached the sink");
    running.stop().await;
}

#[tokio::test]
async fn redelivery_is_a_duplicate() {
    let running = start(settings(&[("gh", route("{x}", "log"))])).await;
    let body = r#"{"x": "once"}"#;
    let (first, _, _) = github_post(&running, "gh", body, "same-id", "push").await;
    let (second, _, json) = github_post(&running, "gh", body, "same-id", "push").await;
    assert_eq!(first, StatusCode::ACCEPTED);
    assert_eq!(second, StatusCode::OK);
    assert_eq!(json, json!({"status": "duplicate", "delivery_id": "same-id"}));
    assert_eq!(running.sink.events().len(), 1);
    running.stop().await;
}

/// Sends a hand-written request and returns the response's status code; the body is written
/// concurrently because the server may answer (and stop reading) before it is complete.
async fn raw_http(addr: SocketAddr, head: String, body: Vec<Vec<u8>>) -> u16 {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let write = tokio::spawn(async move {
        writer.write_all(head.as_bytes()).await?;
        for chunk in body {
            writer.write_all(&chunk).await?;
        }
        writer.flush().await?;
        Ok::<_, std::io::Error>(writer)
    });
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    while !response.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), reader.read(&mut buf)).await.expect("response in time");
        match n {
            Ok(0) | Err(_) => break,
            Ok(n) => response.extend_from_slice(&buf[..n]),
        }
    }
    write.abort();
    let text = String::from_utf8_lossy(&response);
    text.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or_else(|| panic!("no status line in {text:?}"))
}

#[tokio::test]
async fn oversized_bodies_are_refused_without_reaching_the_sink() {
    let running = start(settings(&[("gh", route("{x}", "log"))])).await;
    let limit = hermes_webhook::MAX_BODY_BYTES;

    // Content-Length over the limit: refused from the headers alone, no body sent at all.
    let head = format!("POST /webhooks/gh HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", limit + 1);
    assert_eq!(raw_http(running.addr, head, vec![]).await, 413);

    // Chunked (no Content-Length): the streamed read stops at the limit.
    let head = "POST /webhooks/gh HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_string();
    let piece = vec![b' '; 64 * 1024];
    let mut chunks = Vec::new();
    for _ in 0..(limit / piece.len() + 1) {
        let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
        chunk.extend_from_slice(&piece);
        chunk.extend_from_slice(b"\r\n");
        chunks.push(chunk);
    }
    chunks.push(b"0\r\n\r\n".to_vec());
    assert_eq!(raw_http(running.addr, head, chunks).await, 413);

    // Exactly at the limit is fine (and then fails the signature check, which proves it was read).
    let (status, _) = send_raw(&running, running.http.post(running.url("gh")).body(vec![b' '; limit])).await;
    assert_eq!(status, 401);
    assert!(running.sink.events().is_empty());
    running.stop().await;
}

#[tokio::test]
async fn rate_limit_answers_429_with_retry_after() {
    let mut settings = settings(&[("gh", route("{x}", "log")), ("other", route("{x}", "log"))]);
    settings.rate_limit_per_minute = 2;
    let running = start(settings).await;
    for id in ["a", "b"] {
        let (status, _, _) = github_post(&running, "gh", &format!(r#"{{"x": "{id}"}}"#), id, "push").await;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    let body = r#"{"x": "c"}"#;
    let (status, headers, json) = github_post(&running, "gh", body, "c", "push").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{json}");
    let retry_after: u64 = headers["retry-after"].to_str().expect("ascii").parse().expect("seconds");
    assert!((1..=60).contains(&retry_after));
    // Another route has its own window.
    let (status, _, _) = github_post(&running, "other", body, "d", "push").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(running.sink.events().len(), 3);
    running.stop().await;
}

#[tokio::test]
async fn unknown_route_and_non_json() {
    let running = start(settings(&[("gh", route("{x}", "log"))])).await;
    let (status, _, json) = github_post(&running, "nope", "{}", "a", "push").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(json["error"].as_str().is_some_and(|e| e.contains("nope")));

    let (status, _, json) = github_post(&running, "gh", "not json", "b", "push").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(json["error"].as_str().is_some_and(|e| e.contains("JSON")));
    assert!(running.sink.events().is_empty());
    running.stop().await;
}

#[tokio::test]
async fn events_filter() {
    let mut filtered = route("{action}", "log");
    filtered.events = vec!["pull_request".into(), "deploy".into()];
    let running = start(settings(&[("gh", filtered)])).await;

    let (status, _, json) = github_post(&running, "gh", r#"{"action": "x"}"#, "1", "push").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json["status"], "ignored");
    assert!(json["reason"].as_str().is_some_and(|r| r.contains("push")), "{json}");

    let (status, _, _) = github_post(&running, "gh", r#"{"action": "opened"}"#, "2", "pull_request").await;
    assert_eq!(status, StatusCode::ACCEPTED);

    // Without an event header, the body's `event` field counts.
    let body = r#"{"event": "deploy", "action": "ship"}"#;
    let (status, json) =
        send_raw(&running, running.http.post(running.url("gh")).header("X-Gitlab-Token", SECRET).header("X-Request-ID", "3").body(body))
            .await;
    assert_eq!(status, 202, "{json}");
    let texts: Vec<String> = running.sink.events().into_iter().map(|e| unmarked(&e.text)).collect();
    assert_eq!(texts, ["opened", "ship"]);
    running.stop().await;
}

#[tokio::test]
async fn deliver_to_a_chat_sets_reply_target() {
    let running = start(settings(&[("alerts", route("Alert: {title}", "telegram:123:7"))])).await;
    let (status, _, _) = github_post(&running, "alerts", r#"{"title": "disk full"}"#, "x1", "alert").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let event = &running.sink.events()[0];
    assert_eq!(
        event.reply_target,
        Some(ChatTarget { platform: Platform::new("telegram"), chat_id: "123".into(), thread_id: Some("7".into()) })
    );
    running.stop().await;
}

#[tokio::test]
async fn insecure_no_auth_on_loopback_needs_no_signature() {
    let mut open = route("{x}", "log");
    open.secret = Some(hermes_webhook::INSECURE_NO_AUTH.into());
    let running = start(settings(&[("local", open)])).await;
    let (status, _) = send_raw(&running, running.http.post(running.url("local")).body(r#"{"x": "hi"}"#)).await;
    assert_eq!(status, 202);
    running.stop().await;
}

#[tokio::test]
async fn inbox_failures_map_to_503_and_500() {
    let running = start(settings(&[("gh", route("{x}", "log"))])).await;
    running.sink.fail_with(Some(|| AcceptError::ShuttingDown));
    let (status, _, _) = github_post(&running, "gh", r#"{"x": 1}"#, "a", "push").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    running.sink.fail_with(Some(|| AcceptError::Storage("disk /secret/path full".into())));
    let (status, _, json) = github_post(&running, "gh", r#"{"x": 1}"#, "b", "push").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!json.to_string().contains("/secret/path"), "storage details stay in the log: {json}");
    running.stop().await;
}

// ---- send ----------------------------------------------------------------------------------

#[derive(Clone, Default)]
struct Received {
    requests: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
}

/// A receiver answering every POST with `status` after `delay`.
async fn receiver(status: StatusCode, delay: Duration) -> (String, Received) {
    let received = Received::default();
    let app = axum::Router::new()
        .route(
            "/hook",
            post(move |State(received): State<Received>, headers: HeaderMap, body: axum::Json<Value>| async move {
                received.requests.lock().expect("lock").push((headers, body.0));
                tokio::time::sleep(delay).await;
                (status, [("retry-after", "7")], "receiver says no")
            }),
        )
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook"), received)
}

fn answer(route: &str, delivery: &str) -> OutboundMessage {
    OutboundMessage {
        target: ChatTarget { platform: Platform::new("webhook"), chat_id: format!("webhook:{route}:{delivery}"), thread_id: None },
        text: "the answer".into(),
        reply_to: Some(delivery.into()),
        idempotency_key: "turn-1:0".into(),
        is_final: true,
        usage: None,
        finish_reason: Some("stop".into()),
        buttons: Vec::new(),
        file: None,
    }
}

fn adapter_delivering_to(url: &str, timeout: Duration) -> WebhookAdapter {
    let mut settings = settings(&[("gh", route("{x}", url)), ("logged", route("{x}", "log"))]);
    settings.delivery_timeout = timeout;
    WebhookAdapter::new(settings).expect("valid settings")
}

#[tokio::test]
async fn send_posts_json_with_idempotency_key() {
    let (url, received) = receiver(StatusCode::OK, Duration::ZERO).await;
    let adapter = adapter_delivering_to(&url, Duration::from_secs(5));
    adapter.send(&answer("gh", "d-42")).await.expect("delivered");
    let requests = received.requests.lock().expect("lock").clone();
    assert_eq!(requests.len(), 1);
    let (headers, body) = &requests[0];
    assert_eq!(headers["idempotency-key"], "turn-1:0");
    assert_eq!(body, &json!({"route": "gh", "delivery_id": "d-42", "text": "the answer", "idempotency_key": "turn-1:0"}));
}

#[tokio::test]
async fn send_to_log_and_unknown_routes() {
    let adapter = adapter_delivering_to("http://127.0.0.1:9/hook", Duration::from_secs(1));
    assert!(adapter.send(&answer("logged", "d")).await.is_ok());
    assert!(matches!(adapter.send(&answer("gone", "d")).await, Err(SendError::NotFound(_))));
    let mut malformed = answer("logged", "d");
    malformed.target.chat_id = "logged".into();
    assert!(matches!(adapter.send(&malformed).await, Err(SendError::NotFound(_))));
}

#[tokio::test]
async fn send_to_a_closed_port_is_transient() {
    // Bind and drop to get a port that nobody listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let adapter = adapter_delivering_to(&format!("http://127.0.0.1:{port}/hook"), Duration::from_secs(2));
    let result = adapter.send(&answer("gh", "d")).await;
    assert!(matches!(result, Err(SendError::Transient(_))), "{result:?}");
}

#[tokio::test]
async fn send_to_a_slow_receiver_is_ambiguous() {
    let (url, received) = receiver(StatusCode::OK, Duration::from_secs(3)).await;
    let adapter = adapter_delivering_to(&url, Duration::from_millis(300));
    let result = adapter.send(&answer("gh", "d")).await;
    assert!(matches!(result, Err(SendError::Ambiguous(_))), "{result:?}");
    assert_eq!(received.requests.lock().expect("lock").len(), 1, "the request did arrive");
}

#[tokio::test]
async fn send_classifies_http_statuses() {
    for (status, check) in [
        (
            StatusCode::TOO_MANY_REQUESTS,
            (|e: &SendError| matches!(e, SendError::RateLimited { retry_after } if *retry_after == Duration::from_secs(7)))
                as fn(&SendError) -> bool,
        ),
        (StatusCode::BAD_GATEWAY, |e| matches!(e, SendError::Transient(_))),
        (StatusCode::NOT_FOUND, |e| matches!(e, SendError::NotFound(_))),
        (StatusCode::UNAUTHORIZED, |e| matches!(e, SendError::Forbidden(m) if m.contains("401") && m.contains("receiver says no"))),
    ] {
        let (url, _) = receiver(status, Duration::ZERO).await;
        let adapter = adapter_delivering_to(&url, Duration::from_secs(5));
        let result = adapter.send(&answer("gh", "d")).await;
        assert!(result.as_ref().err().is_some_and(check), "{status}: {result:?}");
    }
}

// ---- settings ------------------------------------------------------------------------------

fn new_error(settings: WebhookSettings) -> String {
    match WebhookAdapter::new(settings) {
        Ok(_) => panic!("settings should be rejected"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn new_rejects_a_route_without_secret() {
    let mut no_secret = route("{x}", "log");
    no_secret.secret = None;
    let message = new_error(settings(&[("gh", no_secret.clone())]));
    assert!(message.contains("platforms.webhook.routes.gh.secret"), "{message}");

    // The global secret fills in.
    let mut with_global = settings(&[("gh", no_secret)]);
    with_global.global_secret = Some("global-hmac-k3y-2b9e".into());
    assert!(WebhookAdapter::new(with_global).is_ok());
}

#[test]
fn new_rejects_insecure_no_auth_off_loopback() {
    let mut open = route("{x}", "log");
    open.secret = Some(hermes_webhook::INSECURE_NO_AUTH.into());
    let mut public = settings(&[("gh", open)]);
    public.host = "0.0.0.0".into();
    let error = WebhookAdapter::new(public).err();
    assert!(matches!(&error, Some(WebhookError::InsecureOnPublicHost { .. })), "{error:?}");
    let message = error.map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("platforms.webhook.routes.gh.secret") && message.contains("loopback"), "{message}");
}

#[test]
fn new_rejects_bad_deliver_and_route_names() {
    let message = new_error(settings(&[("gh", route("{x}", "telegram"))]));
    assert!(message.contains("platforms.webhook.routes.gh.deliver"), "{message}");
    let message = new_error(settings(&[("gh", route("{x}", "ftp://example.com"))]));
    assert!(message.contains("platforms.webhook.routes.gh.deliver"), "{message}");
    let message = new_error(settings(&[("bad name", route("{x}", "log"))]));
    assert!(message.contains("platforms.webhook.routes.bad name"), "{message}");
}

#[tokio::test]
async fn bind_failure_is_retryable_and_names_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let mut busy = settings(&[]);
    busy.port = port;
    let adapter = WebhookAdapter::new(busy).expect("valid");
    let ctx =
        AdapterContext::new(Arc::new(RecordingInbox::default()), Arc::new(NoSessions), HealthReporter::new(), CancellationToken::new());
    let error = adapter.run(ctx).await.expect_err("the port is taken");
    assert!(error.is_retryable());
    assert!(error.to_string().contains(&format!("127.0.0.1:{port}")), "{error}");
}

#[test]
fn capabilities() {
    let adapter = WebhookAdapter::new(settings(&[])).expect("valid");
    let caps = adapter.capabilities();
    assert_eq!(adapter.platform().as_str(), "webhook");
    assert_eq!(caps.max_message_len, usize::MAX);
    assert_eq!(caps.dialect, hermes_adapter::MarkdownDialect::Markdown);
    assert_eq!(caps.streaming, hermes_adapter::StreamStyle::None);
    assert!(caps.supports_async_delivery && !caps.splits_long_messages);
    assert_eq!(adapter.local_addr(), None);
}
