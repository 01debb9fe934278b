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

/// Idle connections kept per provider host; calls beyond them open a new one (a model call takes
/// seconds, a handshake milliseconds).
const IDLE_CONNECTIONS_PER_HOST: usize = 16;

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
            .redirect(same_origin_redirects())
            // Idle connections are kept for reuse, but not one per turn that ever ran at once:
            // each holds buffers and a task (about 20 KB) for 90 s (issue 33, point 9).
            .pool_max_idle_per_host(IDLE_CONNECTIONS_PER_HOST)
            .build()
            .map_err(|e| ProviderError::Fatal(format!("cannot build the HTTP client for model calls: {e}")))?;
        // Two first calls racing may both build one; the loser's is dropped.
        Ok(self.inner.built.get_or_init(|| client))
    }
}

/// Redirects are followed only within the same origin (scheme, host, port), at most five. Model
/// calls carry the key in headers (`Authorization`, Anthropic's `x-api-key`); a provider or a
/// proxy redirecting elsewhere must not receive it.
pub(crate) fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt.previous().first().is_some_and(|first| first.origin() == attempt.url().origin());
        if attempt.previous().len() > 5 || !same_origin { attempt.stop() } else { attempt.follow() }
    })
}

/// The `Retry-After` header in seconds (capped at an hour).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .map(|secs| Duration::from_secs_f64(secs.clamp(0.0, 3600.0)))
}

/// A request that failed before an answer arrived; the URL is left out of the message.
pub(crate) fn transport_error(e: reqwest::Error) -> ProviderError {
    ProviderError::Transient(format!("cannot reach the model provider: {}", e.without_url()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderMap;
    use axum::response::Redirect;
    use std::sync::Mutex;

    async fn serve(app: axum::Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    /// A redirect to another origin must not carry the model key there.
    #[tokio::test]
    async fn keys_never_follow_a_redirect_to_another_origin() {
        let seen: Arc<Mutex<Vec<HeaderMap>>> = Arc::default();
        let elsewhere = {
            let seen = seen.clone();
            serve(axum::Router::new().fallback(move |headers: HeaderMap| {
                seen.lock().unwrap().push(headers);
                async { "got it" }
            }))
            .await
        };
        let target = format!("{elsewhere}/steal");
        let provider = serve(axum::Router::new().fallback(move || {
            let target = target.clone();
            async move { Redirect::temporary(&target) }
        }))
        .await;
        let client = ModelClient::new(Duration::from_secs(5));
        let response = client
            .get()
            .unwrap()
            .post(format!("{provider}/v1/messages"))
            .header("x-api-key", "sk-ant-secret")
            .bearer_auth("sk-secret")
            .send()
            .await
            .unwrap();
        assert!(response.status().is_redirection(), "the redirect is not followed: {}", response.status());
        assert!(seen.lock().unwrap().is_empty(), "the other origin received nothing");
    }
}
