//! What every provider's HTTP side shares: the client (timeouts), reading `Retry-After`, and
//! classifying a request that never got an answer.

use super::ProviderError;
use std::time::Duration;

/// The HTTP client for model calls: a bounded connect time, and `request_timeout` between reads
/// (a stream may run long as long as it keeps sending).
pub fn client(request_timeout: Duration) -> Result<reqwest::Client, ProviderError> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(request_timeout)
        .build()
        .map_err(|e| ProviderError::Fatal(format!("cannot build the HTTP client: {e}")))
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
