//! `platforms.telegram`: the adapter's keys of the block, their environment variables and
//! documentation, and the [`REGISTRATION`] that turns them into a [`TelegramAdapter`].

use crate::settings::{Mode, WebhookSettings};
use crate::webhook::keys;
use crate::{SendBudget, TelegramAdapter, TelegramSettings};
use hermes_adapter::registration::{
    self, BuildContext, BuildError, EnvKind, EnvVar, ErasedConfig, HomeVars, PairingOffer, PlatformFacts, Registration,
};
use hermes_adapter::secret::{self, Secret};
use hermes_adapter::values::string_list;
use hermes_adapter::{AdapterConfig, Extra, PlatformAdapter, SettingError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The adapter's keys of `platforms.telegram` (the gateway keeps token, allowlists and home
/// channel).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TelegramConfig {
    /// Replaces `https://api.telegram.org` (a self-hosted Bot API server, a test fake).
    pub api_base_url: Option<String>,
    /// In groups, answer only when mentioned; unset means no.
    pub require_mention: Option<bool>,
    /// Group chats where every message is answered, mention or not.
    #[serde(deserialize_with = "string_list")]
    pub free_response_chats: Vec<String>,
    /// Outbound rate limits kept by the gateway.
    pub send_budget: SendBudget,
    /// `polling` (default) or `webhook`.
    pub mode: TelegramMode,
    /// Webhook mode: the public HTTPS URL Telegram POSTs updates to.
    pub webhook_url: Option<String>,
    /// Webhook mode: the local address listened on; unset means 127.0.0.1.
    pub webhook_host: Option<String>,
    /// Webhook mode: the local port listened on.
    pub webhook_port: u16,
    /// Webhook mode: Telegram's `secret_token`, checked on every POST.
    #[serde(deserialize_with = "secret::optional")]
    pub webhook_secret: Option<Secret>,
    /// Free-form settings, passed through unchecked.
    pub extra: Extra,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        Self {
            api_base_url: None,
            require_mention: None,
            free_response_chats: Vec::new(),
            send_budget: SendBudget::default(),
            mode: TelegramMode::Polling,
            webhook_url: None,
            webhook_host: None,
            webhook_port: keys::DEFAULT_PORT,
            webhook_secret: None,
            extra: Extra::default(),
        }
    }
}

/// `platforms.telegram.mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TelegramMode {
    #[default]
    Polling,
    Webhook,
}

impl TelegramConfig {
    /// The webhook settings, checked, in webhook mode; `None` when polling.
    fn webhook(&self) -> Result<Option<WebhookSettings>, SettingError> {
        if self.mode == TelegramMode::Polling {
            return Ok(None);
        }
        let url = keys::url(self.webhook_url.as_deref())?;
        let host = keys::host(self.webhook_host.as_deref())?;
        let port = keys::port(self.webhook_port)?;
        let secret = keys::secret(self.webhook_secret.as_ref())?;
        Ok(Some(WebhookSettings { url, host, port, secret }))
    }
}

impl AdapterConfig for TelegramConfig {
    fn validate(&self, enabled: bool) -> Result<(), SettingError> {
        self.send_budget.check()?;
        // A switched-off platform need not be complete; `build` checks again before it runs.
        if enabled {
            self.webhook()?;
        }
        Ok(())
    }

    fn secrets(&self) -> Vec<String> {
        self.webhook_secret.iter().map(|s| s.expose().to_string()).collect()
    }

    fn listener(&self) -> Option<(String, u16)> {
        (self.mode == TelegramMode::Webhook)
            .then(|| (self.webhook_host.clone().unwrap_or_else(|| keys::DEFAULT_HOST.to_string()), self.webhook_port))
    }
}

