//! Semantic checks that types alone cannot express (ranges, enumerated strings, URL schemes,
//! toolsets the platforms' configs name; each adapter checks the rest of its own block). Run after the environment is applied, so overrides are checked too.

use super::error::ConfigError;
use super::schema::Config;
use super::sections::{
    APPROVAL_MODES, CRON_APPROVAL_MODES, LOG_BACKUP_COUNT_LIMIT, LOG_MAX_SIZE_MB_LIMIT, LoggingConfig, RETRY_WINDOW_RANGE, parse_window,
};
use super::timezone::parse_zone;
use super::toolsets::{ToolsetName, known_toolsets, resolve_toolset};

fn check_retry_window(text: &str) -> Result<(), ConfigError> {
    let (shortest, longest) = RETRY_WINDOW_RANGE;
    match parse_window(text) {
        Some(d) if d >= shortest && d <= longest => Ok(()),
        Some(_) => Err(ConfigError::invalid(
            "delivery.retry_window",
            format!("expected between 10s and 30d, found `{text}` (how long an undelivered answer is retried, e.g. 24h)"),
        )),
        None => {
            Err(ConfigError::invalid("delivery.retry_window", format!("expected a duration such as 90s, 30m, 24h or 7d, found `{text}`")))
        }
    }
}

const STREAMING_TRANSPORTS: [&str; 4] = ["auto", "draft", "edit", "off"];

impl Config {
    /// Returns the first problem found, naming its key. Lower-cases the enumerated strings it
    /// accepts case-insensitively (`approvals.mode: Smart`).
    pub fn validate(&mut self) -> Result<(), ConfigError> {
        // The order is the order problems are reported in: keep it stable.
        self.check_gateway_limits()?;
        self.check_schedule()?;
        self.check_approvals()?;
        check_logging(&self.logging)?;
        self.check_streaming()?;
        self.check_provider_urls()?;
        self.check_compression()?;
        self.check_toolset_names()?;
        super::mcp::check_mcp_servers(&self.mcp_servers)?;
        self.mcp_serve.check()?;
        self.store.check()?;
        super::media::check(&self.stt, &self.tts, &self.vision)
    }

    /// Ports, concurrency caps, memory and retry window.
    fn check_gateway_limits(&self) -> Result<(), ConfigError> {
        if let Some(port) = self.gateway.admin_port {
            check_port("gateway.admin_port", port)?;
        }
        if self.gateway.max_concurrent_sessions == Some(0) {
            return Err(ConfigError::invalid(
                "gateway.max_concurrent_sessions",
                "expected at least 1 (leave it unset for no limit), found 0",
            ));
        }
        if self.cron.max_parallel_jobs == Some(0) {
            return Err(ConfigError::invalid("cron.max_parallel_jobs", "expected at least 1 (leave it unset for no limit), found 0"));
        }
        self.gateway.memory.check()?;
        check_retry_window(&self.delivery.retry_window)
    }

    /// The time zone and the daily session reset hour.
    fn check_schedule(&self) -> Result<(), ConfigError> {
        if let Err(e) = parse_zone(self.timezone.as_deref()) {
            return Err(ConfigError::invalid("timezone", e.to_string()));
        }
        if self.session_reset.at_hour > 23 {
            return Err(ConfigError::invalid(
                "session_reset.at_hour",
                format!("expected an hour 0-23, found {}", self.session_reset.at_hour),
            ));
        }
        Ok(())
    }

    /// Approval modes (normalised in place) and deny-rule globs.
    fn check_approvals(&mut self) -> Result<(), ConfigError> {
        one_of("approvals.mode", &mut self.approvals.mode, &APPROVAL_MODES)?;
        one_of("approvals.cron_mode", &mut self.approvals.cron_mode, &CRON_APPROVAL_MODES)?;
        for (i, rule) in self.approvals.deny.iter().enumerate() {
            if let Err(e) = globset::Glob::new(rule.trim()) {
                return Err(ConfigError::invalid(
                    format!("approvals.deny[{i}]"),
                    format!("not a valid glob ({e}); write e.g. 'git push*'"),
                ));
            }
        }
        Ok(())
    }

