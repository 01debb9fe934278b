//! What the Discord adapter is configured with, already resolved from config and environment by
//! the gateway (this crate never reads the environment itself).

use hermes_adapter::pacing::{Limits, Rate, check_burst, check_rate};
use hermes_adapter::{MediaLimits, SettingError};
use std::path::PathBuf;
use std::time::Duration;

/// The largest file Discord lets anyone upload (Nitro, 500 MiB): no attachment is larger, so the
/// gateway's own limits are what bind.
pub const DISCORD_MAX_FILE_BYTES: u64 = 500 * 1024 * 1024;

/// Sends allowed back to back overall before the global rate applies: with 40 a second, never
/// more than Discord's 50 requests in any second.
const GLOBAL_BURST: f64 = 10.0;

/// Discord publishes 5 messages per 5 s per channel and 50 requests a second overall. A token
/// bucket that never exceeds "5 in any 5 s" while letting a three-part answer out at once is a
/// burst of 3 then one message every 2.5 s (at most 5 in any 5 s, with 2.5 s to spare for clock
/// skew); serenity's own header-driven limiter then never has to hold a message back, and a
/// flood waits here instead of collecting 429s. Zero switches a limit off.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiscordSendBudget {
    pub global_per_second: f64,
    pub per_channel_per_second: f64,
    pub per_channel_burst: f64,
}

impl Default for DiscordSendBudget {
    fn default() -> Self {
        Self { global_per_second: 40.0, per_channel_per_second: 0.4, per_channel_burst: 3.0 }
    }
}

impl DiscordSendBudget {
    pub fn unlimited() -> Self {
        Self { global_per_second: 0.0, per_channel_per_second: 0.0, per_channel_burst: 1.0 }
    }

    /// Every value usable; the error names the key (`send_budget.<field>`).
    pub fn check(&self) -> Result<(), SettingError> {
        check_rate("send_budget.global_per_second", self.global_per_second)?;
        check_rate("send_budget.per_channel_per_second", self.per_channel_per_second)?;
        check_burst("send_budget.per_channel_burst", self.per_channel_burst)
    }

    pub(crate) fn limits(&self) -> Limits {
        Limits {
            global: Rate::per_second(self.global_per_second, GLOBAL_BURST),
            chat: Rate::per_second(self.per_channel_per_second, self.per_channel_burst),
            group: None,
        }
    }
}

#[derive(Clone)]
pub struct DiscordSettings {
    pub token: String,
    /// Replaces `https://discord.com` for REST; the gateway URL then comes from that server's
    /// `/api/v10/gateway`.
    pub api_base_url: Option<String>,
    /// In guild channels, answer only when mentioned or replied to (threads excepted, see
    /// [`Self::thread_require_mention`]).
    pub require_mention: bool,
    /// Whether threads need a mention too.
    pub thread_require_mention: bool,
    /// Channel ids where every message is answered, mention or not.
    pub free_response_channels: Vec<String>,
    /// How long the gateway connection may stay down before the whole client is rebuilt.
    pub reconnect_grace: Duration,
    /// The slash commands to publish: (name, description), from the gateway's registry.
    pub commands: Vec<(String, String)>,
    /// Let Discord embed links in the bot's messages (`display.link_previews`).
    pub link_previews: bool,
    /// Outbound rate limits kept by the gateway.
    pub budget: DiscordSendBudget,
    /// The media cache folder allowed users' attachments are saved in; `None`: none are fetched.
    pub media_dir: Option<PathBuf>,
    /// What may be fetched (sizes per kind, the longest voice note), from the gateway.
    pub media_limits: MediaLimits,
    /// This adapter's own cap on any one attachment.
    pub max_media_bytes: u64,
}

impl DiscordSettings {
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: token.into(),
            api_base_url: None,
            require_mention: true,
            thread_require_mention: false,
            free_response_channels: Vec::new(),
            reconnect_grace: Duration::from_secs(60),
            commands: Vec::new(),
            link_previews: false,
            budget: DiscordSendBudget::default(),
            media_dir: None,
            media_limits: MediaLimits::default(),
            max_media_bytes: DISCORD_MAX_FILE_BYTES,
        }
    }
}

// The token is a credential: never printed.
impl std::fmt::Debug for DiscordSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordSettings")
            .field("token", &"****")
            .field("api_base_url", &self.api_base_url)
            .field("require_mention", &self.require_mention)
            .field("thread_require_mention", &self.thread_require_mention)
            .field("free_response_channels", &self.free_response_channels)
            .field("commands", &self.commands.len())
            .field("budget", &self.budget)
            .field("media_dir", &self.media_dir)
            .field("media_limits", &self.media_limits)
            .finish_non_exhaustive()
    }
}
