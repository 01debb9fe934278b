//! `platforms.telegram`: the adapter's keys of the block, their environment variables and
//! documentation, and the [`REGISTRATION`] that turns them into a [`TelegramAdapter`].

use crate::{SendBudget, TelegramAdapter, TelegramSettings};
use hermes_adapter::registration::{
    self, BuildContext, BuildError, EnvKind, EnvVar, ErasedConfig, HomeVars, PairingOffer, PlatformFacts, Registration,
};
use hermes_adapter::values::string_list;
use hermes_adapter::{AdapterConfig, Extra, PlatformAdapter, SettingError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The adapter's keys of `platforms.telegram` (the gateway keeps token, allowlists and home
/// channel).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// Free-form settings, passed through unchecked.
    pub extra: Extra,
}

impl AdapterConfig for TelegramConfig {
    fn validate(&self, _enabled: bool) -> Result<(), SettingError> {
        self.send_budget.check()
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
    extra: {}                          # free-form adapter settings, passed through unchecked
";

/// The Telegram adapter as the gateway registers it.
pub const REGISTRATION: Registration = Registration {
    platform: "telegram",
    summary: "Telegram bot (long polling through the Bot API).",
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
}
