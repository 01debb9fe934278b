//! The smaller sections: `session_reset`, `approvals`, `cron`, `agent`, `logging`, `security`.

use super::de::string_list;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Automatic session resets (`session_reset.*`, reference §3.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionResetConfig {
    pub mode: ResetMode,
    /// Idle time after which `idle`/`both` reset (`SESSION_IDLE_MINUTES`).
    pub idle_minutes: u64,
    /// Local hour (0-23) of the `daily`/`both` boundary (`SESSION_RESET_HOUR`).
    pub at_hour: u8,
    /// Tell the user when their session was reset.
    pub notify: bool,
    /// Platforms never notified (they cannot receive unsolicited messages).
    #[serde(deserialize_with = "string_list")]
    pub notify_exclude_platforms: Vec<String>,
}

impl Default for SessionResetConfig {
    fn default() -> Self {
        Self {
            mode: ResetMode::None,
            idle_minutes: 1440,
            at_hour: 4,
            notify: true,
            notify_exclude_platforms: vec!["api_server".to_string(), "webhook".to_string()],
        }
    }
}

/// When sessions reset on their own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResetMode {
    /// Never (Hermes' default since July 2026: surprise resets lost context).
    #[default]
    None,
    Idle,
    Daily,
    Both,
}

/// Dangerous-command approval (`approvals.*`, reference §6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApprovalsConfig {
    /// `off` | `manual` | `smart` (YAML `false` = `off`, `true` = `manual`).
    #[serde(deserialize_with = "approval_mode")]
    pub mode: String,
    /// Seconds to wait for the user's answer.
    pub timeout: u64,
    /// For cron runs, where no one can answer: `deny` | `approve`.
    pub cron_mode: String,
    /// Globs (case-insensitive, `*` and `?`) of commands refused outright, whatever the mode,
    /// `/yolo` included.
    pub deny: Vec<String>,
    /// `/reload-mcp` asks before reloading (it changes every chat's tools and invalidates the
    /// provider's prompt cache); its "Always Approve" button writes `false` here.
    pub mcp_reload_confirm: bool,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self { mode: "smart".to_string(), timeout: 60, cron_mode: "deny".to_string(), deny: Vec::new(), mcp_reload_confirm: true }
    }
}

pub(super) const APPROVAL_MODES: [&str; 3] = ["off", "manual", "smart"];
pub(super) const CRON_APPROVAL_MODES: [&str; 2] = ["deny", "approve"];

/// `approvals.mode` as a string, accepting the booleans Hermes accepts.
fn approval_mode<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    struct ModeVisitor;
    impl Visitor<'_> for ModeVisitor {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("one of off, manual, smart")
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
            Ok(if v { "manual" } else { "off" }.to_string())
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
    }
    deserializer.deserialize_any(ModeVisitor)
}

/// The cron scheduler (`cron.*`, reference §7).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CronConfig {
    /// Wrap delivered output in a header/footer naming the job.
    pub wrap_response: bool,
    /// Jobs run at once; `None` = unbounded.
    pub max_parallel_jobs: Option<usize>,
    /// Output files kept per job.
    pub output_retention: usize,
    /// Seconds an agent run of a job may take (`HERMES_CRON_TIMEOUT`); 0 = no limit.
    pub timeout: u64,
    /// Seconds a job's script may take (`HERMES_CRON_SCRIPT_TIMEOUT`).
    pub script_timeout_seconds: u64,
}

impl Default for CronConfig {
    fn default() -> Self {
        Self { wrap_response: true, max_parallel_jobs: None, output_retention: 50, timeout: 600, script_timeout_seconds: 3600 }
    }
}

/// Outbound delivery (`delivery.*`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeliveryConfig {
    /// How long an answer is retried through a platform's outage before it is given up (and
    /// listed by `/undelivered`): seconds, or a number with `s`, `m`, `h` or `d`.
    #[serde(deserialize_with = "window_text")]
    pub retry_window: String,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        Self { retry_window: "24h".into() }
    }
}

/// The shortest and longest retry windows accepted.
pub(crate) const RETRY_WINDOW_RANGE: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(30 * 24 * 3600));

impl DeliveryConfig {
    /// The window, checked by `validate` (a value that does not parse falls back to a day).
    pub fn retry_window(&self) -> Duration {
        parse_window(&self.retry_window).unwrap_or(Duration::from_secs(24 * 3600))
    }
}

/// `90`, `90s`, `30m`, `24h`, `7d` as a duration; `None` for anything else.
pub(crate) fn parse_window(text: &str) -> Option<Duration> {
    let text = text.trim().to_ascii_lowercase();
    let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let count: u64 = number.parse().ok()?;
    let unit_secs = match unit.trim() {
        "" | "s" | "sec" | "secs" | "seconds" => 1,
        "m" | "min" | "mins" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        _ => return None,
    };
    count.checked_mul(unit_secs).map(Duration::from_secs)
}

/// A window given as a bare YAML number (seconds) or as text.
fn window_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(u64),
        Text(String),
    }
    Ok(match Raw::deserialize(d)? {
        Raw::Number(n) => n.to_string(),
        Raw::Text(t) => t,
    })
}

/// The agent loop (`agent.*`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentConfig {
    /// Tool-call iterations per turn (`HERMES_MAX_ITERATIONS`).
    pub max_turns: u32,
    pub system_prompt: Option<String>,
    /// Seconds a gateway turn may run (`HERMES_AGENT_TIMEOUT`).
    pub gateway_timeout: u64,
    /// Seconds `clarify` waits for the user's answer.
    pub clarify_timeout: u64,
    /// Toolsets never offered (`terminal`, `file`, `memory`, `session_search`, `messaging`,
    /// `skills`, `clarify`, `delegation`).
    pub disabled_toolsets: Vec<String>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self { max_turns: 90, system_prompt: None, gateway_timeout: 1800, clarify_timeout: 3600, disabled_toolsets: Vec::new() }
    }
}

/// Log output (`logging.*`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoggingConfig {
    /// A tracing filter: `info`, `debug`, or directives like `hermes=debug,info`. Not validated
    /// here; the subscriber reports a bad filter. Hermes' upper-case `INFO` works too.
    pub level: String,
    pub format: LogFormat,
    /// `HERMES_HOME/logs/gateway.log` is rotated when it reaches this many MiB (outside systemd;
    /// under systemd the journal keeps the logs).
    pub max_size_mb: u64,
    /// Rotated files kept beside `gateway.log` (`gateway.log.1` is the newest).
    pub backup_count: usize,
}

/// The largest `logging.max_size_mb` and `logging.backup_count` accepted: beyond them the logs
/// would fill a small disk before anyone noticed.
pub(super) const LOG_MAX_SIZE_MB_LIMIT: u64 = 1024;
pub(super) const LOG_BACKUP_COUNT_LIMIT: usize = 100;

impl Default for LoggingConfig {
    fn default() -> Self {
        Self { level: "info".to_string(), format: LogFormat::Text, max_size_mb: 5, backup_count: 3 }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// `security.*`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SecurityConfig {
    /// Mask secrets in logs and tool output (`HERMES_REDACT_SECRETS`).
    pub redact_secrets: bool,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        Self { redact_secrets: true }
    }
}
