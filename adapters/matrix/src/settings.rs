//! What the Matrix adapter is configured with, already resolved from config and environment by
//! the gateway (this crate never reads the environment itself).

use hermes_adapter::SettingError;
use hermes_adapter::pacing::{Limits, Rate, check_burst, check_rate};
use std::path::PathBuf;
use std::time::Duration;
use url::Url;

/// Messages per room hermes allows itself. Synapse's default `rc_message` (0.2 a second, bursts
/// of 10) counts per user across rooms and bot accounts are usually exempted from it, so this is
/// a generous flood guard per room; whatever the homeserver enforces comes back as a 429 whose
/// `retry_after_ms` holds back that room's later sends. Zero switches the limit off.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MatrixSendBudget {
    pub per_room_per_second: f64,
    pub per_room_burst: f64,
}

impl Default for MatrixSendBudget {
    fn default() -> Self {
        Self { per_room_per_second: 1.0, per_room_burst: 10.0 }
    }
}

impl MatrixSendBudget {
    /// Every value usable; the error names the key (`send_budget.<field>`).
    pub fn check(&self) -> Result<(), SettingError> {
        check_rate("send_budget.per_room_per_second", self.per_room_per_second)?;
        check_burst("send_budget.per_room_burst", self.per_room_burst)
    }

    pub(crate) fn limits(&self) -> Limits {
        Limits { global: None, chat: Rate::per_second(self.per_room_per_second, self.per_room_burst), group: None }
    }
}

/// How the bot proves who it is.
#[derive(Clone)]
pub enum Login {
    /// An access token from the owner (`MATRIX_ACCESS_TOKEN`); the user and device are asked of
    /// the homeserver when not configured.
    Token(String),
    /// A password (`MATRIX_PASSWORD`): the bot logs in once and keeps the session (token and
    /// device) in its state folder, so a restart is the same device with the same keys.
    Password(String),
}

#[derive(Clone)]
pub struct MatrixSettings {
    /// The homeserver's base URL (https, or http on loopback).
    pub homeserver: Url,
    /// The bot's full user id; required with a password.
    pub user_id: Option<String>,
    pub login: Login,
    /// The device to log in as / restore (`MATRIX_DEVICE_ID`).
    pub device_id: Option<String>,
    /// A key-backup recovery key: recover the bot's secrets and room keys from the backup.
    pub recovery_key: Option<String>,
    /// In rooms (not DMs), answer only when mentioned.
    pub require_mention: bool,
    /// Threads need a mention too, even where the bot takes part.
    pub thread_require_mention: bool,
    /// Room ids where every message is answered, mention or not.
    pub free_response_rooms: Vec<String>,
    /// A room mention is answered in a thread under it.
    pub auto_thread: bool,
    /// The prefix that also starts a command (`!status` means `/status`); empty: off.
    pub command_prefix: String,
    /// The gateway's slash commands (names without `/`), for the command prefix.
    pub commands: Vec<String>,
    /// The adapter's private folder: session, crypto store, sync token, approval prompts.
    pub state_dir: PathBuf,
    /// Where inbound attachments are saved.
    pub media_dir: PathBuf,
    /// Largest attachment downloaded.
    pub max_media_bytes: u64,
    /// The gateway's limits per kind (voice length, audio and image sizes), checked with the
    /// sender's declared facts before anything is fetched.
    pub media_limits: hermes_adapter::MediaLimits,
    /// Longest message sent, in characters.
    pub max_message_len: usize,
    /// Let clients preview links in the bot's messages (`display.link_previews`); off, messages
    /// carry an empty `com.beeper.linkpreviews` (MSC4095).
    pub link_previews: bool,
    /// How long the homeserver may hold one `/sync` open.
    pub sync_timeout: Duration,
    /// How long one request may take before it is given up on.
    pub request_timeout: Duration,
    /// Shortest time between two edits of one message.
    pub min_edit_interval: Duration,
    /// Outbound rate limits kept by the gateway.
    pub budget: MatrixSendBudget,
}

impl MatrixSettings {
    pub fn new(homeserver: Url, login: Login, state_dir: PathBuf, media_dir: PathBuf) -> Self {
        Self {
            homeserver,
            user_id: None,
            login,
            device_id: None,
            recovery_key: None,
            require_mention: true,
            thread_require_mention: false,
            free_response_rooms: Vec::new(),
            auto_thread: true,
            command_prefix: "!".to_string(),
            commands: Vec::new(),
            state_dir,
            media_dir,
            max_media_bytes: 20 * 1024 * 1024,
            media_limits: hermes_adapter::MediaLimits::default(),
            max_message_len: crate::adapter::MAX_MESSAGE_LEN,
            link_previews: false,
            sync_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            min_edit_interval: Duration::from_secs(1),
            budget: MatrixSendBudget::default(),
        }
    }
}

// The password, token and recovery key are credentials: never printed.
impl std::fmt::Debug for MatrixSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let login = match self.login {
            Login::Token(_) => "access token ****",
            Login::Password(_) => "password ****",
        };
        f.debug_struct("MatrixSettings")
            .field("homeserver", &self.homeserver.as_str())
            .field("user_id", &self.user_id)
            .field("login", &login)
            .field("device_id", &self.device_id)
            .field("recovery_key", &self.recovery_key.as_ref().map(|_| "****"))
            .field("require_mention", &self.require_mention)
            .field("thread_require_mention", &self.thread_require_mention)
            .field("free_response_rooms", &self.free_response_rooms)
            .field("auto_thread", &self.auto_thread)
            .field("command_prefix", &self.command_prefix)
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_credential() {
        let url = Url::parse("https://matrix.example.org").unwrap();
        let mut settings = MatrixSettings::new(url, Login::Password("hunter2-pw".into()), "/s".into(), "/m".into());
        settings.recovery_key = Some("EsTj 3yST recovery".into());
        let shown = format!("{settings:?}");
        assert!(!shown.contains("hunter2") && !shown.contains("EsTj"), "{shown}");
        settings.login = Login::Token("syt_secret_token".into());
        assert!(!format!("{settings:?}").contains("syt_secret"));
    }
}
