//! The adapter's settings and the security check that decides whether they may be served.
//!
//! An API server without a key on a public address is a remote shell for anyone who finds it
//! (Hermes `#6439`), so a missing key is refused outright on non-loopback hosts and allowed on
//! loopback only after an explicit opt-in. A key a guesser would try first is no better than
//! none, so it is refused too; and the web pages allowed to call (`cors_origins`) must be real
//! origins, never every page while no key is asked for.

use hermes_http_guard::{AllowedOrigins, HostPolicy, OriginError, WeakSecret, check_secret};
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
    /// Origins of the web pages allowed to call (`http://localhost:3000`), or `*` for any page
    /// (only with a key). Requests from any other page are refused.
    pub cors_origins: Vec<String>,
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
            cors_origins: Vec::new(),
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
            .field("cors_origins", &self.cors_origins)
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
    #[error(
        "API_SERVER_KEY (platforms.api_server.key) is guessable: {0}. Generate a key, e.g. with `openssl rand -hex 32`, and give \
         the same key to your clients"
    )]
    WeakKey(WeakSecret),
    #[error("platforms.api_server.cors_origins (API_SERVER_CORS_ORIGINS): {0}")]
    BadCorsOrigin(OriginError),
    #[error(
        "platforms.api_server.cors_origins (API_SERVER_CORS_ORIGINS) is `*` but the server has no key: every web page could \
         drive the agent. List the origins of the pages that call it, or set API_SERVER_KEY (platforms.api_server.key)"
    )]
    AnyOriginWithoutKey,
}

impl ApiServerSettings {
    /// The configured key, treating an empty string as no key.
    pub(crate) fn effective_key(&self) -> Option<&str> {
        self.key.as_deref().filter(|k| !k.is_empty())
    }

    /// Refuse settings that would expose an unauthenticated agent; the origins allowed to call.
    pub(crate) fn validate(&self) -> Result<AllowedOrigins, ApiServerError> {
        if self.model_name.trim().is_empty() {
            return Err(ApiServerError::EmptyModelName);
        }
        let origins = AllowedOrigins::parse(&self.cors_origins).map_err(ApiServerError::BadCorsOrigin)?;
        if let Some(key) = self.effective_key() {
            check_secret(key).map_err(ApiServerError::WeakKey)?;
            return Ok(origins);
        }
        if origins == AllowedOrigins::Any {
            return Err(ApiServerError::AnyOriginWithoutKey);
        }
        if !is_loopback_host(&self.host) {
            return Err(ApiServerError::NoKeyOnPublicHost { host: self.host.clone() });
        }
        if !self.allow_no_auth {
            return Err(ApiServerError::NoKeyWithoutOptIn { host: self.host.clone() });
        }
        Ok(origins)
    }

    /// Which Host names requests may carry: any with a key; without one, only loopback names and
    /// the configured host, so that a DNS-rebinding page cannot reach the keyless server.
    pub(crate) fn host_policy(&self) -> HostPolicy {
        match self.effective_key() {
            Some(_) => HostPolicy::Any,
            None => HostPolicy::loopback(&self.host),
        }
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
pub(crate) fn is_loopback_host(host: &str) -> bool {
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
    fn guessable_keys_are_refused_naming_the_setting() {
        for key in ["change-me", "zq", "CHANGEME-CHANGEME-1", "sk-...", "xxxxxxxxxxxxxxxxxxxx", "your-api-key-here-please"] {
            let err = settings("127.0.0.1", Some(key), false).validate().unwrap_err();
            assert!(matches!(err, ApiServerError::WeakKey(_)), "{key}: {err:?}");
            let message = err.to_string();
            assert!(message.contains("API_SERVER_KEY") && message.contains("platforms.api_server.key"), "{message}");
            assert!(!message.contains(key), "the key is not echoed: {message}");
        }
        assert!(settings("0.0.0.0", Some("9c1f4e2a7b3d8e6f5a0b"), false).validate().is_ok());
    }

    #[test]
    fn cors_origins_are_checked_and_any_origin_needs_a_key() {
        let mut s = settings("127.0.0.1", None, true);
        s.cors_origins = vec!["localhost:3000".into()];
        let message = s.validate().unwrap_err().to_string();
        assert!(message.contains("platforms.api_server.cors_origins") && message.contains("scheme://host"), "{message}");
        s.cors_origins = vec!["*".into()];
        assert_eq!(s.validate(), Err(ApiServerError::AnyOriginWithoutKey));
        s.key = Some("9c1f4e2a7b3d8e6f5a0b".into());
        assert_eq!(s.validate(), Ok(AllowedOrigins::Any));
    }

    #[test]
    fn host_names_are_restricted_only_without_a_key() {
        assert_eq!(settings("127.0.0.1", None, true).host_policy(), HostPolicy::loopback("127.0.0.1"));
        assert_eq!(settings("127.0.0.1", Some("9c1f4e2a7b3d8e6f5a0b"), false).host_policy(), HostPolicy::Any);
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
