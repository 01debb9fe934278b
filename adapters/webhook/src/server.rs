//! The HTTP side: `GET /health` and `POST /webhooks/{route}`, from raw request to
//! `ctx.accept` and back to a status code.

use crate::PLATFORM;
use crate::deliver::Deliver;
use crate::rate_limit::FixedWindow;
use crate::settings::{Route, RouteSecret};
use crate::signature::{self, Scheme};
use crate::template::render_prompt;
use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hermes_adapter::{AcceptError, AcceptOutcome, AdapterContext, ChatType, HealthReporter, InboundEvent, Platform, SessionSource};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Largest accepted body, checked against Content-Length before reading and again while reading.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Longest delivery id taken from a header; it becomes part of event and chat ids.
const MAX_DELIVERY_ID_LEN: usize = 200;

/// What the routes and the limiter look like for the lifetime of the adapter.
pub(crate) struct Shared {
    pub routes: BTreeMap<String, Route>,
    pub limiter: FixedWindow,
}

/// Per-`run` state of the handlers.
#[derive(Clone)]
struct App {
    shared: Arc<Shared>,
    ctx: AdapterContext,
}

pub(crate) fn router(shared: Arc<Shared>, ctx: AdapterContext) -> Router {
    let health = ctx.health.clone();
    Router::new()
        .route("/health", get(health_check))
        .route("/webhooks/{route}", post(webhook))
        .fallback(not_found)
        .with_state(App { shared, ctx })
        .layer(middleware::from_fn_with_state(health, note_progress))
}

/// Every request served is liveness for the supervisor.
async fn note_progress(State(health): State<HealthReporter>, request: Request, next: Next) -> Response {
    health.progress();
    next.run(request).await
}

async fn health_check() -> Response {
    Json(StatusCode::OK, json!({"status": "ok", "platform": PLATFORM})).into_response()
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "not found")
}

/// A JSON response with a status (axum's `Json` always answers 200).
struct Json(StatusCode, Value);

impl IntoResponse for Json {
    fn into_response(self) -> Response {
        (self.0, axum::Json(self.1)).into_response()
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    Json(status, json!({"error": message.into()})).into_response()
}

async fn webhook(State(app): State<App>, Path(route_name): Path<String>, headers: HeaderMap, body: Body) -> Response {
    let Some(route) = app.shared.routes.get(&route_name) else {
        return error(StatusCode::NOT_FOUND, format!("unknown webhook route {route_name:?}"));
    };
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return too_large();
    }
    let raw = match read_capped(body, MAX_BODY_BYTES).await {
        Ok(raw) => raw,
        Err(ReadError::TooLarge) => return too_large(),
        Err(ReadError::Body(e)) => {
            return error(StatusCode::BAD_REQUEST, format!("could not read the body: {e}"));
        }
    };

    if let RouteSecret::Shared(secret) = &route.secret {
        match signature::verify(&headers, &raw, secret, unix_now()) {
            Ok(Scheme::LegacyV1) => tracing::warn!(
                route = %route.name,
                "webhook delivery signed with the deprecated X-Webhook-Signature (body only, replayable); \
                 switch the sender to X-Webhook-Signature-V2 with X-Webhook-Timestamp"
            ),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(route = %route.name, reason = %e, "webhook delivery rejected: bad signature");
                return error(StatusCode::UNAUTHORIZED, e.to_string());
            }
        }
    }

    // Counted after authentication so that strangers who know the URL cannot use up a route's
    // quota and lock out the real sender.
    if let Err(wait) = app.shared.limiter.check(&route.name, Instant::now()) {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let mut response = error(StatusCode::TOO_MANY_REQUESTS, format!("rate limit of route {} reached", route.name));
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        return response;
    }

    let Ok(text) = std::str::from_utf8(&raw) else {
        return error(StatusCode::BAD_REQUEST, "the body must be JSON (UTF-8)");
    };
    let payload: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            return error(StatusCode::BAD_REQUEST, format!("the body must be JSON: {e}"));
        }
    };

    let event_type = event_type(&headers, &payload);
    if !route.events.is_empty() && !event_type.is_some_and(|t| route.events.iter().any(|e| e == t)) {
        let reason = match event_type {
            Some(t) => format!("event {t:?} is not in this route's events"),
            None => "the delivery names no event type and this route filters by event".to_string(),
        };
        return Json(StatusCode::OK, json!({"status": "ignored", "reason": reason})).into_response();
    }

    let delivery_id = match delivery_id(&headers) {
        Ok(id) => id,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let prompt = render_prompt(&route.prompt, &route.name, &payload, text);
    let event = build_event(route, &delivery_id, prompt);

    match app.ctx.accept(event).await {
        Ok(AcceptOutcome::Accepted) => {
            tracing::info!(route = %route.name, delivery_id = %delivery_id, event_type = event_type.unwrap_or(""), "webhook delivery accepted");
            Json(StatusCode::ACCEPTED, json!({"status": "accepted", "delivery_id": delivery_id})).into_response()
        }
        Ok(AcceptOutcome::Duplicate) => {
            tracing::info!(route = %route.name, delivery_id = %delivery_id, "webhook redelivery ignored");
            Json(StatusCode::OK, json!({"status": "duplicate", "delivery_id": delivery_id})).into_response()
        }
        Err(AcceptError::ShuttingDown) => error(StatusCode::SERVICE_UNAVAILABLE, "the gateway is shutting down; retry later"),
        Err(AcceptError::Storage(e)) => {
            // The detail may name local paths; the sender only needs to know to retry.
            tracing::error!(route = %route.name, delivery_id = %delivery_id, error = %e, "webhook delivery could not be stored");
            error(StatusCode::INTERNAL_SERVER_ERROR, "the delivery could not be stored; retry later")
        }
    }
}