    /// Streaming transport (normalised in place) and edit interval.
    fn check_streaming(&mut self) -> Result<(), ConfigError> {
        one_of("streaming.transport", &mut self.streaming.transport, &STREAMING_TRANSPORTS)?;
        let interval = self.streaming.edit_interval;
        if !interval.is_finite() || interval < 0.0 {
            return Err(ConfigError::invalid("streaming.edit_interval", format!("expected a number of seconds >= 0, found {interval}")));
        }
        Ok(())
    }

    /// The main model's URL, then each fallback's model name and URL.
    fn check_provider_urls(&self) -> Result<(), ConfigError> {
        let url = self.model.base_url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError::invalid("model.base_url", format!("expected a URL starting with http:// or https://, found {url:?}")));
        }
        for (i, f) in self.fallback_providers.iter().enumerate() {
            if f.model.trim().is_empty() {
                return Err(ConfigError::invalid(format!("fallback_providers[{i}].model"), "each fallback needs a model name"));
            }
            if let Some(url) = &f.base_url
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                return Err(ConfigError::invalid(
                    format!("fallback_providers[{i}].base_url"),
                    format!("expected a URL starting with http:// or https://, found {url:?}"),
                ));
            }
        }
        Ok(())
    }

    fn check_compression(&self) -> Result<(), ConfigError> {
        let threshold = self.compression.threshold;
        if !(threshold > 0.0 && threshold <= 1.0) {
            return Err(ConfigError::invalid(
                "compression.threshold",
                format!("expected a fraction of the context window in (0, 1], found {threshold}"),
            ));
        }
        Ok(())
    }

    /// Every toolset named anywhere (agent, platform_toolsets, platform blocks) must exist: a
    /// built-in one, `no_mcp`, or a configured MCP server (`mcp-<server>` or its bare name).
    fn check_toolset_names(&self) -> Result<(), ConfigError> {
        let unknown = |set: &String| resolve_toolset(set, &self.mcp_servers) == ToolsetName::Unknown;
        let problem = |set: &String| format!("unknown toolset {set:?}; known: {}", known_toolsets(&self.mcp_servers));
        if let Some(set) = self.agent.disabled_toolsets.iter().find(|s| unknown(s)) {
            return Err(ConfigError::invalid("agent.disabled_toolsets", problem(set)));
        }
        for (platform, sets) in &self.platform_toolsets {
            if let Some(set) = sets.iter().find(|s| unknown(s)) {
                return Err(ConfigError::invalid(format!("platform_toolsets.{platform}"), problem(set)));
            }
        }
        for (name, block) in &self.platforms.others {
            for (key, sets) in block.settings.iter().flat_map(|s| s.toolsets()) {
                if let Some(set) = sets.iter().find(|s| unknown(s)) {
                    return Err(ConfigError::invalid(format!("platforms.{name}.{key}"), problem(set)));
                }
            }
        }
        Ok(())
    }
}

fn check_port(key: &str, port: u16) -> Result<(), ConfigError> {
    if port == 0 {
        return Err(ConfigError::invalid(key, "expected a port number 1-65535, found 0"));
    }
    Ok(())
}

fn one_of(key: &str, value: &mut String, allowed: &[&str]) -> Result<(), ConfigError> {
    let normalized = value.trim().to_ascii_lowercase();
    if !allowed.contains(&normalized.as_str()) {
        return Err(ConfigError::invalid(key, format!("expected one of {}, found {value:?}", allowed.join(", "))));
    }
    *value = normalized;
    Ok(())
}

