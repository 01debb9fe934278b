//! `platforms.slack`: the adapter's keys of the block, their environment variables and
//! documentation, and the [`REGISTRATION`] that turns them into a [`SlackAdapter`].

use crate::{SlackAdapter, SlackSendBudget, SlackSettings};
use hermes_adapter::registration::{
    self, BuildContext, BuildError, EnvKind, EnvVar, ErasedConfig, HomeVars, PairingOffer, PlatformFacts, Registration, SettingError,
};
use hermes_adapter::values::string_list;
use hermes_adapter::{AdapterConfig, Extra, PlatformAdapter, Secret};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The adapter's keys of `platforms.slack` (the gateway keeps the bot token, allowlists and home
/// channel).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SlackConfig {
    /// The app-level token (`xapp-…`) Socket Mode connects with.
    pub app_token: Option<Secret>,
    /// Replaces `https://slack.com/api/` for the Web API.
    pub api_base_url: Option<String>,
    /// In channels, answer only when mentioned; unset means yes.
    pub require_mention: Option<bool>,
    /// Threads need a mention even after the bot answered in them.
    pub strict_mention: Option<bool>,
    /// Channels where every message is answered, mention or not.
    #[serde(deserialize_with = "string_list")]
    pub free_response_chats: Vec<String>,
    /// A channel mention is answered in a thread under it; unset means yes.
    pub reply_in_thread: Option<bool>,
    /// Longest message sent, in characters (longer answers are split); unset: 39,000.
    pub chunk_limit: Option<usize>,
    /// Outbound rate limits kept by the gateway.
    pub send_budget: SlackSendBudget,
    /// Free-form settings, passed through unchecked.
    pub extra: Extra,
}

impl AdapterConfig for SlackConfig {
    fn validate(&self, _enabled: bool) -> Result<(), SettingError> {
        if let Some(token) = self.app_token.as_ref().filter(|t| !t.is_empty())
            && !token.expose().trim().starts_with("xapp-")
        {
            return Err(SettingError::key(
                "app_token (SLACK_APP_TOKEN)",
                "expected an app-level token starting with xapp- (Basic Information → App-Level Tokens, scope connections:write)",
            ));
        }
        if let Some(limit) = self.chunk_limit
            && !(MIN_CHUNK..=crate::adapter::MAX_MESSAGE_LEN).contains(&limit)
        {
            return Err(SettingError::key(
                "chunk_limit",
                format!(
                    "expected {MIN_CHUNK} to {} characters (Slack refuses longer text), found {limit}",
                    crate::adapter::MAX_MESSAGE_LEN
                ),
            ));
        }
        self.send_budget.check()
    }

    fn secrets(&self) -> Vec<String> {
        self.app_token.iter().map(|s| s.expose().to_string()).collect()
    }
}

/// Below this a split answer is mostly part counters.
const MIN_CHUNK: usize = 500;

const ENV: &[EnvVar] = &[
    EnvVar {
        name: "SLACK_BOT_TOKEN",
        key: "token",
        kind: EnvKind::Secret,
        example: "xoxb-...",
        description: "setting it enables Slack (with SLACK_APP_TOKEN)",
    },
    EnvVar {
        name: "SLACK_APP_TOKEN",
        key: "app_token",
        kind: EnvKind::Secret,
        example: "xapp-...",
        description: "app-level token for Socket Mode (scope connections:write)",
    },
    EnvVar {
        name: "SLACK_HOME_CHANNEL",
        key: "home_channel",
        kind: EnvKind::Text,
        example: "C0123456789",
        description: "channel for cron output and notifications",
    },
    EnvVar {
        name: "SLACK_API_BASE_URL",
        key: "api_base_url",
        kind: EnvKind::Text,
        example: "http://127.0.0.1:8083/api/",
        description: "replaces https://slack.com/api/ for the Web API",
    },
    EnvVar {
        name: "SLACK_REQUIRE_MENTION",
        key: "require_mention",
        kind: EnvKind::Bool,
        example: "true",
        description: "channels: answer only when mentioned",
    },
    EnvVar {
        name: "SLACK_STRICT_MENTION",
        key: "strict_mention",
        kind: EnvKind::Bool,
        example: "false",
        description: "threads need a mention even after the bot answered there",
    },
    EnvVar {
        name: "SLACK_FREE_RESPONSE_CHANNELS",
        key: "free_response_chats",
        kind: EnvKind::List,
        example: "C0123456789",
        description: "channels answered without a mention, comma-separated",
    },
];

