//! The HTTP surface: routes, the order of the guards in front of them, health and discovery
//! endpoints, JSON 404/405 answers, and serving until shutdown.

use crate::conversation::SESSION_HEADER;
use crate::error::ApiError;
use crate::guard::{self, Guards};
use crate::json_body::MAX_BODY_BYTES;
use crate::pending::PendingReplies;
use crate::settings::ApiServerSettings;
use crate::{auth, chat, sessions};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::middleware;
use axum::response::Response;
use axum::routing::{delete, get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use hermes_adapter::AdapterContext;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub ctx: AdapterContext,
    pub pending: PendingReplies,
    pub settings: Arc<ApiServerSettings>,
    pub guards: Arc<Guards>,
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
    let router = Router::new()
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
        // Layers run outermost (last added) first, and also guard unknown routes.
        .layer(middleware::from_fn(guard::json_bodies_only))
        .layer(middleware::from_fn_with_state(state.clone(), auth::authenticate));
    // CORS outside authentication: a preflight carries no key.
    let router = match guard::cors_layer(&state.guards.origins) {
        Some(cors) => router.layer(cors),
        None => router,
    };
    router.layer(middleware::from_fn_with_state(state.clone(), guard::refuse_foreign_pages)).with_state(state)
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
    // The peer's address is what authentication failures are counted by.
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await
}
