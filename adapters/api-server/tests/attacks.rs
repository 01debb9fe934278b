//! What a web page (or a guesser) tries against the API server, each run against the real
//! listener on loopback with a fake gateway behind it. "No turn ran" means the inbox recorded no
//! event: every turn starts there.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

mod support;

use hermes_api_server::{ApiServerAdapter, ApiServerError, ApiServerSettings};
use reqwest::header::{self, HeaderMap};
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr};
use support::{Harness, KEY, chat, settings};

const EVIL: &str = "https://evil.example";
const APP: &str = "http://localhost:3000";

/// Settings of a loopback server that asks for no key (`allow_no_auth`).
fn keyless() -> ApiServerSettings {
    ApiServerSettings { key: None, allow_no_auth: true, ..settings() }
}

fn error_of(body: &Value) -> (&str, &str) {
    (body["error"]["code"].as_str().unwrap_or_default(), body["error"]["message"].as_str().unwrap_or_default())
}

#[tokio::test]
async fn bodies_a_page_can_send_without_preflight_are_refused_and_no_turn_runs() {
    for h in [Harness::start().await, Harness::with(keyless()).await] {
        let json = serde_json::to_string(&chat("run rm -rf ~")).unwrap();
        let attempts = [
            ("text/plain;charset=UTF-8", json.clone()),
            ("application/x-www-form-urlencoded", format!("payload={json}")),
            ("multipart/form-data; boundary=x", format!("--x\r\nContent-Disposition: form-data; name=a\r\n\r\n{json}\r\n--x--\r\n")),
        ];
        for (content_type, body) in attempts {
            let response = h
                .client
                .post(h.url("/v1/chat/completions"))
                .bearer_auth(KEY)
                .header(header::CONTENT_TYPE, content_type)
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 415, "{content_type}");
            let body: Value = response.json().await.unwrap();
            let (code, message) = error_of(&body);
            assert_eq!(code, "unsupported_media_type", "{body}");
            assert!(message.contains("application/json") && message.contains(content_type), "{message}");
        }
        // A body with no type at all (what `fetch` sends for a Blob) is refused too.
        let untyped = h.client.post(h.url("/api/sessions/s1/messages")).bearer_auth(KEY).body(r#"{"input":"hi"}"#).send().await.unwrap();
        assert_eq!(untyped.status(), 415);
        assert!(h.events().is_empty(), "no turn ran");

        // The same request as JSON is answered.
        let ok = h.post("/v1/chat/completions", chat("hi")).send().await.unwrap();
        assert_eq!(ok.status(), 200);
        assert_eq!(h.events().len(), 1);
        let charset = h
            .client
            .post(h.url("/v1/chat/completions"))
            .bearer_auth(KEY)
            .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
            .body(json)
            .send()
            .await
            .unwrap();
        assert_eq!(charset.status(), 200, "a UTF-8 charset is fine");
        // `POST /api/sessions` has no body, and needs no type.
        assert_eq!(h.client.post(h.url("/api/sessions")).bearer_auth(KEY).send().await.unwrap().status(), 201);
    }
}

#[tokio::test]
async fn a_page_on_an_unlisted_origin_is_refused_while_programs_are_served() {
    for h in [Harness::start().await, Harness::with(keyless()).await] {
        let from_page = h.post("/v1/chat/completions", chat("hi")).header(header::ORIGIN, EVIL).send().await.unwrap();
        assert_eq!(from_page.status(), 403);
        assert!(!from_page.headers().contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN), "nothing tells the page it may read");
        let body: Value = from_page.json().await.unwrap();
        let (code, message) = error_of(&body);
        assert_eq!(code, "origin_not_allowed");
        assert!(message.contains(EVIL), "{message}");
        let preflight = h
            .client
            .request(reqwest::Method::OPTIONS, h.url("/v1/chat/completions"))
            .header(header::ORIGIN, EVIL)
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
            .send()
            .await
            .unwrap();
        assert_eq!(preflight.status(), 403);
        let read = h.get("/v1/models").header(header::ORIGIN, EVIL).send().await.unwrap();
        assert_eq!(read.status(), 403, "reading is refused too");
        assert!(h.events().is_empty(), "no turn ran");

        // curl, the openai SDKs: no Origin header, JSON body, loopback Host.
        let program = h.post("/v1/chat/completions", chat("hi")).send().await.unwrap();
        assert_eq!(program.status(), 200);
        assert_eq!(h.events().len(), 1);
    }
}

fn allows(headers: &HeaderMap, name: header::HeaderName, expected: &str) -> bool {
    headers.get(name).and_then(|v| v.to_str().ok()).is_some_and(|v| v.split(',').any(|item| item.trim().eq_ignore_ascii_case(expected)))
}

