//! `platforms.webhook`: the inbound webhook listener and its routes (reference §2.6), their
//! environment variables, documentation and checks, and the [`REGISTRATION`] that turns them into
//! a [`WebhookAdapter`](crate::WebhookAdapter). Routes may also sit at Hermes' original location
//! `platforms.webhook.extra.routes`; both are merged into [`WebhookConfig::routes`] while loading.

use crate::settings::INSECURE_NO_AUTH;
use crate::{RouteSettings, WebhookAdapter, WebhookSettings};
use hermes_adapter::registration::{
    self, BuildContext, BuildError, EnvKind, EnvVar, ErasedConfig, PlatformFacts, Registration, Risk, SettingError,
};
use hermes_adapter::secret::{self, Secret};
use hermes_adapter::values::string_list;
use hermes_adapter::{AdapterConfig, Extra, PlatformAdapter};
use hermes_http_guard::check_secret;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The prompt of a route that sets none: the route name and the raw body, so the agent always
/// sees what arrived. Same text as the webhook adapter's built-in default, which it also uses for
/// an empty prompt.
pub const DEFAULT_ROUTE_PROMPT: &str = "Webhook delivery on route {route}:\n\n{__raw__}";

/// The webhook listener (`platforms.webhook`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", default)]
pub struct WebhookConfig {
    /// Bind address. Unset: all interfaces (`0.0.0.0`, as in Hermes) when every route is signed,
    /// loopback (`127.0.0.1`) while any route takes unsigned deliveries; see
    /// [`WebhookConfig::effective_host`].
    pub host: Option<String>,
    /// Port to bind.
    pub port: u16,
    /// Fallback HMAC secret for routes without their own.
    #[serde(deserialize_with = "secret::optional")]
    pub secret: Option<Secret>,
    /// Deliveries per route per minute (fixed window); 0 = unlimited.
    pub rate_limit_per_minute: u32,
    /// Route name (`[A-Za-z0-9_-]+`) → route; served at `POST /webhooks/<name>`.
    pub routes: BTreeMap<String, WebhookRoute>,
    /// Free-form adapter settings; after loading, `extra.routes` is always empty (merged above).
    #[serde(skip_serializing_if = "WebhookExtra::is_empty")]
    pub extra: WebhookExtra,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self { host: None, port: 8644, secret: None, rate_limit_per_minute: 30, routes: BTreeMap::new(), extra: WebhookExtra::default() }
    }
}

/// One route (`platforms.webhook.routes.<name>`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WebhookRoute {
    /// HMAC secret shared with the sender; falls back to `platforms.webhook.secret`.
    #[serde(deserialize_with = "secret::optional")]
    pub secret: Option<Secret>,
    /// Template: `{a.b.c}` payload lookups, `{__raw__}` raw body, `{route}` route name.
    pub prompt: String,
    /// `log`, an http(s) URL, or `platform:chat_id[:thread_id]`.
    pub deliver: String,
    /// Accepted event types (e.g. GitHub's `X-GitHub-Event`); empty accepts all.
    #[serde(deserialize_with = "string_list")]
    pub events: Vec<String>,
    /// Deliver the rendered prompt itself, without running the agent.
    pub deliver_only: bool,
    /// Toolsets the agent may use for this route's deliveries. Empty (the default): none — a
    /// payload from outside never drives the shell, files, messages or memory unless listed.
    #[serde(deserialize_with = "string_list")]
    pub toolsets: Vec<String>,
}

impl Default for WebhookRoute {
    fn default() -> Self {
        Self {
            secret: None,
            prompt: DEFAULT_ROUTE_PROMPT.to_string(),
            deliver: "log".to_string(),
            events: Vec::new(),
            deliver_only: false,
            toolsets: Vec::new(),
        }
    }
}

/// `platforms.webhook.extra`: typed `routes` (legacy location) plus free-form keys.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WebhookExtra {
    /// Routes at Hermes' legacy location; moved into [`WebhookConfig::routes`] while loading.
    pub routes: BTreeMap<String, WebhookRoute>,
    /// Everything else, free-form.
    pub other: Extra,
}

impl WebhookExtra {
    /// Whether neither routes nor other keys are set.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty() && self.other.is_empty()
    }
}

impl Serialize for WebhookConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // The inherent (derived) function, not this trait method: inherent items win.
        WebhookConfig::serialize(self, serializer)
    }
}

impl<'de> Deserialize<'de> for WebhookConfig {
    /// The derived field handling, then the legacy routes merged in. A name defined in both
    /// places is an error rather than a silent pick: the two may carry different secrets.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut config = WebhookConfig::deserialize(deserializer)?;
        for (name, route) in std::mem::take(&mut config.extra.routes) {
            if config.routes.contains_key(&name) {
                return Err(de::Error::custom(format!("route `{name}` is defined both in `routes` and in `extra.routes`; keep one")));
            }
            config.routes.insert(name, route);
        }
        Ok(config)
    }
}

