//! `gateway:` (concurrency, drain, supervision back-off, session keying, admin listener, global
//! allowlist, media cache limits) and `streaming:` (edit-in-place replies, reference §1.12).

use super::de::string_list;
use super::platforms::Platforms;
use serde::{Deserialize, Serialize};

/// Daemon-wide behaviour (`gateway.*`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GatewayConfig {
    /// Sessions that may run an agent at once; `None` = unlimited.
    pub max_concurrent_sessions: Option<usize>,
    /// How long shutdown/restart waits for running turns.
    pub drain_timeout_secs: u64,
    /// Upper bound of the adapter reconnect back-off.
    pub backoff_cap_secs: u64,
    /// An adapter connected this long has its back-off reset.
    pub backoff_reset_after_secs: u64,
    /// A session idle this long has its in-memory actor dropped (history stays in `state.db`).
    pub idle_session_secs: u64,
    /// In groups, one session per user instead of one per chat. Hermes' top-level
    /// `group_sessions_per_user` overrides this.
    pub group_sessions_per_user: bool,
    /// In threads, one session per user. Hermes' top-level `thread_sessions_per_user` overrides.
    pub thread_sessions_per_user: bool,
    pub admin_host: String,
    /// Port of the local admin listener; `None` = no admin listener.
    pub admin_port: Option<u16>,
    /// Users allowed on every platform (`GATEWAY_ALLOWED_USERS` replaces it).
    #[serde(deserialize_with = "string_list")]
    pub allowed_users: Vec<String>,
    /// Allow everyone when no allowlist applies (`GATEWAY_ALLOW_ALL_USERS`).
    pub allow_all_users: bool,
    /// Admins on every platform (`GATEWAY_ADMIN_USERS` replaces it): only they may change the
    /// model for everyone, write the agent's memory and skills, or manage other users' jobs.
    /// Unset anywhere: every allowed user is an admin (a single-user install).
    #[serde(deserialize_with = "string_list")]
    pub admin_users: Vec<String>,
    /// How much of what users send is kept in `HERMES_HOME/cache`.
    pub media_cache: MediaCacheConfig,
    /// `gateway.streaming`, Hermes' second home of `streaming:`; folded into `Config::streaming`
    /// while loading (top-level wins), then `None`.
    #[serde(rename = "streaming", skip_serializing)]
    pub(crate) streaming_alias: Option<StreamingConfig>,
    /// `gateway.platforms`, likewise folded into `Config::platforms` (top-level wins).
    #[serde(rename = "platforms", skip_serializing)]
    pub(crate) platforms_alias: Option<Platforms>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            max_concurrent_sessions: None,
            drain_timeout_secs: 30,
            backoff_cap_secs: 300,
            backoff_reset_after_secs: 60,
            idle_session_secs: 900,
            group_sessions_per_user: true,
            thread_sessions_per_user: false,
            admin_host: "127.0.0.1".to_string(),
            admin_port: None,
            allowed_users: Vec::new(),
            allow_all_users: false,
            admin_users: Vec::new(),
            media_cache: MediaCacheConfig::default(),
            streaming_alias: None,
            platforms_alias: None,
        }
    }
}

/// Limits of the inbound attachment cache (`gateway.media_cache.*`): files older than
/// `max_age_hours` go, then the oldest until the rest fits `max_megabytes`. 0 = no limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MediaCacheConfig {
    pub max_megabytes: u64,
    pub max_age_hours: u64,
}

impl Default for MediaCacheConfig {
    fn default() -> Self {
        Self { max_megabytes: 500, max_age_hours: 7 * 24 }
    }
}

impl MediaCacheConfig {
    pub fn limits(&self) -> hermes_adapter::CacheLimits {
        hermes_adapter::CacheLimits {
            max_bytes: self.max_megabytes.saturating_mul(1024 * 1024),
            max_age: std::time::Duration::from_secs(self.max_age_hours.saturating_mul(3600)),
        }
    }
}

/// Streaming replies by editing a message in place (`streaming.*`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamingConfig {
    pub enabled: bool,
    /// `auto` | `draft` | `edit` | `off`.
    pub transport: String,
    /// Seconds between edits.
    pub edit_interval: f64,
    /// New characters that trigger an edit before `edit_interval` elapses.
    pub buffer_threshold: usize,
    /// Appended while the reply is still streaming.
    pub cursor: String,
}

impl Default for StreamingConfig {
    fn default() -> Self {
        Self { enabled: false, transport: "auto".to_string(), edit_interval: 0.8, buffer_threshold: 24, cursor: " ▉".to_string() }
    }
}
