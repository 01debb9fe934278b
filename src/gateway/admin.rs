//! The loopback admin listener: `/health` (the process is alive) and `/readyz` (every adapter is
//! connected and the gateway is not draining), both from the health board.

use super::health::HealthBoard;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub fn routes(board: Arc<HealthBoard>) -> Router {
    Router::new().route("/health", get(health)).route("/readyz", get(readyz)).with_state(board)
}

async fn health(State(board): State<Arc<HealthBoard>>) -> impl IntoResponse {
    let snap = board.snapshot();
    Json(serde_json::json!({ "status": "ok", "gateway": snap.gateway, "adapters": snap.adapters }))
}

async fn readyz(State(board): State<Arc<HealthBoard>>) -> impl IntoResponse {
    let snap = board.snapshot();
    let status = if snap.ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (
        status,
        Json(
            serde_json::json!({ "status": if snap.ready { "ready" } else { "not_ready" }, "gateway": snap.gateway, "adapters": snap.adapters }),
        ),
    )
}

/// Bind and serve until `stop`; returns the bound address.
pub async fn serve(addr: SocketAddr, board: Arc<HealthBoard>, stop: CancellationToken) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        let served = axum::serve(listener, routes(board)).with_graceful_shutdown(async move { stop.cancelled().await }).await;
        if let Err(e) = served {
            tracing::error!(error = %e, "admin listener failed");
        }
    });
    Ok(bound)
}
