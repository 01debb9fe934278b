//! The streamable HTTP listener: `POST /mcp` carries one JSON-RPC message and is answered with
//! JSON (or 202 for a notification); `GET` and `DELETE /mcp` are 405, as a server without
//! server-initiated streams or sessions answers them. In front of every route, in this order:
//! web pages are refused (a request with `Origin`, a foreign `Host` on loopback), a peer that
//! keeps failing the key is locked out, then the key itself. Authorised like the API server.

use super::{ServeHandles, protocol};
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use hermes_http_guard::{AllowedOrigins, AuthThrottle, HostPolicy, Refusal, ThrottleLimits};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The largest request body: a message with a long text, never a file.
const MAX_BODY_BYTES: usize = 256 * 1024;

/// What the guards check against.
struct Gate {
    key: crate::config::Secret,
    hosts: HostPolicy,
    throttle: AuthThrottle,
}

#[derive(Clone)]
struct Served {
    handles: ServeHandles,
    gate: Arc<Gate>,
}

/// Bind `addr` and serve until `stop`; returns the bound address.
pub(crate) async fn serve(
    addr: SocketAddr,
    key: crate::config::Secret,
    handles: ServeHandles,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let hosts = if addr.ip().is_loopback() { HostPolicy::loopback(&addr.ip().to_string()) } else { HostPolicy::Any };
    let gate = Arc::new(Gate { key, hosts, throttle: AuthThrottle::new(ThrottleLimits::default()) });
    let app = routes(Served { handles, gate }).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(async move { stop.cancelled().await }).await {
            tracing::error!(error = %e, "the MCP server's listener failed");
        }
    });
    Ok(bound)
}

fn routes(served: Served) -> Router {
    Router::new()
        .route("/mcp", post(message).get(no_stream).delete(no_stream))
        .fallback(|| async { refusal(Refusal::new(StatusCode::NOT_FOUND, "not_found", "MCP is served at /mcp")) })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(served.clone(), guard))
        .with_state(served)
}

/// Web pages, locked-out peers and requests without the key never reach a tool.
async fn guard(State(served): State<Served>, request: Request, next: Next) -> Response {
    let gate = &served.gate;
    let checked = gate.hosts.check(request.headers(), request.uri());
    if let Err(refused) = checked.and_then(|()| hermes_http_guard::check_origin(request.headers(), &AllowedOrigins::None)) {
        return refusal(refused);
    }
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip());
    if let Some(peer) = peer
        && let Err(wait) = gate.throttle.check(peer, Instant::now())
    {
        let mut response = refusal(hermes_http_guard::locked_out(wait));
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(hermes_http_guard::retry_after_secs(wait)));
        return response;
    }
    if !hermes_http_guard::bearer_matches(request.headers(), gate.key.expose()) {
        if let Some(peer) = peer {
            gate.throttle.record_failure(peer, Instant::now());
        }
        let unauthorized =
            Refusal::new(StatusCode::UNAUTHORIZED, "invalid_api_key", "send the gateway's mcp_serve key as `Authorization: Bearer <key>`");
        let mut response = refusal(unauthorized);
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return response;
    }
    next.run(request).await
}

/// One JSON-RPC message in, its answer (or 202) out.
async fn message(State(served): State<Served>, request: Request) -> Response {
    if let Err(refused) = hermes_http_guard::require_json(request.headers()) {
        return refusal(refused);
    }
    let body = match axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(_) => {
            let why = format!("the body is larger than {MAX_BODY_BYTES} bytes");
            return refusal(Refusal::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", why));
        }
    };
    match parse(&body) {
        Err(answer) => (StatusCode::BAD_REQUEST, Json(answer)).into_response(),
        Ok(message) => match protocol::handle(&served.handles, message).await {
            Some(answer) => Json(answer).into_response(),
            None => StatusCode::ACCEPTED.into_response(),
        },
    }
}

fn parse(body: &Bytes) -> Result<serde_json::Value, serde_json::Value> {
    serde_json::from_slice(body).map_err(|e| protocol::parse_error(&e.to_string()))
}

/// No server-initiated stream and no sessions to end.
async fn no_stream() -> Response {
    let mut response = refusal(Refusal::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this server answers each POST with JSON; it opens no event stream and keeps no session",
    ));
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}

fn refusal(refused: Refusal) -> Response {
    (refused.status, Json(serde_json::json!({ "error": { "code": refused.code, "message": refused.message } }))).into_response()
}
