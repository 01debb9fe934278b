//! What every provider's HTTP side shares: the client (timeouts, built on first use), reading
//! `Retry-After`, and classifying a request that never got an answer.

use super::ProviderError;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The HTTP client for model calls — a bounded connect time, and `request_timeout` between reads
/// (a stream may run long as long as it keeps sending) — built when the first call needs it.
///
/// Building it loads and parses every CA certificate of the system (the bundle and the
/// directory: ~290 PEM certificates), which was over half of the gateway's start-up work and
/// left that code and the TLS stack resident in a gateway nobody had written to yet. A host
/// without CA certificates now learns it from the first model call's error instead of at start.
/// Clones share one client and so one connection pool.
#[derive(Clone, Debug)]
pub struct ModelClient {
    inner: Arc<LazyClient>,
}

#[derive(Debug)]
struct LazyClient {
    request_timeout: Duration,
    built: OnceLock<reqwest::Client>,
}

impl ModelClient {
    pub fn new(request_timeout: Duration) -> Self {
        Self { inner: Arc::new(LazyClient { request_timeout, built: OnceLock::new() }) }
    }

    /// The client, built on the first call. A failed build is not remembered: the next call tries
    /// again (the system's certificates may have been installed since).
    pub fn get(&self) -> Result<&reqwest::Client, ProviderError> {
        if let Some(client) = self.inner.built.get() {
            return Ok(client);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(self.inner.request_timeout)
            .build()
            .map_err(|e| ProviderError::Fatal(format!("cannot build the HTTP client for model calls: {e}")))?;
        // Two first calls racing may both build one; the loser's is dropped.
        Ok(self.inner.built.get_or_init(|| client))
    }
}

/// The `Retry-After` header in seconds (capped at an hour).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .map(|secs| Duration::from_secs_f64(secs.clamp(0.0, 3600.0)))
}

/// A request that failed before an answer arrived; the URL is left out of the message.
pub fn transport_error(e: reqwest::Error) -> ProviderError {
    ProviderError::Transient(format!("cannot reach the model provider: {}", e.without_url()))
}
