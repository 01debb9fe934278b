//! One supervisor per enabled server: connect and list (each bounded by `connect_timeout`),
//! publish, then watch the session, re-listing on `tools/list_changed`; on a transport failure
//! mark the server down (its tools stay registered), kill and reap the old child, and reconnect
//! with capped exponential backoff, forever.

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

/// One connection from start to end: connect → publish its tools → serve until the transport
/// ends or `stop` → tear down. `true` if it got as far as publishing tools (the backoff restarts).
#[cfg(feature = "mcp")]
async fn run_once(inner: &Arc<Inner>, slot: &Arc<Slot>, stop: &CancellationToken) -> bool {
    let Some(session) = connect(inner, slot, stop).await else { return false };
    let mut live = Live::new(session);
    let published = publish_tools(inner, slot, stop, &mut live).await;
    if published {
        serve(inner, slot, stop, &mut live).await;
    }
    tear_down(slot, live).await;
    published
}

/// A session the supervisor holds from connect to tear-down.
#[cfg(feature = "mcp")]
struct Live {
    token: rmcp::service::RunningServiceCancellationToken,
    peer: super::transport::McpPeer,
    /// One message per `notifications/tools/list_changed`.
    changed: tokio::sync::mpsc::UnboundedReceiver<()>,
    child: Option<super::child::ServerChild>,
    /// Resolves when the session ends: transport closed, or `token` cancelled.
    ended: futures::future::BoxFuture<'static, ()>,
    /// `ended` has resolved (a finished future must not be polled again).
    finished: bool,
}

#[cfg(feature = "mcp")]
impl Live {
    fn new(session: super::transport::Session) -> Self {
        let running = session.running;
        Self {
            token: running.cancellation_token(),
            peer: running.peer().clone(),
            changed: session.changed,
            child: session.child,
            ended: Box::pin(async move {
                let _ = running.waiting().await;
            }),
            finished: false,
        }
    }
}

/// Spawn or reach the server and finish `initialize`, bounded by `connect_timeout`; `None` when
/// that failed (the server is marked down with why) or `stop` came first.
#[cfg(feature = "mcp")]
async fn connect(inner: &Arc<Inner>, slot: &Arc<Slot>, stop: &CancellationToken) -> Option<super::transport::Session> {
    let env = inner.env();
    let filled = super::interpolate::fill_server(&slot.name, &slot.config, &env);
    let limit = slot.config.connect_timeout();
    let connecting = super::transport::connect(&slot.name, &filled, &env, &inner.paths.logs_dir, &inner.http);
    let attempt = tokio::select! {
        _ = stop.cancelled() => return None,
        attempt = tokio::time::timeout(limit, connecting) => attempt,
    };
    match attempt {
        Ok(Ok(session)) => Some(session),
        Ok(Err(e)) => {
            slot.set_down(e);
            None
        }
        Err(_) => {
            slot.set_down(format!("no answer to initialize within {}s", limit.as_secs_f64()));
            None
        }
    }
}

/// List the server's tools and publish them; `false` when listing failed, took longer than
/// `connect_timeout`, the connection closed first (the server is marked down each time) or
/// `stop` came.
#[cfg(feature = "mcp")]
async fn publish_tools(inner: &Arc<Inner>, slot: &Arc<Slot>, stop: &CancellationToken, live: &mut Live) -> bool {
    let limit = slot.config.connect_timeout();
    tokio::select! {
        _ = stop.cancelled() => false,
        _ = &mut live.ended => {
            live.finished = true;
            slot.set_down("the connection closed while listing tools".to_string());
            false
        }
        listed = tokio::time::timeout(limit, relist(inner, slot, &live.peer)) => listed.unwrap_or_else(|_| {
            slot.set_down(format!("no answer to tools/list within {}s", limit.as_secs_f64()));
            false
        }),
    }
}

/// Offer the session to calls and re-list on every `tools/list_changed`, until the transport
/// ends (the server is marked down; its tools stay registered) or `stop` comes.
#[cfg(feature = "mcp")]
async fn serve(inner: &Arc<Inner>, slot: &Arc<Slot>, stop: &CancellationToken, live: &mut Live) {
    slot.set_peer(Some(live.peer.clone()));
    slot.set_connected();
    tracing::info!(server = %slot.name, tools = slot.tool_count(), "MCP server connected");
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = &mut live.ended => {
                live.finished = true;
                slot.set_peer(None);
                slot.set_down("the connection closed".to_string());
                tracing::warn!(server = %slot.name, "MCP server connection closed; reconnecting");
                return;
            }
            Some(()) = live.changed.recv() => {
                // Calls answered meanwhile wait for this list (see `call_slot`). A server that
                // never answers it keeps its old tools, and cannot hold up `stop`.
                slot.relisting.send_replace(true);
                let limit = slot.config.call_timeout();
                let stopped = tokio::select! {
                    _ = stop.cancelled() => true,
                    listed = tokio::time::timeout(limit, relist(inner, slot, &live.peer)) => {
                        if listed.is_err() {
                            tracing::warn!(server = %slot.name, "MCP server did not answer tools/list after announcing a change; keeping its tools");
                        }
                        false
                    }
                };
                slot.relisting.send_replace(false);
                if stopped {
                    return;
                }
            }
        }
    }
}

/// However the session ended: withdraw it from calls, close it, wait for it to end, and kill and
/// reap the child, so a new child never starts beside the old one.
#[cfg(feature = "mcp")]
async fn tear_down(slot: &Slot, mut live: Live) {
    slot.set_peer(None);
    live.token.cancel();
    if !live.finished {
        live.ended.await;
    }
    if let Some(child) = live.child.as_mut() {
        child.kill_and_reap().await;
    }
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
    /// Connected again. The breaker is left as it is: only a call that succeeds closes it, so a
    /// server that connects and then dies on every call still opens it.
    fn set_connected(&self) {
        let mut status = self.lock_status();
        status.state = ServerState::Connected;
        status.last_error = None;
    }
}
