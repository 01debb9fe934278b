//! `gateway:` (concurrency, drain, supervision back-off, session keying, admin listener, global
//! allowlist, media cache limits, the bounds of what is kept in memory) and `streaming:`
//! (edit-in-place replies, reference §1.12).

use super::de::string_list;
use super::error::ConfigError;
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
    /// What is kept in memory, each with its bound, so months of traffic do not grow the daemon.
    pub memory: MemoryBounds,
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
            memory: MemoryBounds::default(),
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

/// The bound of every in-memory cache the gateway keeps (`gateway.memory.*`). Each evicts at its
/// bound; none is ever unbounded, so a daemon running for months levels off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryBounds {
    /// Recent conversation text kept between turns so a turn reads only what is new; the least
    /// recently used session goes first. 0 = nothing kept (every turn reads its history).
    pub history_cache_megabytes: u64,
    /// Session actors kept in memory; beyond it the least recently active idle one retires
    /// (its history stays in `state.db`). Busy sessions are never retired.
    pub live_sessions: usize,
    /// SQLite's page cache per connection to `state.db`, in KiB.
    pub sqlite_cache_kilobytes: u64,
    /// Read connections to `state.db` (each with its page cache); reads beyond it wait.
    pub sqlite_read_connections: usize,
    /// Sessions whose `/approve session` patterns and `/yolo` are remembered; beyond it the
    /// least recently answered session's are forgotten (it is asked again).
    pub approval_sessions: usize,
    /// How often the heap's free pages are handed back to the system (glibc keeps what a burst
    /// freed in its arenas); 0 = never.
    pub trim_heap_every_secs: u64,
    /// Heaps malloc keeps for the threads (glibc's arenas); fewer leave fewer half-empty pages
    /// behind a burst. One suits an I/O-bound daemon: in `benches/rss.rs` two still crept up
    /// (+2.7 MB over 30,000 messages), one stayed flat at the same speed. 0 = glibc's default
    /// (eight per core).
    pub malloc_arenas: u32,
}

impl Default for MemoryBounds {
    fn default() -> Self {
        Self {
            history_cache_megabytes: 4,
            live_sessions: 1000,
            sqlite_cache_kilobytes: 1024,
            sqlite_read_connections: 4,
            approval_sessions: 1000,
            trim_heap_every_secs: 10,
            malloc_arenas: 1,
        }
    }
}

/// Ceilings that catch a unit mistake (bytes for megabytes) rather than limit a real install.
const MAX_HISTORY_CACHE_MEGABYTES: u64 = 4096;
const MAX_SQLITE_CACHE_KILOBYTES: u64 = 4 * 1024 * 1024;
const MAX_SQLITE_READ_CONNECTIONS: usize = 64;
/// SQLite's own floor: a smaller page cache is raised to about this by SQLite anyway.
const MIN_SQLITE_CACHE_KILOBYTES: u64 = 64;
const MAX_MALLOC_ARENAS: u32 = 64;

