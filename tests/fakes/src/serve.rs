//! Shared plumbing for the fake servers: bind a listener, run an axum router
//! on a background task, and stop it when the owning handle says so.
//!
//! Stopping is a watch channel rather than task abortion because axum runs
//! each connection on its own task: aborting the accept loop would leave
//! in-flight connections (e.g. a deliberately hung request) alive forever.
//! Handlers that can block (hang, delay) select on [`ShutdownSignal`] so the
//! graceful shutdown can actually complete.

use std::io;
use std::net::SocketAddr;

use axum::Router;
use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Owner side of the stop signal. Dropping it stops the server, which is how
/// "stops when the last handle drops" is implemented: handles share one
/// `Arc<Shutdown>`.
#[derive(Debug)]
pub(crate) struct Shutdown {
    tx: watch::Sender<bool>,
}

impl Shutdown {
    pub(crate) fn new() -> Self {
        Self { tx: watch::channel(false).0 }
    }

    pub(crate) fn trigger(&self) {
        self.tx.send_replace(true);
    }

    pub(crate) fn signal(&self) -> ShutdownSignal {
        ShutdownSignal(self.tx.subscribe())
    }
}

impl Drop for Shutdown {
    fn drop(&mut self) {
        self.trigger();
    }
}

/// Cloneable observer side of the stop signal, held by handlers.
#[derive(Debug, Clone)]
pub(crate) struct ShutdownSignal(watch::Receiver<bool>);

impl ShutdownSignal {
    /// Resolves once shutdown was requested (or the owner vanished, which
    /// means the same thing).
    pub(crate) async fn wait(&self) {
        let mut rx = self.0.clone();
        // An Err means the sender was dropped: that is a shutdown too.
        let _ = rx.wait_for(|stopped| *stopped).await;
    }
}

/// Binds `addr` and serves `router` on a spawned task until `signal` fires.
/// Returns the actually bound address (useful with port 0).
pub(crate) async fn spawn(addr: SocketAddr, router: Router, signal: ShutdownSignal) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    // Small SSE writes would otherwise sit in Nagle's buffer, adding latency
    // that tests and benchmarks would wrongly attribute to hermes.
    let listener = listener.tap_io(|tcp| {
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!("fake server: set_nodelay failed: {err}");
        }
    });
    tokio::spawn(async move {
        let result = axum::serve(listener, router).with_graceful_shutdown(async move { signal.wait().await }).await;
        if let Err(err) = result {
            tracing::warn!("fake server on {local} stopped with error: {err}");
        }
    });
    Ok(local)
}
