//! Webhook callback sink: records every POST to any path and can be told to
//! fail the next few deliveries, to exercise the sender's retry logic.

use std::collections::VecDeque;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::serve::{self, Shutdown};

/// One POST the receiver got.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// Request path, without the query string.
    pub path: String,
    /// Query string, if any (callbacks sometimes carry tokens there).
    pub query: Option<String>,
    /// All headers, lowercase names, in arrival order.
    pub headers: Vec<(String, String)>,
    /// Parsed JSON body, or `Null` if the body was not JSON.
    pub body: Value,
    /// The body as text (lossy UTF-8), for signature checks over raw bytes.
    pub raw: String,
    /// The status the receiver answered with.
    pub status: u16,
}

impl Received {
    /// Case-insensitive header lookup (first value).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Handle to a running receiver. Clones share it; it stops when the last
/// clone drops or on [`Receiver::shutdown`].
#[derive(Clone)]
pub struct Receiver {
    inner: Arc<Inner>,
}

struct Inner {
    state: Arc<AppState>,
    addr: SocketAddr,
    // Dropped together with the last handle, which stops the server.
    shutdown: Shutdown,
}

struct AppState {
    received: Mutex<Vec<Received>>,
    /// Count of recorded requests; a watch so waiters wake up.
    seen: watch::Sender<usize>,
    /// Statuses to answer with, one per upcoming request.
    failures: Mutex<VecDeque<u16>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Receiver {
    /// Starts on `127.0.0.1:0`.
    ///
    /// # Panics
    /// If the loopback listener cannot be bound (a broken test host).
    pub async fn start() -> Receiver {
        let shutdown = Shutdown::new();
        let state =
            Arc::new(AppState { received: Mutex::new(Vec::new()), seen: watch::channel(0).0, failures: Mutex::new(VecDeque::new()) });
        let router = Router::new()
            .route("/", post(receive))
            .route("/{*path}", post(receive))
            // Payload size is the sender's concern; never reject here.
            .layer(DefaultBodyLimit::disable())
            .with_state(Arc::clone(&state));
        let addr = serve::spawn(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), router, shutdown.signal())
            .await
            .expect("Receiver: failed to bind 127.0.0.1:0");
        Receiver { inner: Arc::new(Inner { state, addr, shutdown }) }
    }

    /// Absolute URL for `path` (a leading `/` is optional).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.inner.addr, path.strip_prefix('/').unwrap_or(path))
    }

    /// Every POST so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        lock(&self.inner.state.received).clone()
    }

    /// Waits until at least `n` POSTs arrived; `false` on timeout.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> bool {
        let mut seen = self.inner.state.seen.subscribe();
        matches!(tokio::time::timeout(timeout, seen.wait_for(|count| *count >= n)).await, Ok(Ok(_)))
    }

    /// Answers `status` to the next `times` requests (still recording them).
    /// Calls accumulate: a second call queues behind the first.
    pub fn fail_next(&self, status: u16, times: usize) {
        lock(&self.inner.state.failures).extend(std::iter::repeat_n(status, times));
    }

    /// Stops accepting connections. Idempotent.
    pub fn shutdown(&self) {
        self.inner.shutdown.trigger();
    }
}

impl fmt::Debug for Receiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").field("addr", &self.inner.addr).finish_non_exhaustive()
    }
}

async fn receive(State(state): State<Arc<AppState>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    // An unrepresentable scripted status is a test bug; answer 500 so the
    // failure is still a failure rather than a panic in the server task.
    let status =
        lock(&state.failures).pop_front().map_or(StatusCode::OK, |s| StatusCode::from_u16(s).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    let received = Received {
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        headers: headers.iter().map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        raw: String::from_utf8_lossy(&body).into_owned(),
        status: status.as_u16(),
    };
    lock(&state.received).push(received);
    state.seen.send_modify(|count| *count += 1);

    let body = if status.is_success() { json!({"ok": true}) } else { json!({"ok": false, "error": "injected failure (fake receiver)"}) };
    (status, axum::Json(body)).into_response()
}
