//! The loopback admin listener: `/health` (the process is alive), `/readyz` (every enabled adapter
//! is connected and making progress, and the gateway is neither starting, standing by for
//! another replica's lead (its `/health` says `"gateway": "standby"`) nor draining; see
//! [`crate::gateway::ops::health`] for how progress is judged) and `/metrics` (Prometheus text, see
//! [`crate::observe::metrics`]). Both bodies list the MCP servers (`mcp`: name, state, tools, last
//! error) apart from the adapters: a server that is down does not make the gateway unready.
//!
//! It has no key, so web pages are kept out: a request carrying `Origin` is refused (403), and
//! on a loopback address the `Host` must name this machine (421), so that a DNS-rebinding page
//! cannot read the gateway's state.

use crate::gateway::ops::health::{AdapterState, HealthBoard};
use crate::mcp::ServerState;
use crate::observe::metrics;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use hermes_http_guard::{AllowedOrigins, HostPolicy, check_origin};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The admin routes, answering only to the Host names `hosts` allows.
pub(crate) fn routes(board: Arc<HealthBoard>, hosts: HostPolicy) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/readyz", get(readyz))
        .route("/metrics", get(prometheus))
        .with_state(board)
        .layer(middleware::from_fn_with_state(Arc::new(hosts), refuse_browsers))
}

async fn refuse_browsers(State(hosts): State<Arc<HostPolicy>>, request: Request, next: Next) -> Response {
    match hosts.check(request.headers(), request.uri()).and_then(|()| check_origin(request.headers(), &AllowedOrigins::None)) {
        Ok(()) => next.run(request).await,
        Err(refusal) => (refusal.status, Json(serde_json::json!({ "error": refusal.message }))).into_response(),
    }
}

async fn health(State(board): State<Arc<HealthBoard>>) -> impl IntoResponse {
    let snap = board.snapshot();
    Json(serde_json::json!({ "status": "ok", "gateway": snap.gateway, "adapters": snap.adapters, "mcp": snap.mcp }))
}

async fn readyz(State(board): State<Arc<HealthBoard>>) -> impl IntoResponse {
    let snap = board.snapshot();
    let status = if snap.ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (
        status,
        Json(serde_json::json!({
            "status": if snap.ready { "ready" } else { "not_ready" },
            "gateway": snap.gateway,
            "adapters": snap.adapters,
            "mcp": snap.mcp,
        })),
    )
}

/// The metrics, with each adapter's state read from the board now.
async fn prometheus(State(board): State<Arc<HealthBoard>>) -> Response {
    let snap = board.snapshot();
    let all: Vec<&'static str> = AdapterState::ALL.iter().map(|s| s.as_str()).collect();
    let metrics = metrics::global();
    metrics.set_adapter_states(snap.adapters.iter().map(|a| (a.platform.as_str(), a.state.as_str())), &all);
    metrics.set_mcp_servers(snap.mcp.iter().map(|s| (s.name.as_str(), s.state == ServerState::Connected.as_str(), s.tools)));
    match metrics.render() {
        Ok(text) => ([(axum::http::header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cannot render the metrics");
            (StatusCode::INTERNAL_SERVER_ERROR, "cannot render the metrics\n").into_response()
        }
    }
}

/// Bind and serve until `stop`; returns the bound address.
pub(crate) async fn serve(addr: SocketAddr, board: Arc<HealthBoard>, stop: CancellationToken) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    // On a public address the operator chose to expose it (probes from other machines name it
    // however they reach it); on loopback only loopback names are real.
    let hosts = if addr.ip().is_loopback() { HostPolicy::loopback(&addr.ip().to_string()) } else { HostPolicy::Any };
    tokio::spawn(async move {
        let served = axum::serve(listener, routes(board, hosts)).with_graceful_shutdown(async move { stop.cancelled().await }).await;
        if let Err(e) = served {
            tracing::error!(error = %e, "admin listener failed");
        }
    });
    Ok(bound)
}
