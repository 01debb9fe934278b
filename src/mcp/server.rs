//! One supervisor per enabled server: connect (bounded by `connect_timeout`), list, publish, then
//! watch the session; on a transport failure mark the server down (its tools stay registered),
//! kill and reap the old child, and reconnect with capped exponential backoff, forever.

use super::Slot;
#[cfg(feature = "mcp")]
use super::{Inner, ServerState};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// First wait after a failure; doubled up to [`MAX_BACKOFF`].
#[cfg(feature = "mcp")]
const FIRST_BACKOFF: std::time::Duration = std::time::Duration::from_secs(1);
#[cfg(feature = "mcp")]
const MAX_BACKOFF: std::time::Duration = std::time::Duration::from_secs(60);

/// Said by a build without the `mcp` feature for every enabled server.
#[cfg(not(feature = "mcp"))]
pub(crate) const NO_MCP_SUPPORT: &str = "this hermes was built without MCP support (cargo feature `mcp`)";

#[cfg(not(feature = "mcp"))]
pub(crate) async fn supervise(_inner: Arc<super::Inner>, slot: Arc<Slot>, _stop: CancellationToken) {
    slot.set_down(NO_MCP_SUPPORT.to_string());
}

#[cfg(feature = "mcp")]
pub(crate) async fn supervise(inner: Arc<Inner>, slot: Arc<Slot>, stop: CancellationToken) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let connected = run_once(&inner, &slot, &stop).await;
        slot.set_peer(None);
        if stop.is_cancelled() {
            return;
        }
        if connected {
            backoff = FIRST_BACKOFF;
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One connection from start to end; `true` if it got as far as publishing tools.
#[cfg(feature = "mcp")]
async fn run_once(inner: &Arc<Inner>, slot: &Arc<Slot>, stop: &CancellationToken) -> bool {
    use super::transport;
    let env = inner.env();
    let filled = super::interpolate::fill_server(&slot.name, &slot.config, &env);
    let limit = slot.config.connect_timeout();
    let attempt = tokio::select! {
        _ = stop.cancelled() => return false,
        attempt = tokio::time::timeout(limit, transport::connect(&slot.name, &filled, &env, &inner.paths.logs_dir, &inner.http)) => attempt,
    };
    let session = match attempt {
        Ok(Ok(session)) => session,
        Ok(Err(e)) => {
            slot.set_down(e);
            return false;
        }
        Err(_) => {
            slot.set_down(format!("no answer to initialize within {}s", limit.as_secs_f64()));
            return false;
        }
    };
    let token = session.running.cancellation_token();
    let peer = session.running.peer().clone();
    let mut changed = session.changed;
    let mut child = session.child;
    // Resolves when the session ends: transport closed, or `token` cancelled.
    let mut ended = Box::pin(session.running.waiting());
    let mut finished = false;
    let published = tokio::select! {
        _ = stop.cancelled() => false,
        _ = &mut ended => {
            finished = true;
            slot.set_down("the connection closed while listing tools".to_string());
            false
        }
        listed = relist(inner, slot, &peer) => listed,
    };
    if published {
        slot.set_peer(Some(peer.clone()));
        slot.set_connected();
        tracing::info!(server = %slot.name, tools = slot.tool_count(), "MCP server connected");
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = &mut ended => {
                    finished = true;
                    slot.set_peer(None);
                    slot.set_down("the connection closed".to_string());
                    tracing::warn!(server = %slot.name, "MCP server connection closed; reconnecting");
                    break;
                }
                Some(()) = changed.recv() => {
                    relist(inner, slot, &peer).await;
                }
            }
        }
    }
    slot.set_peer(None);
    token.cancel();
    if !finished {
        let _ = ended.await;
    }
    if let Some(child) = child.as_mut() {
        child.kill_and_reap().await;
    }
    published
}

/// List and publish; `false` (and the server down) when listing failed.
#[cfg(feature = "mcp")]
async fn relist(inner: &Arc<Inner>, slot: &Arc<Slot>, peer: &super::transport::McpPeer) -> bool {
    match super::transport::list(peer).await {
        Ok(offer) => {
            slot.set_offer(offer);
            inner.publish();
            true
        }
        Err(e) => {
            slot.set_down(e);
            false
        }
    }
}

#[cfg(feature = "mcp")]
impl Slot {
    fn set_connected(&self) {
        let mut status = self.lock_status();
        status.state = ServerState::Connected;
        status.last_error = None;
        drop(status);
        self.breaker_reset();
    }
}
