//! What the Slack adapter is configured with, already resolved from config and environment by
//! the gateway (this crate never reads the environment itself).

use hermes_adapter::SettingError;
use hermes_adapter::pacing::{Limits, Rate, check_burst, check_rate};
use std::time::Duration;

/// Posts allowed back to back across the workspace before its per-minute rate applies.
const WORKSPACE_BURST: f64 = 10.0;

/// Slack's `chat.postMessage` limits: about one message a second per channel, short bursts
/// allowed, under a workspace-wide limit of a few hundred a minute (100 here, Tier 4's floor).
/// Zero switches a limit off.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlackSendBudget {
    pub workspace_per_minute: f64,
    pub per_channel_per_second: f64,
    pub per_channel_burst: f64,
}

impl Default for SlackSendBudget {
    fn default() -> Self {
        Self { workspace_per_minute: 100.0, per_channel_per_second: 1.0, per_channel_burst: 3.0 }
    }
}

impl SlackSendBudget {
    pub fn unlimited() -> Self {
        Self { workspace_per_minute: 0.0, per_channel_per_second: 0.0, per_channel_burst: 1.0 }
    }

    /// Every value usable; the error names the key (`send_budget.<field>`).
    pub fn check(&self) -> Result<(), SettingError> {
        check_rate("send_budget.workspace_per_minute", self.workspace_per_minute)?;
        check_rate("send_budget.per_channel_per_second", self.per_channel_per_second)?;
        check_burst("send_budget.per_channel_burst", self.per_channel_burst)
    }

    pub(crate) fn limits(&self) -> Limits {
        Limits {
            global: Rate::per_minute(self.workspace_per_minute, WORKSPACE_BURST),
            chat: Rate::per_second(self.per_channel_per_second, self.per_channel_burst),
            group: None,
        }
    }
}

#[derive(Clone)]
pub struct SlackSettings {
    /// The bot token (`xoxb-…`): every Web API call.
    pub bot_token: String,
    /// The app-level token (`xapp-…`): only `apps.connections.open`, for Socket Mode.
    pub app_token: String,
    /// Replaces `https://slack.com/api/` for the Web API. Plain `http://` is accepted only on a
    /// loopback host (a local fake): the tokens would otherwise cross the network in clear text.
    pub api_base_url: Option<String>,
    /// In channels, answer only when mentioned (threads the bot is part of excepted, see
    /// [`Self::strict_mention`]).
    pub require_mention: bool,
    /// Threads need a mention too, even once the bot answered there.
    pub strict_mention: bool,
    /// Channel ids where every message is answered, mention or not.
    pub free_response_channels: Vec<String>,
    /// A channel mention is answered in a thread under it (Hermes' `reply_in_thread`).
    pub reply_in_thread: bool,
    /// The slash commands of the gateway, as (name, description): `!name` in a thread means
    /// `/name`, and `/hermes name …` means the same.
    pub commands: Vec<(String, String)>,
    /// Longest message sent, in characters; longer answers are split.
    pub max_message_len: usize,
    /// Let Slack unfurl links in the bot's messages (`display.link_previews`).
    pub link_previews: bool,
    /// Shortest time between two edits of one message. `chat.update` is a Tier 3 method (about
    /// 50 a minute per workspace, with bursts allowed): a stream edits at most twice a second,
    /// and a 429 beyond that is waited out as Slack's `Retry-After` says.
    pub min_edit_interval: Duration,
    /// How often the socket is pinged, and how many pings may go unanswered before it is
    /// rebuilt.
    pub ping_interval: Duration,
    pub missed_pings: u32,
    /// How long one Web API call may take before it is given up on (an unanswered send is then
    /// ambiguous: it may have been posted).
    pub request_timeout: Duration,
    /// Outbound rate limits kept by the gateway.
    pub budget: SlackSendBudget,
    /// The media cache folder allowed users' files are saved in; `None`: none are fetched.
    pub media_dir: Option<std::path::PathBuf>,
    /// What may be fetched (sizes per kind, the longest voice note), from the gateway.
    pub media_limits: hermes_adapter::MediaLimits,
    /// This adapter's own cap on any one file (Slack accepts files up to 1 GB).
    pub max_media_bytes: u64,
}

impl SlackSettings {
    pub fn new(bot_token: impl Into<String>, app_token: impl Into<String>) -> Self {
        Self {
            bot_token: bot_token.into(),
            app_token: app_token.into(),
            api_base_url: None,
            require_mention: true,
            strict_mention: false,
            free_response_channels: Vec::new(),
            reply_in_thread: true,
            commands: Vec::new(),
            link_previews: false,
            max_message_len: crate::adapter::MAX_MESSAGE_LEN,
            min_edit_interval: Duration::from_millis(500),
            ping_interval: Duration::from_secs(10),
            missed_pings: 3,
            request_timeout: Duration::from_secs(20),
            budget: SlackSendBudget::default(),
            media_dir: None,
            media_limits: hermes_adapter::MediaLimits::default(),
            max_media_bytes: 1024 * 1024 * 1024,
        }
    }
}

// The tokens are credentials: never printed.
impl std::fmt::Debug for SlackSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackSettings")
            .field("bot_token", &"****")
            .field("app_token", &"****")
            .field("api_base_url", &self.api_base_url)
            .field("require_mention", &self.require_mention)
            .field("strict_mention", &self.strict_mention)
            .field("free_response_channels", &self.free_response_channels)
            .field("reply_in_thread", &self.reply_in_thread)
            .field("commands", &self.commands.len())
            .field("budget", &self.budget)
            .field("media_dir", &self.media_dir)
            .field("media_limits", &self.media_limits)
            .finish_non_exhaustive()
    }
}
