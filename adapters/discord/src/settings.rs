//! What the Discord adapter is configured with, already resolved from config and environment by
//! the gateway (this crate never reads the environment itself).

use std::time::Duration;

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
            .finish_non_exhaustive()
    }
}