const EXAMPLE: &str = "    enabled: null                      # null: enabled when a token is set; false switches it off
    token: null                        # secret bot token xoxb-... (SLACK_BOT_TOKEN)
    app_token: null                    # secret app-level token xapp-... for Socket Mode (SLACK_APP_TOKEN)
    home_channel: null                 # channel id for cron output (SLACK_HOME_CHANNEL)
    allowed_users: []                  # member ids (U0123ABCDEF) only; names never match (SLACK_ALLOWED_USERS)
    allow_all_users: false             # anyone in the workspace may talk to the bot (SLACK_ALLOW_ALL_USERS)
    admin_users: []                    # admins on this platform (SLACK_ADMIN_USERS)
    api_base_url: null                 # replaces https://slack.com/api/; http:// only on loopback (SLACK_API_BASE_URL)
    require_mention: null              # channels: answer only when @mentioned (default true; SLACK_REQUIRE_MENTION)
    strict_mention: null               # threads need a mention even once the bot answered there
                                       # (default false; SLACK_STRICT_MENTION)
    free_response_chats: []            # channel ids answered without a mention (SLACK_FREE_RESPONSE_CHANNELS)
    reply_in_thread: null              # answer a channel mention in a thread under it (default true)
    chunk_limit: null                  # longest message in characters, 500-39000 (default 39000); Slack
                                       # folds long messages behind Show more, so 4000 reads better
    send_budget:                       # outbound messages hermes allows itself (0 = no limit), kept under
      workspace_per_minute: 100        # Slack's chat.postMessage limits: about one a second per channel
      per_channel_per_second: 1        # with short bursts, and a workspace-wide limit
      per_channel_burst: 3
    extra: {}                          # free-form adapter settings, passed through unchecked
";

/// The Slack adapter as the gateway registers it.
pub const REGISTRATION: Registration = Registration {
    platform: "slack",
    summary: "Slack app (Socket Mode and the Web API).",
    env: ENV,
    example_yaml: EXAMPLE,
    allowlist_entry_problem: Some(crate::allowlist::entry_problem),
    parse: registration::parse::<SlackConfig>,
    build,
    facts: PlatformFacts {
        people: true,
        home: Some(HomeVars { channel: "SLACK_HOME_CHANNEL", thread: Some("SLACK_HOME_CHANNEL_THREAD_ID") }),
        pairing: PairingOffer::Offered,
        buttons: true,
        reactions: false,
    },
};

fn build(config: &dyn ErasedConfig, ctx: &BuildContext<'_>) -> Result<Arc<dyn PlatformAdapter>, BuildError> {
    let config: &SlackConfig = registration::downcast(config)?;
    let bot_token = ctx.token.ok_or_else(|| BuildError::missing_token("slack", "SLACK_BOT_TOKEN"))?;
    let app_token = config.app_token.as_ref().map(|t| t.expose().trim()).filter(|t| !t.is_empty()).ok_or_else(|| {
        BuildError::new(
            Some("app_token"),
            "Slack is enabled but has no app-level token; set SLACK_APP_TOKEN (xapp-..., scope connections:write) for Socket Mode",
        )
    })?;
    let mut settings = SlackSettings::new(bot_token, app_token);
    settings.api_base_url = config.api_base_url.clone();
    settings.require_mention = config.require_mention.unwrap_or(true);
    settings.strict_mention = config.strict_mention.unwrap_or(false);
    settings.free_response_channels = config.free_response_chats.clone();
    settings.reply_in_thread = config.reply_in_thread.unwrap_or(true);
    settings.commands = ctx.commands.to_vec();
    settings.link_previews = ctx.link_previews;
    settings.budget = config.send_budget;
    settings.media_dir = Some(ctx.media_dir.to_path_buf());
    settings.media_limits = ctx.media_limits;
    if let Some(limit) = config.chunk_limit {
        settings.max_message_len = limit;
    }
    let adapter = SlackAdapter::new(settings).map_err(|e| BuildError::new(e.key(), e.to_string()))?;
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
        match registration::parse::<SlackConfig>(&input) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_unusable_send_budget_is_refused_naming_its_key() {
        for key in ["workspace_per_minute", "per_channel_per_second"] {
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