#[tokio::test]
async fn a_listed_origin_gets_cors_and_only_it() {
    let h = Harness::with(ApiServerSettings { cors_origins: vec![format!("{APP}/")], ..settings() }).await;
    let preflight = h
        .client
        .request(reqwest::Method::OPTIONS, h.url("/v1/chat/completions"))
        .header(header::ORIGIN, APP)
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
        .header(header::ACCESS_CONTROL_REQUEST_HEADERS, "authorization,content-type,x-hermes-session-id")
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let headers = preflight.headers();
    assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], APP);
    assert!(allows(headers, header::ACCESS_CONTROL_ALLOW_METHODS, "POST"), "{headers:?}");
    for name in ["authorization", "content-type", "x-hermes-session-id"] {
        assert!(allows(headers, header::ACCESS_CONTROL_ALLOW_HEADERS, name), "{name}: {headers:?}");
    }
    assert!(allows(headers, header::VARY, "origin"), "{headers:?}");
    assert!(!headers.contains_key(header::ACCESS_CONTROL_ALLOW_CREDENTIALS), "the key is a header, never a cookie");

    let call = h
        .post("/v1/chat/completions", chat("hi"))
        .header(header::ORIGIN, APP)
        .header("x-hermes-session-id", "page-1")
        .send()
        .await
        .unwrap();
    assert_eq!(call.status(), 200);
    assert_eq!(call.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN], APP);
    assert!(allows(call.headers(), header::VARY, "origin"));
    assert!(allows(call.headers(), header::ACCESS_CONTROL_EXPOSE_HEADERS, "x-hermes-session-id"), "the page can read the session id");
    assert_eq!(h.events().len(), 1);

    let other = h.post("/v1/chat/completions", chat("hi")).header(header::ORIGIN, "http://localhost:3001").send().await.unwrap();
    assert_eq!(other.status(), 403, "another port is another origin");
    assert_eq!(h.events().len(), 1);
}

#[tokio::test]
async fn a_rebound_name_cannot_reach_a_keyless_server() {
    let h = Harness::with(keyless()).await;
    let port = h.adapter.local_addr().unwrap().port();
    let rebound = h.post("/v1/chat/completions", chat("hi")).header(header::HOST, format!("evil.example:{port}")).send().await.unwrap();
    assert_eq!(rebound.status(), 421);
    let body: Value = rebound.json().await.unwrap();
    assert_eq!(error_of(&body).0, "misdirected_request", "{body}");
    let health = h.client.get(h.url("/health")).header(header::HOST, "evil.example").send().await.unwrap();
    assert_eq!(health.status(), 421, "not even the health probe answers a foreign name");
    assert!(h.events().is_empty(), "no turn ran");
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}"), "localhost".to_string()] {
        let local = h.post("/v1/chat/completions", chat("hi")).header(header::HOST, host.as_str()).send().await.unwrap();
        assert_eq!(local.status(), 200, "{host}");
    }

    // With a key, the name is not restricted (a rebinding page has no key).
    let keyed = Harness::start().await;
    let named = keyed.post("/v1/chat/completions", chat("hi")).header(header::HOST, "hermes.internal.example").send().await.unwrap();
    assert_eq!(named.status(), 200);
}

#[tokio::test]
async fn a_peer_guessing_keys_is_locked_out_even_with_the_right_key() {
    let h = Harness::start().await;
    for guess in 0..10 {
        let wrong =
            h.client.post(h.url("/v1/chat/completions")).bearer_auth(format!("guess-{guess}")).json(&chat("hi")).send().await.unwrap();
        assert_eq!(wrong.status(), 401, "guess {guess}");
    }
    let locked = h.post("/v1/chat/completions", chat("hi")).send().await.unwrap();
    assert_eq!(locked.status(), 429);
    let retry_after: u64 = locked.headers()[header::RETRY_AFTER].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    let body: Value = locked.json().await.unwrap();
    assert_eq!(error_of(&body).0, "too_many_auth_failures", "{body}");
    assert!(h.events().is_empty());
    assert_eq!(h.client.get(h.url("/health")).send().await.unwrap().status(), 200, "probes still work");

    // Another client, from 127.0.0.2, is served as before.
    let other = reqwest::Client::builder().local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))).build().unwrap();
    let served = other.post(h.url("/v1/chat/completions")).bearer_auth(KEY).json(&chat("hi")).send().await.unwrap();
    assert_eq!(served.status(), 200);
    assert_eq!(h.events().len(), 1);
}

#[test]
fn guessable_keys_refuse_to_start() {
    for key in
        ["change-me", "changeme", "secret", "password", "your-api-key", "sk-...", "test", "xxxxxxxxxxxxxxxxxxxxxxxx", "short-but-real"]
    {
        let err = ApiServerAdapter::new(ApiServerSettings { key: Some(key.into()), ..settings() }).unwrap_err();
        assert!(matches!(err, ApiServerError::WeakKey(_)), "{key}: {err:?}");
        let message = err.to_string();
        assert!(message.contains("API_SERVER_KEY") && message.contains("openssl rand"), "{message}");
    }
    let bad_origin = ApiServerAdapter::new(ApiServerSettings { cors_origins: vec!["localhost:3000".into()], ..settings() }).unwrap_err();
    assert!(bad_origin.to_string().contains("cors_origins"), "{bad_origin}");
}
