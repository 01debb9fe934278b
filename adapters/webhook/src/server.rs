//! The HTTP side: `GET /health` and `POST /webhooks/{route}`, from raw request to
//! `ctx.accept` and back to a status code.

use crate::PLATFORM;
use crate::dedupe::content_key;
use crate::deliver::Deliver;
use crate::payload::{event_type, parse_payload};
use crate::rate_limit::FixedWindow;
use crate::settings::{Route, RouteSecret};
use crate::signature::{self, Scheme};
use crate::template::render_prompt;
use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hermes_adapter::{AcceptError, AcceptOutcome, AdapterContext, ChatType, InboundEvent, Platform, SessionSource};
use hermes_http_guard::{AllowedOrigins, AuthThrottle, HostPolicy, Refusal, check_origin, locked_out, require_json, retry_after_secs};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Largest accepted body, checked against Content-Length before reading and again while reading.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Longest delivery id taken from a header; it appears in logs and in the answer.
const MAX_DELIVERY_ID_LEN: usize = 200;

/// What the routes and the limiters look like for the lifetime of the adapter.
pub(crate) struct Shared {
    pub routes: BTreeMap<String, Route>,
    pub limiter: FixedWindow,
    /// Peers that keep failing signatures are locked out for a while.
    pub throttle: AuthThrottle,
    /// Loopback names only while a route accepts unsigned deliveries (see `settings`).
    pub hosts: HostPolicy,
}

/// Per-`run` state of the handlers.
#[derive(Clone)]
struct App {
    shared: Arc<Shared>,
    ctx: AdapterContext,
}

pub(crate) fn router(shared: Arc<Shared>, ctx: AdapterContext) -> Router {
    let app = App { shared, ctx };
    Router::new()
        .route("/health", get(health_check))
        .route("/webhooks/{route}", post(webhook))
        .fallback(not_found)
        .with_state(app.clone())
        .layer(middleware::from_fn_with_state(app, refuse_browsers))
}

