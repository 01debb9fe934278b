//! The webhook's HTTP listener: `POST <path of webhook_url>` and nothing else. Telegram is a
//! server, never a web page, so a request with `Origin` is refused; bodies must be JSON and
//! small (an update is a few KB; the limit leaves room for long messages and their entities).
//! Each request is queued to `super::run`'s loop and answered with what that loop decided.

use super::deliver::{Delivery, Reply};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hermes_adapter::{AdapterContext, AdapterError};
use hermes_http_guard::{AllowedOrigins, Refusal, check_origin, require_json};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// The running server; ends with the gateway's shutdown or an error.
pub(super) type Server = Pin<Box<dyn Future<Output = Result<(), AdapterError>> + Send>>;

/// Largest update body accepted.
const MAX_BODY_BYTES: usize = 1024 * 1024;
const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

#[derive(Clone)]
struct App {
    deliveries: mpsc::Sender<Delivery>,
    ctx: AdapterContext,
}

/// Bind `addr` and serve `POST <path>`, queueing each request to `deliveries`.
pub(super) async fn bind(
    addr: SocketAddr,
    path: String,
    deliveries: mpsc::Sender<Delivery>,
    ctx: AdapterContext,
) -> Result<Server, AdapterError> {
    let listener = TcpListener::bind(addr).await.map_err(|e| {
        AdapterError::retryable("telegram_webhook_bind", format!("cannot listen on {addr} (platforms.telegram.webhook_host/port): {e}"))
    })?;
    let path = if path.is_empty() { "/".to_string() } else { path };
    let shutdown = ctx.shutdown.clone();
    let app = App { deliveries, ctx };
    let router = Router::new().route(&path, post(update)).layer(DefaultBodyLimit::max(MAX_BODY_BYTES)).with_state(app);
    tracing::info!(%addr, %path, "Telegram webhook listening");
    Ok(Box::pin(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
            .map_err(|e| AdapterError::retryable("telegram_webhook_serve", format!("the webhook listener failed: {e}")))
    }))
}

async fn update(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    app.ctx.health.progress();
    if let Err(refusal) = check_origin(&headers, &AllowedOrigins::None).and_then(|()| require_json(&headers)) {
        return refuse(refusal);
    }
    let (reply, answer) = oneshot::channel();
    let secret = headers.get(SECRET_HEADER).map(|v| v.as_bytes().to_vec());
    let queued = app.deliveries.send(Delivery { secret, body: body.to_vec(), reply }).await;
    // Not handled (the gateway is stopping): Telegram keeps the update and sends it again.
    let reply = match queued {
        Ok(()) => answer.await.unwrap_or(Reply::Unavailable),
        Err(_) => Reply::Unavailable,
    };
    let status = StatusCode::from_u16(reply.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    status.into_response()
}

fn refuse(refusal: Refusal) -> Response {
    (refusal.status, refusal.message).into_response()
}
