//! The adapter's settings and the security check that decides whether they may be served.
//!
//! An API server without a key on a public address is a remote shell for anyone who finds it
//! (Hermes `#6439`), so a missing key is refused outright on non-loopback hosts and allowed on
//! loopback only after an explicit opt-in.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

/// How the API server listens and authenticates.
#[derive(Clone)]
pub struct ApiServerSettings {
    /// Address to bind (`127.0.0.1`, `::1`, `localhost`, `0.0.0.0`, …).
    pub host: String,
    /// Port to bind; 0 picks a free one (see [`crate::ApiServerAdapter::local_addr`]).
    pub port: u16,
    /// The bearer key clients must present; `None` (or empty) disables authentication.
    pub key: Option<String>,
    /// Serve without a key; only honoured on a loopback host.
    pub allow_no_auth: bool,
    /// The model id advertised by `/v1/models` and echoed when a request names none.
    pub model_name: String,
    /// How long a non-streaming request waits for the answer (and a stream for its next event).
    pub request_timeout: Duration,
}

impl Default for ApiServerSettings {
    /// Hermes' defaults: loopback, port 8642, no key (so [`crate::ApiServerAdapter::new`] refuses
    /// them until a key or `allow_no_auth` is set).
    fn default() -> Self {
        Self {
            host: "127.0.0.1".to_string(),
            port: 8642,
            key: None,
            allow_no_auth: false,
            model_name: "hermes-agent".to_string(),
            request_timeout: Duration::from_secs(300),
        }
    }
}

// Hand-written so the key never reaches a log line.
impl fmt::Debug for ApiServerSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiServerSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field("allow_no_auth", &self.allow_no_auth)
            .field("model_name", &self.model_name)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

/// Settings the adapter refuses to serve.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApiServerError {
    #[error(
        "refusing to serve the API server on non-loopback host {host} without a key: set \
         API_SERVER_KEY (platforms.api_server.key), or bind a loopback address with \
         API_SERVER_HOST=127.0.0.1 (platforms.api_server.allow_no_auth never applies to public hosts)"
    )]
    NoKeyOnPublicHost { host: String },
    #[error(
        "the API server has no key: set API_SERVER_KEY (platforms.api_server.key), or set \
         platforms.api_server.allow_no_auth: true to serve loopback host {host} without authentication"
    )]
    NoKeyWithoutOptIn { host: String },
    #[error("platforms.api_server.model_name must not be empty")]
    EmptyModelName,
}

impl ApiServerSettings {
    /// The configured key, treating an empty string as no key.
    pub(crate) fn effective_key(&self) -> Option<&str> {
        self.key.as_deref().filter(|k| !k.is_empty())
    }

    /// Refuse settings that would expose an unauthenticated agent.
    pub(crate) fn validate(&self) -> Result<(), ApiServerError> {
        if self.model_name.trim().is_empty() {
            return Err(ApiServerError::EmptyModelName);
        }
        if self.effective_key().is_some() {
            return Ok(());
        }
        if !is_loopback_host(&self.host) {
            return Err(ApiServerError::NoKeyOnPublicHost { host: self.host.clone() });
        }
        if !self.allow_no_auth {
            return Err(ApiServerError::NoKeyWithoutOptIn { host: self.host.clone() });
        }
        Ok(())
    }

    /// The host as `bind` wants it: IPv6 literals without their URL brackets.
    pub(crate) fn bind_host(&self) -> &str {
        strip_brackets(&self.host)
    }
}

fn strip_brackets(host: &str) -> &str {
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host)
}

/// Whether `host` only accepts connections from this machine. Names other than `localhost` are
/// treated as public: what they resolve to is not ours to trust.
fn is_loopback_host(host: &str) -> bool {
    let host = strip_brackets(host.trim());
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<IpAddr>().map(|ip| ip.is_loopback()).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(host: &str, key: Option<&str>, allow_no_auth: bool) -> ApiServerSettings {
        ApiServerSettings { host: host.to_string(), key: key.map(str::to_string), allow_no_auth, ..ApiServerSettings::default() }
    }

    #[test]
    fn loopback_detection() {
        for host in ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["0.0.0.0", "::", "192.168.1.2", "example.com", "localhost.example.com"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn empty_key_counts_as_no_key() {
        let err = settings("0.0.0.0", Some(""), true).validate().unwrap_err();
        assert!(matches!(err, ApiServerError::NoKeyOnPublicHost { .. }));
    }

    #[test]
    fn messages_name_the_settings_to_change() {
        let public = settings("0.0.0.0", None, true).validate().unwrap_err().to_string();
        assert!(public.contains("API_SERVER_KEY") && public.contains("API_SERVER_HOST"), "{public}");
        let loopback = settings("127.0.0.1", None, false).validate().unwrap_err().to_string();
        assert!(loopback.contains("platforms.api_server.key"), "{loopback}");
        assert!(loopback.contains("platforms.api_server.allow_no_auth"), "{loopback}");
    }

    #[test]
    fn debug_redacts_the_key() {
        let shown = format!("{:?}", settings("127.0.0.1", Some("sekrit"), false));
        assert!(!shown.contains("sekrit"));
    }

    #[test]
    fn bracketed_ipv6_is_unwrapped_for_bind() {
        assert_eq!(settings("[::1]", None, true).bind_host(), "::1");
        assert_eq!(settings("127.0.0.1", None, true).bind_host(), "127.0.0.1");
    }
}