const ENV: &[EnvVar] = &[
    EnvVar {
        name: "TELEGRAM_BOT_TOKEN",
        key: "token",
        kind: EnvKind::Secret,
        example: "123456:ABC...",
        description: "setting it enables Telegram",
    },
    EnvVar {
        name: "TELEGRAM_HOME_CHANNEL",
        key: "home_channel",
        kind: EnvKind::Text,
        example: "-1001234567890",
        description: "chat for cron output and notifications",
    },
    EnvVar {
        name: "TELEGRAM_API_BASE_URL",
        key: "api_base_url",
        kind: EnvKind::Text,
        example: "http://127.0.0.1:8081",
        description: "a self-hosted Bot API server",
    },
    EnvVar {
        name: "TELEGRAM_REQUIRE_MENTION",
        key: "require_mention",
        kind: EnvKind::Bool,
        example: "false",
        description: "groups: answer only when mentioned",
    },
    EnvVar {
        name: "TELEGRAM_FREE_RESPONSE_CHATS",
        key: "free_response_chats",
        kind: EnvKind::List,
        example: "-100123",
        description: "group chats answered without a mention, comma-separated",
    },
    EnvVar {
        name: "TELEGRAM_FREE_RESPONSE_CHANNELS",
        key: "free_response_chats",
        kind: EnvKind::List,
        example: "-100123",
        description: "the same, Hermes' other spelling (wins)",
    },
    EnvVar {
        name: "TELEGRAM_WEBHOOK_SECRET",
        key: "webhook_secret",
        kind: EnvKind::Secret,
        example: "",
        description: "webhook mode: the secret_token Telegram sends back, 16-256 of A-Z a-z 0-9 _ -",
    },
];

const EXAMPLE: &str = "    enabled: null                      # null: enabled when a token is set; false switches it off
    token: null                        # secret bot token (TELEGRAM_BOT_TOKEN)
    api_key: null                      # secret, for platforms that use one
    home_channel: null                 # chat id for cron output and notifications (TELEGRAM_HOME_CHANNEL)
    allowed_users: []                  # numeric user ids or @usernames allowed to talk to the bot; \"*\" = anyone
                                       # (TELEGRAM_ALLOWED_USERS replaces this list); names never match
    allow_all_users: false             # anyone may talk to the bot (TELEGRAM_ALLOW_ALL_USERS)
    admin_users: []                    # admins on this platform (TELEGRAM_ADMIN_USERS); see gateway.admin_users
    api_base_url: null                 # a self-hosted Bot API server instead of https://api.telegram.org
                                       # (TELEGRAM_API_BASE_URL)
    require_mention: null              # groups: answer only when mentioned, replied to or sent
                                       # /command@bot (Telegram default: false; TELEGRAM_REQUIRE_MENTION)
    free_response_chats: []            # group chat ids answered without a mention (TELEGRAM_FREE_RESPONSE_CHATS)
    send_budget:                       # outbound messages per second hermes allows itself (0 = no limit),
      global_per_second: 30            # kept under Telegram's flood limits
      per_chat_per_second: 1
      group_per_minute: 20
    mode: polling                      # polling: getUpdates, one process per token; webhook: Telegram POSTs
                                       # each update to webhook_url, so any replica behind it may take it
    webhook_url: null                  # webhook mode: the public https:// URL Telegram calls (port 443, 80,
                                       # 88 or 8443); its path is served locally
    webhook_host: null                 # webhook mode: local address to listen on (null: 127.0.0.1); put a
                                       # TLS-terminating reverse proxy in front
    webhook_port: 8646                 # webhook mode: local port to listen on
    webhook_secret: null               # webhook mode: secret Telegram sends in X-Telegram-Bot-Api-Secret-Token,
                                       # 16-256 of A-Z a-z 0-9 _ - (TELEGRAM_WEBHOOK_SECRET)
    extra: {}                          # free-form adapter settings, passed through unchecked
";

/// The Telegram adapter as the gateway registers it.
pub const REGISTRATION: Registration = Registration {
    platform: "telegram",
    summary: "Telegram bot (long polling or a webhook, through the Bot API).",
    env: ENV,
    example_yaml: EXAMPLE,
    allowlist_entry_problem: Some(crate::allowlist::entry_problem),
    parse: registration::parse::<TelegramConfig>,
    build,
    facts: PlatformFacts {
        people: true,
        home: Some(HomeVars { channel: "TELEGRAM_HOME_CHANNEL", thread: Some("TELEGRAM_HOME_CHANNEL_THREAD_ID") }),
        pairing: PairingOffer::Offered,
        buttons: true,
        reactions: false,
    },
};