impl Serialize for WebhookExtra {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let other = serde_json::to_value(&self.other).map_err(serde::ser::Error::custom)?;
        let mut map = serializer.serialize_map(None)?;
        if !self.routes.is_empty() {
            map.serialize_entry("routes", &self.routes)?;
        }
        if let serde_json::Value::Object(entries) = other {
            for (k, v) in &entries {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

// Hand-written so that `routes` is typed (unknown keys and bad values inside it are reported with
// their path) while the remaining keys stay free-form.
impl<'de> Deserialize<'de> for WebhookExtra {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ExtraVisitor)
    }
}

struct ExtraVisitor;

impl<'de> Visitor<'de> for ExtraVisitor {
    type Value = WebhookExtra;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping")
    }

    fn visit_unit<E: de::Error>(self) -> Result<WebhookExtra, E> {
        Ok(WebhookExtra::default())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WebhookExtra, A::Error> {
        let mut out = WebhookExtra::default();
        while let Some(key) = map.next_key::<String>()? {
            if key == "routes" {
                out.routes = map.next_value::<Option<_>>()?.unwrap_or_default();
            } else {
                out.other.insert(key, map.next_value()?);
            }
        }
        Ok(out)
    }
}

impl WebhookConfig {
    /// The address to bind: `host` when set; otherwise all interfaces when every route is signed
    /// (the reference's `0.0.0.0`: senders such as GitHub must reach it, and an unsigned delivery
    /// is refused anyway), and loopback while any route takes unsigned deliveries
    /// (`INSECURE_NO_AUTH`), which only local processes may send.
    pub fn effective_host(&self) -> &str {
        if let Some(host) = self.host.as_deref().map(str::trim).filter(|h| !h.is_empty()) {
            return host;
        }
        let global = self.secret.as_ref().map(Secret::expose);
        let unsigned =
            self.routes.values().any(|r| r.secret.as_ref().map(Secret::expose).or(global).is_none_or(|s| s.trim() == INSECURE_NO_AUTH));
        if unsigned { DEFAULT_HOST_UNSIGNED } else { DEFAULT_HOST_SIGNED }
    }
}

/// The bind address when `host` is unset and every route is signed.
pub const DEFAULT_HOST_SIGNED: &str = "0.0.0.0";
/// The bind address when `host` is unset and some route is unsigned (or has no secret yet).
pub const DEFAULT_HOST_UNSIGNED: &str = "127.0.0.1";

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A configured secret must not be one a guesser tries first; unset is checked elsewhere.
fn strong(key: &str, secret: Option<&Secret>) -> Result<(), SettingError> {
    let Some(secret) = secret.map(|s| s.expose().trim()).filter(|s| !s.is_empty() && *s != INSECURE_NO_AUTH) else {
        return Ok(());
    };
    check_secret(secret).map_err(|reason| {
        SettingError::key(key, format!("guessable: {reason}; generate one, e.g. with `openssl rand -hex 32`, and use it on both sides"))
    })
}

fn valid_route_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl AdapterConfig for WebhookConfig {
    fn validate(&self, enabled: bool) -> Result<(), SettingError> {
        if self.port == 0 {
            return Err(SettingError::key("port", "expected a port number 1-65535, found 0"));
        }
        for name in self.routes.keys() {
            if !valid_route_name(name) {
                return Err(SettingError::key(
                    format!("routes.{name}"),
                    "a route name may contain only letters, digits, '_' and '-' (it becomes the URL path /webhooks/<name>)",
                ));
            }
        }
        if enabled {
            strong("secret (WEBHOOK_SECRET)", self.secret.as_ref())?;
            for (name, route) in &self.routes {
                strong(&format!("routes.{name}.secret"), route.secret.as_ref())?;
            }
        }
        Ok(())
    }

    fn secrets(&self) -> Vec<String> {
        self.secret.iter().chain(self.routes.values().filter_map(|r| r.secret.as_ref())).map(|s| s.expose().to_string()).collect()
    }

    fn toolsets(&self) -> Vec<(String, Vec<String>)> {
        self.routes.iter().map(|(name, r)| (format!("routes.{name}.toolsets"), r.toolsets.clone())).collect()
    }

    fn listener(&self) -> Option<(String, u16)> {
        Some((self.effective_host().to_string(), self.port))
    }

    fn risks(&self, enabled: bool) -> Vec<Risk> {
        let host = self.effective_host();
        if !enabled || is_loopback(host) {
            return Vec::new();
        }
        self.routes
            .iter()
            .filter(|(_, route)| route.secret.is_none() && self.secret.is_none())
            .map(|(name, _)| Risk {
                high: true,
                key: "webhook.public_route_without_secret",
                what: format!("webhook route `{name}` is reachable on {host} without an HMAC secret"),
                fix: format!("set platforms.webhook.routes.{name}.secret (or WEBHOOK_SECRET)"),
            })
            .collect()
    }
}

const ENV: &[EnvVar] = &[
    EnvVar { name: "WEBHOOK_ENABLED", key: "enabled", kind: EnvKind::Bool, example: "false", description: "serve the webhook listener" },
    EnvVar { name: "WEBHOOK_PORT", key: "port", kind: EnvKind::Port, example: "8644", description: "1-65535" },
    EnvVar {
        name: "WEBHOOK_SECRET",
        key: "secret",
        kind: EnvKind::Secret,
        example: "8b1d6f0e3a9c47d2b5e8f1a4c7d0e3b6",
        description: "fallback HMAC secret: `openssl rand -hex 32`",
    },
];

const EXAMPLE: &str = "    enabled: false                     # WEBHOOK_ENABLED
    host: null                         # bind address; null = 0.0.0.0 (as in Hermes) when every route is signed,
                                       # 127.0.0.1 while a route is unsigned (INSECURE_NO_AUTH, loopback only)
    port: 8644                         # 1-65535 (WEBHOOK_PORT)
    secret: null                       # fallback HMAC secret for routes without one, 16+ characters (WEBHOOK_SECRET)
    rate_limit_per_minute: 30          # deliveries per route per minute; 0 = unlimited
    # Routes by name ([A-Za-z0-9_-]+). No routes by default; this one is an example. Hermes'
    # location `platforms.webhook.extra.routes` is accepted too (a name may not be in both).
    routes:
      github:
        secret: null                   # this route's HMAC secret (16+ characters); null = use platforms.webhook.secret
        # Template: {a.b.c} = value from the JSON payload, {__raw__} = raw body (4000 chars max),
        # {route} = route name. Default: \"Webhook delivery on route {route}:\\n\\n{__raw__}\".
        prompt: \"Summarise this GitHub {action} event on {repository.full_name}: {__raw__}\"
        deliver: log                   # log | http(s) URL | platform:chat_id[:thread_id]; default log
        events: [pull_request, issues] # accepted event types; default [] = all
        deliver_only: false            # true (forward the rendered prompt, no agent run) is not supported yet
        toolsets: []                   # toolsets the agent may use for this route; [] = none (a
                                       # payload from outside never drives the shell unless listed)
    extra: {}                          # free-form adapter settings
";

/// The webhook listener as the gateway registers it.
pub const REGISTRATION: Registration = Registration {
    platform: "webhook",
    summary: "Inbound webhooks: POST /webhooks/<route>, signed with HMAC.",
    env: ENV,
    example_yaml: EXAMPLE,
    allowlist_entry_problem: None,
    parse: registration::parse::<WebhookConfig>,
    build,
    facts: PlatformFacts::ENDPOINT,
};

fn build(config: &dyn ErasedConfig, _ctx: &BuildContext<'_>) -> Result<Arc<dyn PlatformAdapter>, BuildError> {
    let c: &WebhookConfig = registration::downcast(config)?;
    // Forwarding without an agent run is not built yet; running the agent instead would surprise.
    if let Some(name) = c.routes.iter().find(|(_, r)| r.deliver_only).map(|(n, _)| n) {
        return Err(BuildError::new(
            None,
            format!(
                "`platforms.webhook.routes.{name}.deliver_only: true` is not supported by this version of hermes; remove it (the route then runs the agent)"
            ),
        ));
    }
    let routes = c
        .routes
        .iter()
        .map(|(name, r)| {
            let route = RouteSettings {
                secret: r.secret.as_ref().map(|s| s.expose().to_string()),
                prompt: r.prompt.clone(),
                deliver: r.deliver.clone(),
                events: r.events.clone(),
                toolsets: r.toolsets.clone(),
            };
            (name.clone(), route)
        })
        .collect();
    let settings = WebhookSettings {
        host: c.effective_host().to_string(),
        port: c.port,
        global_secret: c.secret.as_ref().map(|s| s.expose().to_string()),
        rate_limit_per_minute: c.rate_limit_per_minute,
        routes,
        delivery_timeout: Duration::from_secs(30),
    };
    let adapter = WebhookAdapter::new(settings).map_err(|e| BuildError::new(None, e.to_string()))?;
    Ok(Arc::new(adapter))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(value: serde_json::Value) -> WebhookConfig {
        serde_json::from_value(value).expect("a webhook block")
    }

    #[test]
    fn the_listener_leaves_loopback_only_when_every_route_is_signed() {
        let signed =
            config(json!({"secret": "a-long-global-secret-0123", "routes": {"gh": {}, "ci": {"secret": "route-secret-0123456789"}}}));
        assert_eq!(signed.effective_host(), "0.0.0.0");

        // One route taking unsigned deliveries keeps the whole listener on loopback.
        let open_route =
            config(json!({"secret": "a-long-global-secret-0123", "routes": {"gh": {}, "local": {"secret": "INSECURE_NO_AUTH"}}}));
        assert_eq!(open_route.effective_host(), "127.0.0.1");
        let no_secret_yet = config(json!({"routes": {"gh": {}}}));
        assert_eq!(no_secret_yet.effective_host(), "127.0.0.1");
        let global_unsigned = config(json!({"secret": " INSECURE_NO_AUTH ", "routes": {"gh": {}}}));
        assert_eq!(global_unsigned.effective_host(), "127.0.0.1");

        // An address the operator chose is used as written.
        let chosen = config(json!({"host": "192.0.2.7", "routes": {"local": {"secret": "INSECURE_NO_AUTH"}}}));
        assert_eq!(chosen.effective_host(), "192.0.2.7");
    }
}