impl MemoryBounds {
    /// The first bound out of range, named by its key.
    pub fn check(&self) -> Result<(), ConfigError> {
        let key = |name: &str| format!("gateway.memory.{name}");
        if self.history_cache_megabytes > MAX_HISTORY_CACHE_MEGABYTES {
            let found = self.history_cache_megabytes;
            return Err(ConfigError::invalid(
                key("history_cache_megabytes"),
                format!("expected 0-{MAX_HISTORY_CACHE_MEGABYTES} (megabytes, 0 = keep none), found {found}"),
            ));
        }
        if self.live_sessions == 0 {
            return Err(ConfigError::invalid(key("live_sessions"), "expected at least 1 (session actors kept in memory), found 0"));
        }
        if !(MIN_SQLITE_CACHE_KILOBYTES..=MAX_SQLITE_CACHE_KILOBYTES).contains(&self.sqlite_cache_kilobytes) {
            return Err(ConfigError::invalid(
                key("sqlite_cache_kilobytes"),
                format!(
                    "expected {MIN_SQLITE_CACHE_KILOBYTES}-{MAX_SQLITE_CACHE_KILOBYTES} (KiB of page cache per connection), found {}",
                    self.sqlite_cache_kilobytes
                ),
            ));
        }
        if !(1..=MAX_SQLITE_READ_CONNECTIONS).contains(&self.sqlite_read_connections) {
            return Err(ConfigError::invalid(
                key("sqlite_read_connections"),
                format!("expected 1-{MAX_SQLITE_READ_CONNECTIONS}, found {}", self.sqlite_read_connections),
            ));
        }
        if self.approval_sessions == 0 {
            return Err(ConfigError::invalid(
                key("approval_sessions"),
                "expected at least 1 (sessions whose approvals are remembered), found 0",
            ));
        }
        if self.malloc_arenas > MAX_MALLOC_ARENAS {
            return Err(ConfigError::invalid(
                key("malloc_arenas"),
                format!("expected 0-{MAX_MALLOC_ARENAS} (0 = the allocator's default), found {}", self.malloc_arenas),
            ));
        }
        Ok(())
    }

    /// The history cache's bound in bytes.
    pub fn history_cache_bytes(&self) -> usize {
        usize::try_from(self.history_cache_megabytes.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX)
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

#[cfg(test)]
mod tests {
    use super::super::{Env, load_str};
    use super::*;
    use std::path::Path;

    fn load(yaml: &str) -> Result<super::super::Config, ConfigError> {
        load_str(yaml, Path::new("config.yaml"), &Env::from_pairs(Vec::<(String, String)>::new())).map(|l| l.config)
    }

    #[test]
    fn every_memory_bound_has_a_default_and_can_be_set() {
        assert_eq!(load("").unwrap().gateway.memory, MemoryBounds::default());
        let yaml = "gateway:\n  memory:\n    history_cache_megabytes: 0\n    live_sessions: 50\n    sqlite_cache_kilobytes: 256\n    sqlite_read_connections: 2\n    approval_sessions: 10\n    trim_heap_every_secs: 0\n    malloc_arenas: 0\n";
        let set = load(yaml).unwrap().gateway.memory;
        let expected = MemoryBounds {
            history_cache_megabytes: 0,
            live_sessions: 50,
            sqlite_cache_kilobytes: 256,
            sqlite_read_connections: 2,
            approval_sessions: 10,
            trim_heap_every_secs: 0,
            malloc_arenas: 0,
        };
        assert_eq!(set, expected);
        assert_eq!(set.history_cache_bytes(), 0);
    }

    #[test]
    fn a_bound_out_of_range_is_refused_naming_its_key() {
        for (setting, key) in [
            ("live_sessions: 0", "gateway.memory.live_sessions"),
            ("approval_sessions: 0", "gateway.memory.approval_sessions"),
            ("sqlite_read_connections: 0", "gateway.memory.sqlite_read_connections"),
            ("sqlite_read_connections: 1000", "gateway.memory.sqlite_read_connections"),
            ("sqlite_cache_kilobytes: 8", "gateway.memory.sqlite_cache_kilobytes"),
            ("malloc_arenas: 1000", "gateway.memory.malloc_arenas"),
            // Bytes written where megabytes were meant.
            ("history_cache_megabytes: 4194304", "gateway.memory.history_cache_megabytes"),
        ] {
            let yaml = format!("gateway:\n  memory:\n    {setting}\n");
            let error = load(&yaml).unwrap_err();
            assert!(matches!(error, ConfigError::Invalid { .. }), "{setting}: a config error (exit 78)");
            let text = error.to_string();
            assert!(text.contains(key) && text.contains("expected"), "{setting} -> {text}");
        }
        let error = load("gateway:\n  memory:\n    live_sessions: -1\n").unwrap_err().to_string();
        assert!(error.contains("live_sessions"), "a negative count names its key: {error}");
    }
}
