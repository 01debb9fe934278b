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

impl Config {
    /// Applies every supported environment variable (see `env.example`).
    pub fn apply_env(&mut self, env: &Env) -> Result<(), ConfigError> {
        self.apply_model(env);
        self.apply_api_server(env)?;
        self.apply_webhook(env)?;
        for (platform, prefix) in CHAT_PLATFORM_ENV {
            self.apply_chat_platform(env, platform, prefix)?;
        }
        if let Some(v) = env.get("GATEWAY_ALLOWED_USERS") {
            self.gateway.allowed_users = split_list(v);
        }
        if let Some(v) = env.get("GATEWAY_ADMIN_USERS") {
            self.gateway.admin_users = split_list(v);
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
        for name in ["OPENAI_API_KEY", "LLM_API_KEY"] {
            if let Some(v) = env.get(name) {
                self.model.api_key = Some(Secret::new(v.trim()));
            }
        }
        if let Some(v) = env.get("LLM_MODEL") {
            self.model.default = v.trim().to_string();
        }
        if let Some(v) = env.get("LLM_PROVIDER") {
            self.model.provider = Some(v.trim().to_string());
        }
        let anthropic = self.model.provider.as_deref().is_some_and(|p| p.eq_ignore_ascii_case("anthropic"));
        if anthropic
            && self.model.api_key.is_none()
            && let Some(v) = env.get("ANTHROPIC_API_KEY")
        {
            self.model.api_key = Some(Secret::new(v.trim()));
        }
        for fallback in &mut self.fallback_providers {
            if fallback.api_key.is_none()
                && let Some(v) = fallback.api_key_env.as_deref().and_then(|name| env.get(name))
            {
                fallback.api_key = Some(Secret::new(v.trim()));
            }
        }
    }

    fn apply_api_server(&mut self, env: &Env) -> Result<(), ConfigError> {
        let api = &mut self.platforms.api_server;
        if let Some(v) = env.get("API_SERVER_ENABLED") {
            api.enabled = parse_bool("API_SERVER_ENABLED", v)?;
        }
        if let Some(v) = env.get("API_SERVER_KEY") {
            api.key = Some(Secret::new(v.trim()));
        }
        if let Some(v) = env.get("API_SERVER_HOST") {
            api.host = v.trim().to_string();
        }
        if let Some(v) = env.get("API_SERVER_PORT") {
            api.port = parse_port("API_SERVER_PORT", v)?;
        }
        if let Some(v) = env.get("API_SERVER_MODEL_NAME") {
            api.model_name = v.trim().to_string();
        }
        if let Some(v) = env.get("API_SERVER_CORS_ORIGINS") {
            api.cors_origins = split_list(v);
        }
        Ok(())
    }

    fn apply_webhook(&mut self, env: &Env) -> Result<(), ConfigError> {
        let webhook = &mut self.platforms.webhook;
        if let Some(v) = env.get("WEBHOOK_ENABLED") {
            webhook.enabled = parse_bool("WEBHOOK_ENABLED", v)?;
        }
        if let Some(v) = env.get("WEBHOOK_PORT") {
            webhook.port = parse_port("WEBHOOK_PORT", v)?;
        }
        if let Some(v) = env.get("WEBHOOK_SECRET") {
            webhook.secret = Some(Secret::new(v.trim()));
        }
        Ok(())
    }
}

/// Chat platforms configured by `<PREFIX>_BOT_TOKEN`, `<PREFIX>_HOME_CHANNEL`,
/// `<PREFIX>_API_BASE_URL`, `<PREFIX>_REQUIRE_MENTION` and `<PREFIX>_FREE_RESPONSE_CHATS`.
const CHAT_PLATFORM_ENV: [(&str, &str); 2] = [("telegram", "TELEGRAM"), ("discord", "DISCORD")];

impl Config {
    fn apply_chat_platform(&mut self, env: &Env, platform: &str, prefix: &str) -> Result<(), ConfigError> {
        let var = |suffix: &str| format!("{prefix}_{suffix}");
        let names = ["BOT_TOKEN", "HOME_CHANNEL", "API_BASE_URL", "REQUIRE_MENTION", "FREE_RESPONSE_CHATS", "FREE_RESPONSE_CHANNELS"];
        if names.iter().all(|suffix| env.get(&var(suffix)).is_none()) {
            return Ok(());
        }
        let block = self.platforms.others.entry(platform.to_string()).or_default();
        if let Some(v) = env.get(&var("BOT_TOKEN")) {
            block.token = Some(Secret::new(v.trim()));
        }
        if let Some(v) = env.get(&var("HOME_CHANNEL")) {
            block.home_channel = Some(v.trim().to_string());
        }
        if let Some(v) = env.get(&var("API_BASE_URL")) {
            block.api_base_url = Some(v.trim().to_string());
        }
        let name = var("REQUIRE_MENTION");
        if let Some(v) = env.get(&name) {
            block.require_mention = Some(parse_bool(&name, v)?);
        }
        for suffix in ["FREE_RESPONSE_CHATS", "FREE_RESPONSE_CHANNELS"] {
            if let Some(v) = env.get(&var(suffix)) {
                block.free_response_chats = split_list(v);
            }
        }
        Ok(())
    }
}

fn env_invalid(name: &str, message: String) -> ConfigError {
    ConfigError::invalid(format!("{name} (environment)"), message)
}

/// `true/false/1/0/yes/no/on/off`, any case.
pub(crate) fn parse_bool(name: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(env_invalid(name, format!("expected a boolean (true/false, 1/0, yes/no, on/off), found {value:?}"))),
    }
}

/// A TCP port; 0 is refused because "pick any port" is never what an operator means here.
pub(crate) fn parse_port(name: &str, value: &str) -> Result<u16, ConfigError> {
    match value.trim().parse::<u16>() {
        Ok(port) if port != 0 => Ok(port),
        _ => Err(env_invalid(name, format!("expected a port number 1-65535, found {value:?}"))),
    }
}

fn parse_number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, ConfigError> {
    value.trim().parse().map_err(|_| env_invalid(name, format!("expected a non-negative whole number, found {value:?}")))
}