fn too_large() -> Response {
    error(StatusCode::PAYLOAD_TOO_LARGE, format!("the body exceeds {MAX_BODY_BYTES} bytes"))
}

/// The agent-mode event for one delivery; the session is one-shot and pre-authorized (the
/// signature is the authentication).
fn build_event(route: &Route, delivery_id: &str, prompt: String) -> InboundEvent {
    let chat_id = format!("{PLATFORM}:{}:{delivery_id}", route.name);
    let mut source =
        SessionSource::new(Platform::new(PLATFORM), chat_id.clone(), ChatType::Webhook).with_user(format!("{PLATFORM}:{}", route.name));
    source.chat_name = Some(route.name.clone());
    let mut event = InboundEvent::text(chat_id, source, prompt);
    event.message_id = Some(delivery_id.to_string());
    event.authorized_upstream = true;
    event.one_shot = true;
    if let Deliver::Chat(target) = &route.deliver {
        event.reply_target = Some(target.clone());
    }
    event
}

/// The event type: GitHub's and GitLab's headers, a generic header, then the body.
fn event_type<'a>(headers: &'a HeaderMap, payload: &'a Value) -> Option<&'a str> {
    ["x-github-event", "x-gitlab-event", "x-event-type"]
        .iter()
        .find_map(|name| headers.get(*name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty()))
        .or_else(|| ["event", "type"].iter().find_map(|key| payload.get(*key).and_then(Value::as_str)))
}

/// The sender's delivery id (stable across its redeliveries, so the inbox can drop them), or a
/// fresh one when the sender gives none.
fn delivery_id(headers: &HeaderMap) -> Result<String, String> {
    for name in ["x-github-delivery", "x-request-id"] {
        if let Some(value) = headers.get(name) {
            let id = value.to_str().map(str::trim).unwrap_or("");
            if id.is_empty() || id.len() > MAX_DELIVERY_ID_LEN {
                return Err(format!("{name} must be 1 to {MAX_DELIVERY_ID_LEN} visible ASCII characters"));
            }
            return Ok(id.to_string());
        }
    }
    Ok(crate::ids::fresh_id())
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

enum ReadError {
    TooLarge,
    Body(axum::Error),
}

/// Reads the body and stops as soon as it exceeds `limit`, whatever Content-Length claimed (a
/// chunked body has none).
async fn read_capped(mut body: Body, limit: usize) -> Result<Bytes, ReadError> {
    let mut buf = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(ReadError::Body)?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                return Err(ReadError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_type_precedence() {
        let payload = json!({"event": "from-body", "type": "other"});
        let mut headers = HeaderMap::new();
        assert_eq!(event_type(&headers, &payload), Some("from-body"));
        assert_eq!(event_type(&headers, &json!({"type": "t"})), Some("t"));
        headers.insert("x-event-type", HeaderValue::from_static("generic"));
        assert_eq!(event_type(&headers, &payload), Some("generic"));
        headers.insert("x-github-event", HeaderValue::from_static("push"));
        assert_eq!(event_type(&headers, &payload), Some("push"));
    }

    #[test]
    fn delivery_id_sources() {
        let mut headers = HeaderMap::new();
        let generated = delivery_id(&headers).unwrap_or_default();
        assert!(!generated.is_empty());
        headers.insert("x-request-id", HeaderValue::from_static("req-1"));
        assert_eq!(delivery_id(&headers), Ok("req-1".to_string()));
        headers.insert("x-github-delivery", HeaderValue::from_static("gh-1"));
        assert_eq!(delivery_id(&headers), Ok("gh-1".to_string()));
        headers.insert("x-github-delivery", HeaderValue::from_static(" "));
        assert!(delivery_id(&headers).is_err());
    }

    #[tokio::test]
    async fn capped_read() {
        assert!(matches!(read_capped(Body::from(vec![0u8; 10]), 10).await, Ok(b) if b.len() == 10));
        assert!(matches!(read_capped(Body::from(vec![0u8; 11]), 10).await, Err(ReadError::TooLarge)));
    }
}
