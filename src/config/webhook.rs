//! `platforms.webhook`: the inbound webhook listener and its routes (reference §2.6). Routes may
//! also sit at Hermes' original location `platforms.webhook.extra.routes`; both are merged into
//! [`WebhookConfig::routes`] while loading.

use super::de::string_list;
use super::extra::Extra;
use super::secret::{self, Secret};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The prompt of a route that sets none: the route name and the raw body, so the agent always
/// sees what arrived. Same text as the webhook adapter's built-in default, which it also uses for
/// an empty prompt.
pub const DEFAULT_ROUTE_PROMPT: &str = "Webhook delivery on route {route}:\n\n{__raw__}";

/// The webhook listener (`platforms.webhook`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", default)]
pub struct WebhookConfig {
    pub enabled: bool,
    pub host: String,
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
        Self {
            enabled: false,
            // Loopback, unlike Hermes' 0.0.0.0: exposing the listener should be a decision.
            host: "127.0.0.1".to_string(),
            port: 8644,
            secret: None,
            rate_limit_per_minute: 30,
            routes: BTreeMap::new(),
            extra: WebhookExtra::default(),
        }
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
    pub routes: BTreeMap<String, WebhookRoute>,
    pub other: Extra,
}

impl WebhookExtra {
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
        let other = serde_yaml_ng::to_value(&self.other).map_err(serde::ser::Error::custom)?;
        let mut map = serializer.serialize_map(None)?;
        if !self.routes.is_empty() {
            map.serialize_entry("routes", &self.routes)?;
        }
        if let serde_yaml_ng::Value::Mapping(entries) = other {
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
