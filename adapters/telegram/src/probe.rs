//! `hermes doctor`'s question to Telegram: who is this bot (`getMe`), with the configured token
//! and API base URL. Nothing is received or sent.

use crate::adapter::TelegramAdapter;
use hermes_adapter::AdapterError;
use teloxide::prelude::Requester;
use teloxide::{ApiError, RequestError};

impl TelegramAdapter {
    /// The bot's username and id, or why Telegram would not say.
    pub(crate) async fn identify_for_probe(&self) -> Result<Option<String>, AdapterError> {
        match self.bot.get_me().await {
            Ok(me) => {
                let name = me.username.clone().map_or_else(|| me.first_name.clone(), |u| format!("@{u}"));
                Ok(Some(format!("{name} (bot id {})", me.id.0)))
            }
            Err(RequestError::Api(ApiError::InvalidToken)) => Err(AdapterError::fatal(
                "telegram_token",
                "Telegram rejected the bot token (revoked or mistyped); set TELEGRAM_BOT_TOKEN to the token @BotFather shows",
            )),
            // teloxide strips the URL (and so the token) from its errors.
            Err(e) => {
                Err(AdapterError::retryable("telegram_getme", format!("getMe failed: {e}; check TELEGRAM_API_BASE_URL and the network")))
            }
        }
    }
}
