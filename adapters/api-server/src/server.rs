//! The HTTP surface: routes, the authentication gate, health and discovery endpoints, JSON
//! 404/405 answers, and serving until shutdown.

use crate::conversation::SESSION_HEADER;
use crate::error::ApiError;
use crate::json_body::MAX_BODY_BYTES;
use crate::pending::PendingReplies;
use crate::settings::ApiServerSettings;
use crate::{chat, sessions};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use hermes_adapter::AdapterContext;
use serde_json::json;
use std::sync::Arc;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub ctx: AdapterContext,
    pub pending: PendingReplies,
    pub settings: Arc<ApiServerSettings>,
    /// When the server started, advertised as the model's `created`.
    pub started: i64,
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Tell the client which conversation answered, so it can continue it. An id that is not a valid
/// header value is left out rather than failing an answer that is otherwise complete.
pub(crate) fn with_session_header(mut response: Response, conversation_id: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(conversation_id) {
        response.headers_mut().insert(HeaderName::from_static(SESSION_HEADER), value);
    }
    response
}

/// Paths served without a key: probes must work before anyone has one.
fn is_open(path: &str) -> bool {
    matches!(path, "/health" | "/v1/health")
}

/// Whether the request carries `Authorization: Bearer <key>`.
fn authorized(headers: &HeaderMap, key: &str) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let Some((scheme, token)) = value.trim().split_once(' ') else {
        return false;
    };
    // Constant time, so the key cannot be guessed byte by byte from response timings.
    scheme.eq_ignore_ascii_case("bearer") && bool::from(token.trim().as_bytes().ct_eq(key.as_bytes()))
}

/// Runs before routing: counts the request as progress and checks the key.
async fn gate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    state.ctx.health.progress();
    if !is_open(request.uri().path())
        && let Some(key) = state.settings.effective_key()
        && !authorized(request.headers(), key)
    {
        return ApiError::unauthorized().into_response();
    }
    next.run(request).await
}

async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok", "platform": crate::conversation::PLATFORM}))
}

async fn models(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({
        "object": "list",
        "data": [{
            "id": state.settings.model_name,
            "object": "model",
            "created": state.started,
            "owned_by": "hermes",
        }],
    }))
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!("Unknown route: {method} {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, format!("Method {method} is not allowed on {}", uri.path()))
        .with_code("method_not_allowed")
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/v1/health", get(health))
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat::completions))
        .route("/api/sessions", post(sessions::create))
        .route("/api/sessions/{id}", delete(sessions::delete))
        .route("/api/sessions/{id}/messages", post(sessions::post_message).get(sessions::get_messages))
        // After the routes: it applies to those already added.
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        // Outermost, so it also guards unknown routes.
        .layer(middleware::from_fn_with_state(state.clone(), gate))
        .with_state(state)
}

/// Serve on `listener` until `state.ctx.shutdown` fires, then let in-flight requests finish.
pub(crate) async fn serve(listener: TcpListener, state: AppState) -> std::io::Result<()> {
    let shutdown = state.ctx.shutdown.clone();
    // Streamed answers are many small writes; with Nagle's algorithm each would wait for the
    // client's delayed ACK (~40 ms).
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "api_server: cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, router(state)).with_graceful_shutdown(shutdown.cancelled_owned()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(auth: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(auth).unwrap());
        headers
    }

    #[test]
    fn bearer_key_is_checked_exactly() {
        assert!(authorized(&headers("Bearer k3y"), "k3y"));
        assert!(authorized(&headers("bearer k3y"), "k3y"));
        assert!(!authorized(&headers("Bearer k3"), "k3y"));
        assert!(!authorized(&headers("Basic k3y"), "k3y"));
        assert!(!authorized(&headers("k3y"), "k3y"));
        assert!(!authorized(&HeaderMap::new(), "k3y"));
    }
}
