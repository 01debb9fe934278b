//! Semantic checks that types alone cannot express (ranges, enumerated strings, URL schemes,
//! route names). Run after the environment is applied, so overrides are checked too.

use super::error::ConfigError;
use super::schema::Config;
use super::secret::Secret;
use super::sections::{APPROVAL_MODES, CRON_APPROVAL_MODES};
use hermes_http_guard::{AllowedOrigins, check_secret};

/// The secret that turns a webhook route's signature check off (loopback only; the adapter
/// checks the host).
const INSECURE_NO_AUTH: &str = "INSECURE_NO_AUTH";

const STREAMING_TRANSPORTS: [&str; 4] = ["auto", "draft", "edit", "off"];

impl Config {
    /// Returns the first problem found, naming its key. Lower-cases the enumerated strings it
    /// accepts case-insensitively (`approvals.mode: Smart`).
    pub fn validate(&mut self) -> Result<(), ConfigError> {
        check_port("platforms.api_server.port", self.platforms.api_server.port)?;
        check_port("platforms.webhook.port", self.platforms.webhook.port)?;
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
        if self.session_reset.at_hour > 23 {
            return Err(ConfigError::invalid(
                "session_reset.at_hour",
                format!("expected an hour 0-23, found {}", self.session_reset.at_hour),
            ));
        }
        one_of("approvals.mode", &mut self.approvals.mode, &APPROVAL_MODES)?;
        one_of("approvals.cron_mode", &mut self.approvals.cron_mode, &CRON_APPROVAL_MODES)?;
        one_of("streaming.transport", &mut self.streaming.transport, &STREAMING_TRANSPORTS)?;
        let interval = self.streaming.edit_interval;
        if !interval.is_finite() || interval < 0.0 {
            return Err(ConfigError::invalid("streaming.edit_interval", format!("expected a number of seconds >= 0, found {interval}")));
        }
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
        let threshold = self.compression.threshold;
        if !(threshold > 0.0 && threshold <= 1.0) {
            return Err(ConfigError::invalid(
                "compression.threshold",
                format!("expected a fraction of the context window in (0, 1], found {threshold}"),
            ));
        }
        for set in self.agent.disabled_toolsets.iter().chain(self.platform_toolsets.values().flatten()) {
            if !crate::agent::tools::TOOLSETS.contains(&set.as_str()) {
                return Err(ConfigError::invalid(
                    "agent.disabled_toolsets / platform_toolsets",
                    format!("unknown toolset {set:?}; known: {}", crate::agent::tools::TOOLSETS.join(", ")),
                ));
            }
        }
        for (name, route) in &self.platforms.webhook.routes {
            if let Some(set) = route.toolsets.iter().find(|s| !crate::agent::tools::TOOLSETS.contains(&s.as_str())) {
                return Err(ConfigError::invalid(
                    format!("platforms.webhook.routes.{name}.toolsets"),
                    format!("unknown toolset {set:?}; known: {}", crate::agent::tools::TOOLSETS.join(", ")),
                ));
            }
        }
        for name in self.platforms.webhook.routes.keys() {
            if !valid_route_name(name) {
                return Err(ConfigError::invalid(
                    format!("platforms.webhook.routes.{name}"),
                    "a route name may contain only letters, digits, '_' and '-' (it becomes the URL path /webhooks/<name>)",
                ));
            }
        }
        self.validate_http_secrets()
    }

    /// The enabled HTTP listeners' keys and secrets must not be guessable, and the API's CORS
    /// origins must be origins (the adapters check the same again when they start).
    fn validate_http_secrets(&self) -> Result<(), ConfigError> {
        let api = &self.platforms.api_server;
        if api.enabled {
            strong("platforms.api_server.key (API_SERVER_KEY)", api.key.as_ref())?;
            let origins = AllowedOrigins::parse(&api.cors_origins)
                .map_err(|e| ConfigError::invalid("platforms.api_server.cors_origins (API_SERVER_CORS_ORIGINS)", e.to_string()))?;
            if origins == AllowedOrigins::Any && api.key.is_none() {
                return Err(ConfigError::invalid(
                    "platforms.api_server.cors_origins (API_SERVER_CORS_ORIGINS)",
                    "`*` lets every web page drive the agent, and the server has no key; list the pages' origins or set API_SERVER_KEY",
                ));
            }
        }
        let webhook = &self.platforms.webhook;
        if webhook.enabled {
            strong("platforms.webhook.secret (WEBHOOK_SECRET)", webhook.secret.as_ref())?;
            for (name, route) in &webhook.routes {
                strong(&format!("platforms.webhook.routes.{name}.secret"), route.secret.as_ref())?;
            }
        }
        Ok(())
    }
}

/// A configured key or secret must not be one a guesser tries first; unset is checked elsewhere.
fn strong(key: &str, secret: Option<&Secret>) -> Result<(), ConfigError> {
    let Some(secret) = secret.map(|s| s.expose().trim()).filter(|s| !s.is_empty() && *s != INSECURE_NO_AUTH) else {
        return Ok(());
    };
    check_secret(secret).map_err(|reason| {
        ConfigError::invalid(key, format!("guessable: {reason}; generate one, e.g. with `openssl rand -hex 32`, and use it on both sides"))
    })
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

fn valid_route_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
