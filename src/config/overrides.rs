//! Environment overrides: the variables that replace `config.yaml` values (environment wins, as
//! in Hermes), and the parsers for their values. A bad value is an error naming the variable,
//! never a silent fallback to the default.

use super::auth::EnvAuth;
use super::de::split_list;
use super::display::BusyInputMode;
use super::env::Env;
use super::error::ConfigError;
use super::schema::Config;
use super::secret::Secret;

/// Every variable the gateway reads itself (the platforms' are listed by their registrations;
/// `<PLATFORM>_ALLOWED_USERS`, `_ALLOW_ALL_USERS` and `_ADMIN_USERS` exist for every platform).
/// The generated `.env.example` must document each of them.
pub const CORE_ENV_VARS: &[&str] = &[
    "HERMES_HOME",
    "LLM_MODEL",
    "LLM_PROVIDER",
    "LLM_BASE_URL",
    "OPENAI_BASE_URL",
    "LLM_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "GATEWAY_ALLOWED_USERS",
    "GATEWAY_ALLOW_ALL_USERS",
    "GATEWAY_ADMIN_USERS",
    "GATEWAY_ADMIN_PORT",
    "MCP_SERVE_KEY",
    "DATABASE_URL",
    "HERMES_GATEWAY_BUSY_INPUT_MODE",
    "HERMES_MAX_ITERATIONS",
    "HERMES_AGENT_TIMEOUT",
    "HERMES_CRON_TIMEOUT",
    "HERMES_CRON_SCRIPT_TIMEOUT",
    "HERMES_CRON_MAX_PARALLEL",
    "HERMES_REDACT_SECRETS",
    "SESSION_IDLE_MINUTES",
    "SESSION_RESET_HOUR",
];

/// The variable Hermes reads a named provider's API key from.
fn provider_key_variable(provider: &str) -> Option<&'static str> {
    match provider.to_ascii_lowercase().as_str() {
        "anthropic" => Some("ANTHROPIC_API_KEY"),
        "openrouter" => Some("OPENROUTER_API_KEY"),
        _ => None,
    }
}

impl Config {
    fn apply_cron_env(&mut self, env: &Env) -> Result<(), ConfigError> {
        if let Some(v) = env.get("HERMES_CRON_TIMEOUT") {
            self.cron.timeout = parse_number("HERMES_CRON_TIMEOUT", v)?;
        }
        if let Some(v) = env.get("HERMES_CRON_SCRIPT_TIMEOUT") {
            self.cron.script_timeout_seconds = parse_number("HERMES_CRON_SCRIPT_TIMEOUT", v)?;
        }
        if let Some(v) = env.get("HERMES_CRON_MAX_PARALLEL") {
            self.cron.max_parallel_jobs = Some(parse_number("HERMES_CRON_MAX_PARALLEL", v)?);
        }
        Ok(())
    }

    /// Applies the gateway's own environment variables ([`CORE_ENV_VARS`]); the platforms' come
    /// with their registrations and are applied by `Platforms::resolve`.
    pub fn apply_env(&mut self, env: &Env) -> Result<(), ConfigError> {
        self.apply_model(env);
        if let Some(v) = env.get("GATEWAY_ALLOWED_USERS") {
            self.gateway.allowed_users = split_list(v);
        }
        if let Some(v) = env.get("GATEWAY_ADMIN_USERS") {
            self.gateway.admin_users = split_list(v);
        }
        if let Some(v) = env.get("GATEWAY_ADMIN_PORT") {
            self.gateway.admin_port = match v.trim().parse::<u16>() {
                Ok(0) | Err(_) => return Err(env_invalid("GATEWAY_ADMIN_PORT", format!("expected a port number 1-65535, found {v:?}"))),
                Ok(port) => Some(port),
            };
        }
        if let Some(v) = env.get("GATEWAY_ALLOW_ALL_USERS") {
            self.gateway.allow_all_users = parse_bool("GATEWAY_ALLOW_ALL_USERS", v)?;
        }
        if let Some(v) = env.get("HERMES_GATEWAY_BUSY_INPUT_MODE") {
            self.display.busy_input_mode = BusyInputMode::parse(v).ok_or_else(|| {
                env_invalid("HERMES_GATEWAY_BUSY_INPUT_MODE", format!("expected one of {}, found {v:?}", BusyInputMode::NAMES.join(", ")))
            })?;
        }
        if let Some(v) = env.get("HERMES_MAX_ITERATIONS") {
            self.agent.max_turns = parse_number("HERMES_MAX_ITERATIONS", v)?;
        }
        if let Some(v) = env.get("HERMES_AGENT_TIMEOUT") {
            self.agent.gateway_timeout = parse_number("HERMES_AGENT_TIMEOUT", v)?;
        }
        self.apply_cron_env(env)?;
        self.mcp_serve.apply_env(env);
        self.store.apply_env(env);
        if let Some(v) = env.get("HERMES_REDACT_SECRETS") {
            self.security.redact_secrets = parse_bool("HERMES_REDACT_SECRETS", v)?;
        }
        if let Some(v) = env.get("SESSION_IDLE_MINUTES") {
            self.session_reset.idle_minutes = parse_number("SESSION_IDLE_MINUTES", v)?;
        }
        if let Some(v) = env.get("SESSION_RESET_HOUR") {
            self.session_reset.at_hour = match v.trim().parse::<u8>() {
                Ok(hour) if hour <= 23 => hour,
                _ => {
                    return Err(env_invalid("SESSION_RESET_HOUR", format!("expected an hour 0-23, found {v:?}")));
                }
            };
        }
        self.env_auth = EnvAuth::from_env(env)?;
        Ok(())
    }

    fn apply_model(&mut self, env: &Env) {
        // Applied in order, so the LLM_* names win over the OPENAI_* ones.
        for name in ["OPENAI_BASE_URL", "LLM_BASE_URL"] {
            if let Some(v) = env.get(name) {
                self.model.base_url = v.trim().to_string();
            }
        }
        if let Some(v) = env.get("LLM_MODEL") {
            self.model.default = v.trim().to_string();
        }
        if let Some(v) = env.get("LLM_PROVIDER") {
            self.model.provider = Some(v.trim().to_string());
        }
        // Applied in order, so each name wins over the ones before it: the generic OpenAI
        // variable, then the named provider's own (as Hermes reads it: an `.env` holding both an
        // OpenAI and an OpenRouter key with `provider: openrouter` means the OpenRouter one),
        // then our explicit LLM_API_KEY.
        let provider_variable = self.model.provider.as_deref().and_then(provider_key_variable);
        for name in ["OPENAI_API_KEY"].into_iter().chain(provider_variable).chain(["LLM_API_KEY"]) {
            if let Some(v) = env.get(name) {
                self.model.api_key = Some(Secret::new(v.trim()));
            }
        }
        for fallback in &mut self.fallback_providers {
            if fallback.api_key.is_none()
                && let Some(v) = fallback.api_key_env.as_deref().and_then(|name| env.get(name))
            {
                fallback.api_key = Some(Secret::new(v.trim()));
            }
        }
    }
}

fn env_invalid(name: &str, message: String) -> ConfigError {
    ConfigError::invalid(format!("{name} (environment)"), message)
}

/// `true/false/1/0/yes/no/on/off`, any case.
pub(crate) fn parse_bool(name: &str, value: &str) -> Result<bool, ConfigError> {
    hermes_adapter::registration::parse_bool(value).map_err(|e| env_invalid(name, e.to_string()))
}

fn parse_number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, ConfigError> {
    value.trim().parse().map_err(|_| env_invalid(name, format!("expected a non-negative whole number, found {value:?}")))
}
