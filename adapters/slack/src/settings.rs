//! What the Slack adapter is configured with, already resolved from config and environment by
//! the gateway (this crate never reads the environment itself).

use std::time::Duration;

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
            .finish_non_exhaustive()
    }
}
