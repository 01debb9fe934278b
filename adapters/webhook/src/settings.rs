//! The adapter's settings as the config layer hands them over, and their validation into the
//! routes the server uses. Every error names the config key and what to do about it.

use crate::deliver::Deliver;
use hermes_http_guard::{WeakSecret, check_secret};
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

/// The secret value that turns signature checks off; allowed only on a loopback host, where only
/// local processes can reach the server.
pub const INSECURE_NO_AUTH: &str = "INSECURE_NO_AUTH";

/// Settings of the webhook listener (`platforms.webhook`).
#[derive(Clone)]
pub struct WebhookSettings {
    pub host: String,
    /// 0 picks a free port (tests); see [`crate::WebhookAdapter::local_addr`].
    pub port: u16,
    /// Used by routes that have no secret of their own.
    pub global_secret: Option<String>,
    /// Authenticated deliveries per route per fixed one-minute window; 0 means no limit.
    pub rate_limit_per_minute: u32,
    pub routes: BTreeMap<String, RouteSettings>,
    /// Time limit of one POST to a route's `deliver` URL.
    pub delivery_timeout: Duration,
}

impl Default for WebhookSettings {
    /// The reference gateway's defaults: all interfaces, port 8644, 30 deliveries a minute (no
    /// routes, so nothing unsigned: see [`crate::WebhookConfig::effective_host`]).
    fn default() -> Self {
        Self {
            host: crate::config::DEFAULT_HOST_SIGNED.to_string(),
            port: 8644,
            global_secret: None,
            rate_limit_per_minute: 30,
            routes: BTreeMap::new(),
            delivery_timeout: Duration::from_secs(30),
        }
    }
}

// Hand-written so that secrets never reach a log line through `{:?}`.
impl fmt::Debug for WebhookSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("global_secret", &self.global_secret.as_ref().map(|_| "<redacted>"))
            .field("rate_limit_per_minute", &self.rate_limit_per_minute)
            .field("routes", &self.routes)
            .field("delivery_timeout", &self.delivery_timeout)
            .finish()
    }
}

/// One route, `POST /webhooks/<name>` (`platforms.webhook.routes.<name>`).
#[derive(Clone, Default)]
pub struct RouteSettings {
    /// HMAC secret shared with the sender; falls back to the global secret.
    pub secret: Option<String>,
    /// Prompt template (see [`crate::render_prompt`]); empty means a default that shows the
    /// payload.
    pub prompt: String,
    /// `log`, an `http(s)` URL, or `platform:chat_id[:thread_id]`.
    pub deliver: String,
    /// Accepted event types; empty accepts every event.
    pub events: Vec<String>,
    /// Toolsets the agent may use for this route's deliveries; empty: none.
    pub toolsets: Vec<String>,
}

impl fmt::Debug for RouteSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteSettings")
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("prompt", &self.prompt)
            .field("deliver", &self.deliver)
            .field("events", &self.events)
            .field("toolsets", &self.toolsets)
            .finish()
    }
}

/// Invalid settings, found by [`crate::WebhookAdapter::new`].
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("platforms.webhook.routes.{route}: a route name may contain only letters, digits, '_' and '-'; rename the route")]
    InvalidRouteName { route: String },
    #[error(
        "platforms.webhook.routes.{route}.secret is not set and neither is platforms.webhook.secret; set one (e.g. the output of `openssl rand -hex 32`) and give the same secret to the sender"
    )]
    MissingSecret { route: String },
    #[error(
        "{key} is INSECURE_NO_AUTH but platforms.webhook.host is {host}; unauthenticated routes are allowed only on a loopback host: set a real secret or bind to 127.0.0.1"
    )]
    InsecureOnPublicHost { key: String, host: String },
    #[error(
        "platforms.webhook.routes.{route}.deliver is {spec:?}: {reason}; use `log`, an http(s) URL, or `platform:chat_id[:thread_id]` (e.g. `telegram:123456`)"
    )]
    BadDeliver { route: String, spec: String, reason: String },
    #[error("{key} is guessable: {reason}. Generate a secret, e.g. with `openssl rand -hex 32`, and give the same secret to the sender")]
    GuessableSecret { key: String, reason: WeakSecret },
    #[error("platforms.webhook.delivery_timeout: cannot build the HTTP client for URL delivery: {0}")]
    HttpClient(#[source] reqwest::Error),
}

/// How a route authenticates its senders.
#[derive(Clone)]
pub(crate) enum RouteSecret {
    Shared(Vec<u8>),
    /// `INSECURE_NO_AUTH` on a loopback host.
    None,
}

