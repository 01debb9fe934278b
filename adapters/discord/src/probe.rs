//! `hermes doctor`'s question to Discord: who is this bot (`GET /users/@me`), with the configured
//! token and API base URL. Nothing is received or sent.

use crate::adapter::DiscordAdapter;
use hermes_adapter::AdapterError;

impl DiscordAdapter {
    /// The bot's name and id, or why Discord would not say.
    pub(crate) async fn identify_for_probe(&self) -> Result<Option<String>, AdapterError> {
        match self.http.get_current_user().await {
            Ok(me) => Ok(Some(format!("{} (user id {})", me.name, me.id))),
            Err(serenity::Error::Http(serenity::http::HttpError::UnsuccessfulRequest(r))) if r.status_code.as_u16() == 401 => {
                Err(AdapterError::fatal(
                    "discord_token",
                    "Discord rejected the bot token (reset or mistyped); set DISCORD_BOT_TOKEN to the token of the bot's page in the developer portal",
                ))
            }
            Err(e) => Err(AdapterError::retryable(
                "discord_rest",
                format!("could not ask Discord who the bot is: {}; check the API base URL and the network", crate::errors::classify(e)),
            )),
        }
    }
}