/// Every request served is liveness for the supervisor. Senders are servers, never web pages:
/// a request carrying `Origin` is refused (403), and while a route takes unsigned deliveries the
/// Host must name this machine (421), so that a page cannot reach it through DNS rebinding.
async fn refuse_browsers(State(app): State<App>, request: Request, next: Next) -> Response {
    app.ctx.health.progress();
    let refused =
        app.shared.hosts.check(request.headers(), request.uri()).and_then(|()| check_origin(request.headers(), &AllowedOrigins::None));
    match refused {
        Ok(()) => next.run(request).await,
        Err(refusal) => refuse(refusal),
    }
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

fn refuse(refusal: Refusal) -> Response {
    error(refusal.status, refusal.message)
}

fn with_retry_after(mut response: Response, seconds: u64) -> Response {
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

async fn webhook(
    State(app): State<App>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(route_name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(route) = app.shared.routes.get(&route_name) else {
        return error(StatusCode::NOT_FOUND, format!("unknown webhook route {route_name:?}"));
    };
    let throttle = &app.shared.throttle;
    let signed = matches!(route.secret, RouteSecret::Shared(_));
    if signed && let Err(wait) = throttle.check(peer.ip(), Instant::now()) {
        return with_retry_after(refuse(locked_out(wait)), retry_after_secs(wait));
    }
    if let Err(refusal) = require_json(&headers) {
        return refuse(refusal);
    }
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

    let scheme = match &route.secret {
        RouteSecret::None => None,
        RouteSecret::Shared(secret) => match signature::verify(&headers, &raw, secret, unix_now()) {
            Ok(scheme) => Some(scheme),
            Err(e) => {
                throttle.record_failure(peer.ip(), Instant::now());
                tracing::warn!(route = %route.name, %peer, reason = %e, "webhook delivery rejected: bad signature");
                return error(StatusCode::UNAUTHORIZED, e.to_string());
            }
        },
    };
    if scheme == Some(Scheme::LegacyV1) {
        tracing::warn!(
            route = %route.name,
            "webhook delivery signed with the deprecated X-Webhook-Signature (body only, replayable); \
             switch the sender to X-Webhook-Signature-V2 with X-Webhook-Timestamp"
        );
    }

    // Counted after authentication so that strangers who know the URL cannot use up a route's
    // quota and lock out the real sender.
    if let Err(wait) = app.shared.limiter.check(&route.name, Instant::now()) {
        let response = error(StatusCode::TOO_MANY_REQUESTS, format!("rate limit of route {} reached", route.name));
        return with_retry_after(response, retry_after_secs(wait));
    }

    let (text, payload) = match parse_payload(&raw) {
        Ok(parsed) => parsed,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
    };

    let event_type = event_type(&headers, &payload);
    if !route.events.is_empty() && !event_type.is_some_and(|t| route.events.iter().any(|e| e == t)) {
        let reason = match event_type {
            Some(t) => format!("event {t:?} is not in this route's events"),
            None => "the delivery names no event type and this route filters by event".to_string(),
        };
        return Json(StatusCode::OK, json!({"status": "ignored", "reason": reason})).into_response();
    }

    let sender_id = match sender_delivery_id(&headers) {
        Ok(id) => id,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    // Signed deliveries are deduplicated on their signed body, never on the sender's id, which
    // anyone replaying a captured delivery can change. Unsigned ones have nothing signed.
    let key = match scheme {
        Some(_) => content_key(&route.name, &raw),
        None => sender_id.clone().unwrap_or_else(crate::ids::fresh_id),
    };
    let delivery_id = sender_id.unwrap_or_else(|| key.clone());
    let prompt = render_prompt(&route.prompt, &route.name, &payload, text);
    let event = build_event(route, &key, &delivery_id, prompt);

    match app.ctx.accept(event).await {
        Ok(AcceptOutcome::Accepted) => {
            tracing::info!(route = %route.name, delivery_id = %delivery_id, key = %key, event_type = event_type.unwrap_or(""), "webhook delivery accepted");
            Json(StatusCode::ACCEPTED, json!({"status": "accepted", "delivery_id": delivery_id})).into_response()
        }
        Ok(AcceptOutcome::Duplicate) => {
            tracing::info!(route = %route.name, delivery_id = %delivery_id, key = %key, "webhook redelivery ignored");
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

/// The agent-mode event for one delivery, identified by its dedupe `key`; the session is one-shot
/// and pre-authorized (the signature is the authentication). The sender's `delivery_id` rides
/// along as the message id, so that the answer can name it.
fn build_event(route: &Route, key: &str, delivery_id: &str, prompt: String) -> InboundEvent {
    let chat_id = format!("{PLATFORM}:{}:{key}", route.name);
    let mut source =
        SessionSource::new(Platform::new(PLATFORM), chat_id.clone(), ChatType::Webhook).with_user(format!("{PLATFORM}:{}", route.name));
    source.chat_name = Some(route.name.clone());
    let mut event = InboundEvent::text(chat_id, source, prompt);
    event.message_id = Some(delivery_id.to_string());
    event.authorized_upstream = true;
    event.one_shot = true;
    // A payload from outside drives no tool the route's configuration does not list.
    event.toolsets = Some(route.toolsets.clone());
    if let Deliver::Chat(target) = &route.deliver {
        event.reply_target = Some(target.clone());
    }
    event
}

/// The sender's delivery id, if it sent one: for logs and the answer only.
fn sender_delivery_id(headers: &HeaderMap) -> Result<Option<String>, String> {
    for name in ["x-github-delivery", "x-request-id"] {
        if let Some(value) = headers.get(name) {
            let id = value.to_str().map(str::trim).unwrap_or("");
            if id.is_empty() || id.len() > MAX_DELIVERY_ID_LEN {
                return Err(format!("{name} must be 1 to {MAX_DELIVERY_ID_LEN} visible ASCII characters"));
            }
            return Ok(Some(id.to_string()));
        }
    }
    Ok(None)
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
    fn delivery_id_sources() {
        let mut headers = HeaderMap::new();
        assert_eq!(sender_delivery_id(&headers), Ok(None));
        headers.insert("x-request-id", HeaderValue::from_static("req-1"));
        assert_eq!(sender_delivery_id(&headers), Ok(Some("req-1".to_string())));
        headers.insert("x-github-delivery", HeaderValue::from_static("gh-1"));
        assert_eq!(sender_delivery_id(&headers), Ok(Some("gh-1".to_string())));
        headers.insert("x-github-delivery", HeaderValue::from_static(" "));
        assert!(sender_delivery_id(&headers).is_err());
    }

    #[tokio::test]
    async fn capped_read() {
        assert!(matches!(read_capped(Body::from(vec![0u8; 10]), 10).await, Ok(b) if b.len() == 10));
        assert!(matches!(read_capped(Body::from(vec![0u8; 11]), 10).await, Err(ReadError::TooLarge)));
    }
}
