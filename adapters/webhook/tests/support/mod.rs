//! A webhook adapter running over loopback HTTP with a recording inbox, and the requests a
//! sender makes to it.

#![allow(dead_code)]

use axum::http::{HeaderMap, StatusCode};
use hermes_adapter::{AdapterContext, HealthReporter, PlatformAdapter};
use hermes_fakes::inbox::{NoSessions, RecordingInbox};
use hermes_webhook::{RouteSettings, WebhookAdapter, WebhookSettings};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub(crate) const SECRET: &str = "route-hmac-k3y-7f3a9c";

pub(crate) struct Running {
    pub sink: Arc<RecordingInbox>,
    pub health: HealthReporter,
    pub base: String,
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub task: JoinHandle<Result<(), hermes_adapter::AdapterError>>,
    pub http: reqwest::Client,
}

impl Running {
    pub(crate) fn url(&self, route: &str) -> String {
        format!("{}/webhooks/{route}", self.base)
    }
    pub(crate) async fn stop(self) {
        self.shutdown.cancel();
        let result = tokio::time::timeout(Duration::from_secs(5), self.task).await;
        assert!(matches!(result, Ok(Ok(Ok(())))), "run should end cleanly on shutdown: {result:?}");
        assert!(!self.health.is_connected());
    }
}

pub(crate) fn route(prompt: &str, deliver: &str) -> RouteSettings {
    RouteSettings { secret: Some(SECRET.into()), prompt: prompt.into(), deliver: deliver.into(), events: vec![], toolsets: vec![] }
}

pub(crate) fn settings(routes: &[(&str, RouteSettings)]) -> WebhookSettings {
    WebhookSettings {
        host: "127.0.0.1".into(),
        port: 0,
        global_secret: None,
        rate_limit_per_minute: 30,
        routes: routes.iter().map(|(n, r)| (n.to_string(), r.clone())).collect::<BTreeMap<_, _>>(),
        delivery_timeout: Duration::from_secs(5),
    }
}

pub(crate) async fn start(settings: WebhookSettings) -> Running {
    let adapter = Arc::new(WebhookAdapter::new(settings).expect("valid settings"));
    let sink = Arc::new(RecordingInbox::default());
    let health = HealthReporter::new();
    let shutdown = CancellationToken::new();
    let ctx = AdapterContext::new(sink.clone(), Arc::new(NoSessions), health.clone(), shutdown.clone());
    let task = tokio::spawn({
        let adapter = adapter.clone();
        async move { adapter.run(ctx).await }
    });
    let mut addr = None;
    for _ in 0..200 {
        addr = adapter.local_addr();
        if addr.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let addr = addr.expect("the server should bind within 2 s");
    assert!(health.is_connected());
    Running { sink, health, base: format!("http://{addr}"), addr, shutdown, task, http: reqwest::Client::new() }
}

pub(crate) fn hmac_hex(secret: &str, parts: &[&[u8]]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    for part in parts {
        mac.update(part);
    }
    hex::encode(mac.finalize().into_bytes())
}

pub(crate) fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs() as i64
}

pub(crate) async fn github_post(running: &Running, route: &str, body: &str, delivery: &str, event: &str) -> (StatusCode, HeaderMap, Value) {
    let sig = format!("sha256={}", hmac_hex(SECRET, &[body.as_bytes()]));
    let response = running
        .http
        .post(running.url(route))
        .header("X-Hub-Signature-256", sig)
        .header("X-GitHub-Delivery", delivery)
        .header("X-GitHub-Event", event)
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("request");
    let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
    let headers = response.headers().clone();
    let json = response.json::<Value>().await.unwrap_or(Value::Null);
    (status, headers, json)
}

pub(crate) async fn send_raw(_running: &Running, request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.header("Content-Type", "application/json").send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json::<Value>().await.unwrap_or(Value::Null))
}

/// The dedupe key a delivery on `route` signed over `signed` must get, computed here
/// independently of the adapter: the first 128 bits of SHA-256 over the route, a NUL and the
/// signed bytes, in hex.
pub(crate) fn expected_key(route: &str, signed: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(route.as_bytes());
    hash.update([0u8]);
    hash.update(signed);
    hex::encode(hash.finalize())[..32].to_string()
}
