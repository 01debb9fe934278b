//! The bearer key, and the lockout of peers that keep presenting wrong ones: after repeated
//! failures from one address, every request from it is answered 429 for a while, so a key cannot
//! be guessed at speed.

use crate::error::ApiError;
use crate::server::AppState;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hermes_http_guard::{bearer_matches, locked_out, retry_after_secs};
use std::net::SocketAddr;
use std::time::Instant;

/// Paths served without a key: probes must work before anyone has one.
fn is_open(path: &str) -> bool {
    matches!(path, "/health" | "/v1/health")
}

/// Checks the key of every request but the probes; a locked-out peer is refused before its key
/// is even looked at.
pub(crate) async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(key) = state.settings.effective_key() else {
        return next.run(request).await;
    };
    if is_open(request.uri().path()) {
        return next.run(request).await;
    }
    // Always present when served by `server::serve`; without it there is no peer to count.
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip());
    let throttle = &state.guards.throttle;
    if let Some(peer) = peer
        && let Err(wait) = throttle.check(peer, Instant::now())
    {
        let mut response = ApiError::from(locked_out(wait)).into_response();
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs(wait)));
        return response;
    }
    if !bearer_matches(request.headers(), key) {
        if let Some(peer) = peer {
            throttle.record_failure(peer, Instant::now());
        }
        return ApiError::unauthorized().into_response();
    }
    next.run(request).await
}
