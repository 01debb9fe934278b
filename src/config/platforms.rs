//! `platforms:`: one block per messaging platform. `api_server` and `webhook` have typed blocks;
//! every other name (telegram, discord, …) gets the generic [`PlatformConfig`].

use super::de::{opt_stringish, string_list};
use super::extra::Extra;
use super::secret::{self, Secret};
use super::webhook::WebhookConfig;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// All platform blocks. Platform names are lower-cased on load.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Platforms {
    pub api_server: ApiServerConfig,
    pub webhook: WebhookConfig,
    /// telegram, discord, slack, matrix, email, …
    #[serde(flatten)]
    pub others: BTreeMap<String, PlatformConfig>,
}

impl Platforms {
    /// The generic block of `name` (lower-case), if configured.
    pub fn get(&self, name: &str) -> Option<&PlatformConfig> {
        self.others.get(name)
    }
}

/// The OpenAI-compatible HTTP API (`platforms.api_server`, reference §2.7).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiServerConfig {
    pub enabled: bool,
    pub host: String,
    pub port: u16,
    /// Bearer key clients must send; without it the server refuses to start unless
    /// `allow_no_auth` is set and the host is loopback.
    #[serde(deserialize_with = "secret::optional")]
    pub key: Option<Secret>,
    pub allow_no_auth: bool,
    /// Model id advertised by `/v1/models`.
    pub model_name: String,
    #[serde(deserialize_with = "string_list")]
    pub cors_origins: Vec<String>,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            host: "127.0.0.1".to_string(),
            port: 8642,
            key: None,
            allow_no_auth: false,
            model_name: "hermes-agent".to_string(),
            cors_origins: Vec::new(),
        }
    }
}

/// A chat platform's block (`platforms.<name>`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlatformConfig {
    /// Unset: enabled when a token is configured (`<PLATFORM>_BOT_TOKEN` or `token`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(deserialize_with = "secret::optional")]
    pub token: Option<Secret>,
    #[serde(deserialize_with = "secret::optional")]
    pub api_key: Option<Secret>,
    /// Chat id that cron output and notifications go to by default.
    #[serde(deserialize_with = "opt_stringish")]
    pub home_channel: Option<String>,
    /// User ids allowed to talk to the bot (`*` = anyone); a list or a comma-separated string.
    /// `<PLATFORM>_ALLOWED_USERS` replaces it; see `Config::allowed_users`.
    #[serde(deserialize_with = "string_list")]
    pub allowed_users: Vec<String>,
    pub allow_all_users: bool,
    /// Admins on this platform (`<PLATFORM>_ADMIN_USERS` replaces it); see `gateway.admin_users`.
    #[serde(deserialize_with = "string_list")]
    pub admin_users: Vec<String>,
    /// Replaces the platform's public API address (a self-hosted Telegram Bot API server, a
    /// test fake). `<PLATFORM>_API_BASE_URL` wins.
    pub api_base_url: Option<String>,
    /// In group chats, answer only when mentioned (unset: the platform's default — off on
    /// Telegram, on in Discord guild channels). `<PLATFORM>_REQUIRE_MENTION` wins.
    pub require_mention: Option<bool>,
    /// Group chats / channels where every message is answered, mention or not.
    #[serde(deserialize_with = "string_list")]
    pub free_response_chats: Vec<String>,
    /// Outbound rate limits kept by the gateway (Telegram); see [`SendBudgetConfig`].
    pub send_budget: SendBudgetConfig,
    /// Adapter-specific settings, passed through unchecked.
    pub extra: Extra,
}

impl PlatformConfig {
    /// Enabled explicitly, or implicitly by having a token.
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(self.token.is_some())
    }
}

/// Messages per second the gateway allows itself (0 = no limit), below the platform's flood
/// limits so that users see steady answers instead of 429 back-offs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SendBudgetConfig {
    pub global_per_second: f64,
    pub per_chat_per_second: f64,
    pub group_per_minute: f64,
}

impl Default for SendBudgetConfig {
    fn default() -> Self {
        Self { global_per_second: 30.0, per_chat_per_second: 1.0, group_per_minute: 20.0 }
    }
}

// Hand-written rather than `#[serde(flatten)]`: flatten buffers the unknown entries, which hides
// them from serde_ignored and serde_path_to_error, so typos inside `telegram:` would go unreported
// and errors there would lose their key path.
impl<'de> Deserialize<'de> for Platforms {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(PlatformsVisitor)
    }
}

struct PlatformsVisitor;

impl<'de> Visitor<'de> for PlatformsVisitor {
    type Value = Platforms;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping from platform name to its settings")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Platforms, E> {
        Ok(Platforms::default())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Platforms, A::Error> {
        let mut out = Platforms::default();
        while let Some(name) = map.next_key::<String>()? {
            match name.to_ascii_lowercase().as_str() {
                "api_server" => out.api_server = map.next_value()?,
                "webhook" => out.webhook = map.next_value()?,
                other => {
                    // `telegram:` with nothing under it is an empty block, not an error.
                    let block = map.next_value::<Option<PlatformConfig>>()?.unwrap_or_default();
                    out.others.insert(other.to_string(), block);
                }
            }
        }
        Ok(out)
    }
}
