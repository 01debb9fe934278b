//! What the Telegram adapter is configured with, already resolved from config and environment by
//! the gateway (this crate never reads the environment itself).

use hermes_adapter::{MediaLimits, Secret};
use std::path::PathBuf;
use std::time::Duration;

/// Telegram's documented limits: about 30 messages a second overall, one a second per chat (short
/// bursts tolerated) and 20 a minute in a group (in any minute: see `crate::budget`). Zero switches a limit off (a self-hosted Bot API
/// server without limits, or a benchmark against a fake).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SendBudget {
    pub global_per_second: f64,
    pub per_chat_per_second: f64,
    pub group_per_minute: f64,
}

impl Default for SendBudget {
    fn default() -> Self {
        Self { global_per_second: 30.0, per_chat_per_second: 1.0, group_per_minute: 20.0 }
    }
}

impl SendBudget {
    pub fn unlimited() -> Self {
        Self { global_per_second: 0.0, per_chat_per_second: 0.0, group_per_minute: 0.0 }
    }

    /// Every rate a finite number, 0 or more; the error names the key (`send_budget.<field>`).
    pub fn check(&self) -> Result<(), hermes_adapter::SettingError> {
        use hermes_adapter::pacing::check_rate;
        check_rate("send_budget.global_per_second", self.global_per_second)?;
        check_rate("send_budget.per_chat_per_second", self.per_chat_per_second)?;
        check_rate("send_budget.group_per_minute", self.group_per_minute)
    }
}

#[derive(Clone)]
pub struct TelegramSettings {
    pub token: String,
    /// Replaces `https://api.telegram.org` (a self-hosted Bot API server, or a test fake).
    pub api_base_url: Option<String>,
    /// In groups, answer only when mentioned, replied to or addressed with `/command@bot`.
    pub require_mention: bool,
    /// Group chat ids where every message is answered, mention or not.
    pub free_response_chats: Vec<String>,
    /// Seconds a `getUpdates` long poll may wait for news.
    pub poll_timeout: Duration,
    pub budget: SendBudget,
    /// Where inbound photos and documents are saved (`HERMES_HOME/cache`, a private
    /// [`hermes_adapter::MediaCache`] the gateway keeps within its limits).
    pub media_dir: PathBuf,
    /// Larger inbound files are not downloaded (the attachment says why); the Bot API serves
    /// bots at most 20 MB.
    pub max_media_bytes: u64,
    /// What the gateway accepts (sizes per kind, voice note length), checked against what a
    /// message declares before anything is fetched.
    pub media_limits: MediaLimits,
    /// Published as the bot's command menu (`setMyCommands`): name without `/`, description.
    pub commands: Vec<(String, String)>,
    /// Let Telegram show link previews under the bot's messages (`display.link_previews`).
    pub link_previews: bool,
    /// How updates arrive: long polling (one process per token) or a webhook (any replica).
    pub mode: Mode,
}

/// How Telegram hands the bot its updates.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// `getUpdates` long polling: only one process may poll a token, so the supervisor leases it.
    Polling,
    /// Telegram POSTs each update to a public URL; every replica behind it may serve it.
    Webhook(WebhookSettings),
}

/// Where Telegram calls, where we listen, and the secret it must present.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookSettings {
    /// The public HTTPS URL given to `setWebhook`; its path is the route served locally.
    pub url: String,
    /// The local address listened on (usually behind a TLS-terminating reverse proxy).
    pub host: String,
    pub port: u16,
    /// Telegram's `secret_token`, sent back in `X-Telegram-Bot-Api-Secret-Token`.
    pub secret: Secret,
}

impl TelegramSettings {
    pub fn new(token: impl Into<String>, media_dir: PathBuf) -> Self {
        Self {
            token: token.into(),
            api_base_url: None,
            require_mention: false,
            free_response_chats: Vec::new(),
            poll_timeout: Duration::from_secs(30),
            budget: SendBudget::default(),
            media_dir,
            max_media_bytes: 20 * 1024 * 1024,
            media_limits: MediaLimits::default(),
            commands: Vec::new(),
            link_previews: false,
            mode: Mode::Polling,
        }
    }

    /// The bot's numeric id: the part of the token before the colon.
    pub fn bot_id(&self) -> Option<u64> {
        self.token.split_once(':').and_then(|(id, _)| id.parse().ok())
    }
}

// The token is a credential: never printed.
impl std::fmt::Debug for TelegramSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramSettings")
            .field("token", &"****")
            .field("api_base_url", &self.api_base_url)
            .field("require_mention", &self.require_mention)
            .field("poll_timeout", &self.poll_timeout)
            .field("budget", &self.budget)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}