/// A validated route.
#[derive(Clone)]
pub(crate) struct Route {
    pub name: String,
    pub secret: RouteSecret,
    pub prompt: String,
    pub deliver: Deliver,
    pub events: Vec<String>,
    pub toolsets: Vec<String>,
}

/// Used when a route has no prompt: the agent still sees what arrived.
const DEFAULT_PROMPT: &str = crate::config::DEFAULT_ROUTE_PROMPT;

pub(crate) fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim().trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost") || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn valid_route_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn check_strength(secret: &str, key: &str) -> Result<(), WebhookError> {
    check_secret(secret).map_err(|reason| WebhookError::GuessableSecret { key: key.to_string(), reason })
}

/// Checks every route and resolves its secret and delivery target.
pub(crate) fn validate(settings: &WebhookSettings) -> Result<BTreeMap<String, Route>, WebhookError> {
    let loopback = is_loopback_host(&settings.host);
    let global = settings.global_secret.as_deref().map(str::trim).filter(|s| !s.is_empty());
    if let Some(secret) = global.filter(|s| *s != INSECURE_NO_AUTH) {
        check_strength(secret, "platforms.webhook.secret (WEBHOOK_SECRET)")?;
    }
    let mut routes = BTreeMap::new();
    for (name, route) in &settings.routes {
        if !valid_route_name(name) {
            return Err(WebhookError::InvalidRouteName { route: name.clone() });
        }
        let own = route.secret.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let (secret, key) = match (own, global) {
            (Some(s), _) => (s, format!("platforms.webhook.routes.{name}.secret")),
            (None, Some(s)) => (s, "platforms.webhook.secret".to_string()),
            (None, None) => {
                return Err(WebhookError::MissingSecret { route: name.clone() });
            }
        };
        let secret = if secret == INSECURE_NO_AUTH {
            if !loopback {
                return Err(WebhookError::InsecureOnPublicHost { key, host: settings.host.clone() });
            }
            tracing::warn!(route = %name, "webhook route accepts unsigned deliveries (INSECURE_NO_AUTH on loopback)");
            RouteSecret::None
        } else {
            check_strength(secret, &key)?;
            RouteSecret::Shared(secret.as_bytes().to_vec())
        };
        let deliver = Deliver::parse(&route.deliver).map_err(|reason| WebhookError::BadDeliver {
            route: name.clone(),
            spec: route.deliver.clone(),
            reason,
        })?;
        let prompt = if route.prompt.trim().is_empty() { DEFAULT_PROMPT.to_string() } else { route.prompt.clone() };
        routes.insert(
            name.clone(),
            Route { name: name.clone(), secret, prompt, deliver, events: route.events.clone(), toolsets: route.toolsets.clone() },
        );
    }
    Ok(routes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in ["127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["0.0.0.0", "::", "192.168.1.2", "example.com"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn debug_redacts_secrets() {
        let mut settings = WebhookSettings { global_secret: Some("global-hmac-9f2c71e4".into()), ..Default::default() };
        settings.routes.insert("a".into(), RouteSettings { secret: Some("route-hmac-3b8d05a6".into()), ..Default::default() });
        let text = format!("{settings:?}");
        assert!(!text.contains("global-hmac") && !text.contains("route-hmac"), "{text}");
    }

    #[test]
    fn global_secret_fills_in() {
        let mut settings = WebhookSettings { global_secret: Some("global-hmac-9f2c71e4".into()), ..Default::default() };
        settings.routes.insert("a".into(), RouteSettings::default());
        let routes = validate(&settings).map_err(|e| e.to_string());
        assert!(matches!(routes.as_ref().map(|r| &r["a"].secret), Ok(RouteSecret::Shared(s)) if s == b"global-hmac-9f2c71e4"));
    }

    #[test]
    fn guessable_secrets_are_refused_naming_the_key() {
        let mut settings = WebhookSettings::default();
        settings.routes.insert("gh".into(), RouteSettings { secret: Some("change-me".into()), ..Default::default() });
        let message = validate(&settings).map(|_| ()).unwrap_err().to_string();
        assert!(message.contains("platforms.webhook.routes.gh.secret") && message.contains("at least 16"), "{message}");
        assert!(!message.contains("change-me"), "the secret is not echoed: {message}");

        let global_only = WebhookSettings { global_secret: Some("your-webhook-secret-here".into()), ..Default::default() };
        let message = validate(&global_only).map(|_| ()).unwrap_err().to_string();
        assert!(message.contains("WEBHOOK_SECRET") && message.contains("platforms.webhook.secret"), "{message}");
    }
}