/// The log files' rotation: a size of at least 1 MiB and at least one backup, within limits.
fn check_logging(logging: &LoggingConfig) -> Result<(), ConfigError> {
    if !(1..=LOG_MAX_SIZE_MB_LIMIT).contains(&logging.max_size_mb) {
        return Err(ConfigError::invalid(
            "logging.max_size_mb",
            format!("expected a size in MiB from 1 to {LOG_MAX_SIZE_MB_LIMIT}, found {}", logging.max_size_mb),
        ));
    }
    if !(1..=LOG_BACKUP_COUNT_LIMIT).contains(&logging.backup_count) {
        return Err(ConfigError::invalid(
            "logging.backup_count",
            format!("expected a number of rotated files from 1 to {LOG_BACKUP_COUNT_LIMIT}, found {}", logging.backup_count),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{Env, load_str};
    use std::path::Path;

    fn load(yaml: &str) -> Result<super::Config, super::ConfigError> {
        load_str(yaml, Path::new("config.yaml"), &Env::from_pairs(Vec::<(String, String)>::new())).map(|l| l.config)
    }

    #[test]
    fn log_rotation_defaults_and_limits_name_their_key() {
        let defaults = load("").unwrap().logging;
        assert_eq!((defaults.max_size_mb, defaults.backup_count), (5, 3));
        let set = load("logging:\n  max_size_mb: 20\n  backup_count: 7\n").unwrap().logging;
        assert_eq!((set.max_size_mb, set.backup_count), (20, 7));
        for (yaml, key) in [
            ("logging:\n  max_size_mb: 0\n", "logging.max_size_mb"),
            ("logging:\n  max_size_mb: 5000\n", "logging.max_size_mb"),
            ("logging:\n  backup_count: 0\n", "logging.backup_count"),
            ("logging:\n  backup_count: 1000\n", "logging.backup_count"),
        ] {
            let error = load(yaml).unwrap_err().to_string();
            assert!(error.contains(key), "{yaml:?} -> {error}");
        }
    }

    #[test]
    fn zone_and_toolset_checks_name_their_key_with_the_known_values() {
        let known = "known: terminal, file, memory, session_search, messaging, skills, clarify, delegation, cronjob, vision";
        for (yaml, key, message) in [
            (
                "timezone: Mars/Olympus_Mons\n",
                "timezone",
                "unknown time zone 'Mars/Olympus_Mons' (expected an IANA name such as Europe/Paris)",
            ),
            ("agent:\n  disabled_toolsets: [nope]\n", "agent.disabled_toolsets", "unknown toolset \"nope\""),
        ] {
            let error = load(yaml).unwrap_err().to_string();
            assert!(error.contains(key) && error.contains(message), "{yaml:?} -> {error}");
        }
        assert!(load("agent:\n  disabled_toolsets: [nope]\n").unwrap_err().to_string().contains(known));
        assert!(load("timezone: Europe/Paris\nagent:\n  disabled_toolsets: [terminal]\n").is_ok());
        assert_eq!(load("model:\n  tool_protocol: hermes\n").unwrap().model.tool_protocol, super::super::ToolProtocol::Hermes);
    }

    #[test]
    fn mcp_toolsets_must_name_a_configured_server_or_no_mcp() {
        let servers = "mcp_servers:\n  fs:\n    command: node\n  every-thing:\n    command: node\n";
        for accepted in [
            "platform_toolsets:\n  telegram: [terminal, mcp-fs]\n",
            "platform_toolsets:\n  telegram: [file, no_mcp]\n",
            "platform_toolsets:\n  cron: [every-thing]\n",
            "agent:\n  disabled_toolsets: [mcp-every-thing, fs]\n",
        ] {
            assert!(load(&format!("{servers}{accepted}")).is_ok(), "{accepted}");
        }
        for (refused, key, name) in [
            ("platform_toolsets:\n  telegram: [terminal, mcp-github]\n", "platform_toolsets.telegram", "mcp-github"),
            ("agent:\n  disabled_toolsets: [github]\n", "agent.disabled_toolsets", "github"),
            ("platform_toolsets:\n  telegram: [mcp-mcp-fs]\n", "platform_toolsets.telegram", "mcp-mcp-fs"),
        ] {
            let error = load(&format!("{servers}{refused}")).unwrap_err().to_string();
            assert!(error.contains(key) && error.contains(&format!("unknown toolset \"{name}\"")), "{refused:?} -> {error}");
            assert!(error.contains("known: terminal,") && error.ends_with("cronjob, vision, no_mcp, mcp-every-thing, mcp-fs"), "{error}");
        }
        let error = load("platform_toolsets:\n  telegram: [mcp-fs]\n").unwrap_err().to_string();
        assert!(error.contains("unknown toolset \"mcp-fs\""), "no server is configured: {error}");
    }
}
