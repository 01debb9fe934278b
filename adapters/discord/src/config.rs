//! `platforms.discord`: the adapter's keys of the block, their environment variables and
//! documentation, and the [`REGISTRATION`] that turns them into a [`DiscordAdapter`].

use crate::{DiscordAdapter, DiscordSendBudget, DiscordSettings};
use hermes_adapter::registration::{
    self, BuildContext, BuildError, EnvKind, EnvVar, ErasedConfig, HomeVars, PairingOffer, PlatformFacts, Registration,
};
use hermes_adapter::values::string_list;
use hermes_adapter::{AdapterConfig, Extra, PlatformAdapter, SettingError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The adapter's keys of `platforms.discord` (the gateway keeps token, allowlists and home
/// channel).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiscordConfig {
    /// Replaces `https://discord.com` for REST.
    pub api_base_url: Option<String>,
    /// In guild channels, answer only when mentioned; unset means yes.
    pub require_mention: Option<bool>,
    /// Channels where every message is answered, mention or not.
    #[serde(deserialize_with = "string_list")]
    pub free_response_chats: Vec<String>,
    /// Outbound rate limits kept by the gateway.
    pub send_budget: DiscordSendBudget,
    /// Free-form settings, passed through unchecked.
    pub extra: Extra,
}

impl AdapterConfig for DiscordConfig {
    fn validate(&self, _enabled: bool) -> Result<(), SettingError> {
        self.send_budget.check()
    }
}

const ENV: &[EnvVar] = &[
    EnvVar {
        name: "DISCORD_BOT_TOKEN",
        key: "token",
        kind: EnvKind::Secret,
        example: "MTIz...",
        description: "setting it enables Discord",
    },
    EnvVar {
        name: "DISCORD_HOME_CHANNEL",
        key: "home_channel",
        kind: EnvKind::Text,
        example: "123456789012345678",
        description: "channel for cron output and notifications",
    },
    EnvVar {
        name: "DISCORD_API_BASE_URL",
        key: "api_base_url",
        kind: EnvKind::Text,
        example: "http://127.0.0.1:3000",
        description: "replaces https://discord.com for REST",
    },
    EnvVar {
        name: "DISCORD_REQUIRE_MENTION",
        key: "require_mention",
        kind: EnvKind::Bool,
        example: "true",
        description: "guild channels: answer only when mentioned",
    },
    EnvVar {
        name: "DISCORD_FREE_RESPONSE_CHATS",
        key: "free_response_chats",
        kind: EnvKind::List,
        example: "123456789012345678",
        description: "channels answered without a mention, comma-separated",
    },
    EnvVar {
        name: "DISCORD_FREE_RESPONSE_CHANNELS",
        key: "free_response_chats",
        kind: EnvKind::List,
        example: "123456789012345678",
        description: "the same, Hermes' other spelling (wins)",
    },
];

const EXAMPLE: &str = "    enabled: null                      # null: enabled when a token is set; false switches it off
    token: null                        # secret bot token (DISCORD_BOT_TOKEN); enable the Message Content intent
    home_channel: null                 # channel id for cron output (DISCORD_HOME_CHANNEL)
    allowed_users: []                  # user ids (snowflakes) only; names never match (DISCORD_ALLOWED_USERS)
    allow_all_users: false             # anyone may talk to the bot (DISCORD_ALLOW_ALL_USERS)
    admin_users: []                    # admins on this platform (DISCORD_ADMIN_USERS)
    api_base_url: null                 # replaces https://discord.com for REST; the gateway URL then comes
                                       # from that server's /api/v10/gateway (DISCORD_API_BASE_URL)
    require_mention: null              # guild channels: answer only when mentioned or replied to
                                       # (Discord default: true; threads need no mention; DISCORD_REQUIRE_MENTION)
    free_response_chats: []            # channel ids answered without a mention (DISCORD_FREE_RESPONSE_CHANNELS)
    send_budget:                       # outbound messages hermes allows itself (0 = no limit), kept under
      global_per_second: 40            # Discord's 50 requests/s and 5 messages per 5 s per channel:
      per_channel_per_second: 0.4      # a burst of 3 at once, then one every 2.5 s
      per_channel_burst: 3
    extra: {}                          # free-form adapter settings, passed through unchecked
";

/// The Discord adapter as the gateway registers it.
pub const REGISTRATION: Registration = Registration {
    platform: "discord",
    summary: "Discord bot (gateway connection and REST).",
    env: ENV,
    example_yaml: EXAMPLE,
    allowlist_entry_problem: Some(crate::allowlist::entry_problem),
    parse: registration::parse::<DiscordConfig>,
    build,
    facts: PlatformFacts {
        people: true,
        home: Some(HomeVars { channel: "DISCORD_HOME_CHANNEL", thread: Some("DISCORD_HOME_CHANNEL_THREAD_ID") }),
        pairing: PairingOffer::Offered,
        buttons: true,
        reactions: false,
    },
};

fn build(config: &dyn ErasedConfig, ctx: &BuildContext<'_>) -> Result<Arc<dyn PlatformAdapter>, BuildError> {
    let config: &DiscordConfig = registration::downcast(config)?;
    let token = ctx.token.ok_or_else(|| BuildError::missing_token("discord", "DISCORD_BOT_TOKEN"))?;
    let mut settings = DiscordSettings::new(token);
    settings.api_base_url = config.api_base_url.clone();
    settings.commands = ctx.commands.to_vec();
    settings.require_mention = config.require_mention.unwrap_or(true);
    settings.free_response_channels = config.free_response_chats.clone();
    settings.link_previews = ctx.link_previews;
    settings.budget = config.send_budget;
    settings.media_dir = Some(ctx.media_dir.to_path_buf());
    settings.media_limits = ctx.media_limits;
    let adapter = DiscordAdapter::new(settings).map_err(|e| BuildError::new(Some(""), e.to_string()))?;
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
        match registration::parse::<DiscordConfig>(&input) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_unusable_send_budget_is_refused_naming_its_key() {
        for key in ["global_per_second", "per_channel_per_second"] {
            let err = budget_error(serde_json::json!({key: -1}));
            assert!(err.contains(&format!("send_budget.{key}")), "{key}: {err}");
            assert_eq!(budget_error(serde_json::json!({key: 0})), "", "{key}: 0 switches the limit off");
        }
        // A burst below one message would never let anything through.
        let err = budget_error(serde_json::json!({"per_channel_burst": 0}));
        assert!(err.contains("send_budget.per_channel_burst"), "{err}");
        assert!(budget_error(serde_json::json!({"per_hour": 5})).contains("per_hour"), "an unknown key is named");
        assert_eq!(budget_error(serde_json::json!({})), "", "the published limits by default");
    }
}