fn build(config: &dyn ErasedConfig, ctx: &BuildContext<'_>) -> Result<Arc<dyn PlatformAdapter>, BuildError> {
    let config: &TelegramConfig = registration::downcast(config)?;
    let token = ctx.token.ok_or_else(|| BuildError::missing_token("telegram", "TELEGRAM_BOT_TOKEN"))?;
    let mut settings = TelegramSettings::new(token, ctx.media_dir.to_path_buf());
    settings.api_base_url = config.api_base_url.clone();
    settings.require_mention = config.require_mention.unwrap_or(false);
    settings.free_response_chats = config.free_response_chats.clone();
    settings.commands = ctx.commands.to_vec();
    settings.link_previews = ctx.link_previews;
    settings.media_limits = ctx.media_limits;
    settings.budget = config.send_budget;
    settings.mode = match config.webhook().map_err(|e| BuildError::new(Some(""), e.to_string()))? {
        Some(webhook) => Mode::Webhook(webhook),
        None => Mode::Polling,
    };
    let adapter = TelegramAdapter::new(settings).map_err(|e| BuildError::new(Some(""), e.to_string()))?;
    Ok(Arc::new(adapter))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `send_budget:` block as written, parsed; the error's text (empty when it is fine).
    fn budget_error(budget: serde_json::Value) -> String {
        let block = serde_json::json!({"send_budget": budget});
        let lookup = |_: &str| None;
        let input = registration::BlockInput { block: &block, env: &lookup, vars: &[], enabled: false };
        match registration::parse::<TelegramConfig>(&input) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_unusable_send_budget_is_refused_naming_its_key() {
        for key in ["global_per_second", "per_chat_per_second", "group_per_minute"] {
            let err = budget_error(serde_json::json!({key: -1}));
            assert!(err.contains(&format!("send_budget.{key}")), "{key}: {err}");
            assert_eq!(budget_error(serde_json::json!({key: 0})), "", "{key}: 0 switches the limit off");
        }
        assert!(budget_error(serde_json::json!({"per_hour": 5})).contains("per_hour"), "an unknown key is named");
        assert_eq!(budget_error(serde_json::json!({})), "", "the published limits by default");
    }

    /// A `platforms.telegram` block with `TELEGRAM_WEBHOOK_SECRET` set to `env_secret`, parsed.
    fn block_error(block: serde_json::Value, env_secret: Option<&str>) -> String {
        let lookup = |name: &str| (name == "TELEGRAM_WEBHOOK_SECRET").then(|| env_secret.map(str::to_string)).flatten();
        let input = registration::BlockInput { block: &block, env: &lookup, vars: ENV, enabled: true };
        match registration::parse::<TelegramConfig>(&input) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn webhook_settings_are_refused_naming_their_key() {
        let good = || serde_json::json!({"mode": "webhook", "webhook_url": "https://bot.example.org/tg", "webhook_secret": "f3A9_k2L-q8Zr7Xw1bN0"});
        assert_eq!(block_error(good(), None), "");
        let with = |key: &str, value: serde_json::Value| {
            let mut block = good();
            block[key] = value;
            block_error(block, None)
        };
        for (key, value) in [
            ("webhook_url", serde_json::Value::Null),
            ("webhook_url", serde_json::json!("http://bot.example.org/tg")),
            ("webhook_url", serde_json::json!("https://bot.example.org:9000/tg")),
            ("webhook_secret", serde_json::Value::Null),
            ("webhook_secret", serde_json::json!("short")),
            ("webhook_secret", serde_json::json!("changeme-changeme-123")),
            ("webhook_secret", serde_json::json!("not allowed here!!1234")),
            ("webhook_host", serde_json::json!("bot.example.org")),
            ("webhook_port", serde_json::json!(0)),
        ] {
            let err = with(key, value.clone());
            assert!(err.contains(key), "{key} = {value}: {err}");
            assert!(!err.contains("changeme-changeme-123"), "a secret is never quoted: {err}");
        }
        assert!(with("mode", serde_json::json!("push")).contains("mode"));
        let mut from_env = good();
        from_env["webhook_secret"] = serde_json::Value::Null;
        assert_eq!(block_error(from_env, Some("f3A9_k2L-q8Zr7Xw1bN0")), "", "TELEGRAM_WEBHOOK_SECRET supplies it");
        assert_eq!(block_error(serde_json::json!({"webhook_port": 0}), None), "", "polling ignores the webhook keys");
    }

    #[test]
    fn the_webhook_secret_is_a_secret() {
        let config = TelegramConfig { webhook_secret: Some(Secret::new("f3A9_k2L-q8Zr7Xw1bN0")), ..TelegramConfig::default() };
        assert_eq!(AdapterConfig::secrets(&config), ["f3A9_k2L-q8Zr7Xw1bN0"]);
        assert!(REGISTRATION.secret_env_names().any(|name| name == "TELEGRAM_WEBHOOK_SECRET"));
    }
}
