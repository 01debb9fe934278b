//! Native slash commands. The gateway's command registry is published as the application's
//! global commands (each takes its arguments as one optional `input` text), so typing `/` in
//! Discord offers them. An invocation is acknowledged at once as "thinking…" (Discord allows 3 s)
//! and becomes the same `/name input` text a typed command would be; the answer then replaces
//! the "thinking…" response, through the interaction's token, while that token is valid.

use crate::adapter::DiscordAdapter;
use hermes_adapter::{OutboundMessage, SendError, SendReceipt};
use serenity::all::{ApplicationId, CommandOptionType, CreateCommand, CreateCommandOption, EditInteractionResponse};
use serenity::builder::CreateAllowedMentions;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The option every published command takes.
pub(crate) const INPUT_OPTION: &str = "input";
/// Discord's limit on an application's global commands.
const MAX_COMMANDS: usize = 100;
/// An interaction token works for 15 minutes; past this the answer goes as a plain message.
const TOKEN_LIFETIME: Duration = Duration::from_secs(14 * 60);
/// What an invocation's event carries as its message id, so the answer finds its interaction.
const REFERENCE_PREFIX: &str = "interaction:";

pub(crate) fn reference(interaction_id: u64) -> String {
    format!("{REFERENCE_PREFIX}{interaction_id}")
}

/// Acknowledged invocations whose answer has not replaced their "thinking…" yet.
#[derive(Debug, Default)]
pub(crate) struct PendingInteractions {
    by_id: HashMap<u64, (String, Instant)>,
}

impl PendingInteractions {
    pub(crate) fn insert(&mut self, interaction_id: u64, token: String) {
        self.by_id.retain(|_, (_, at)| at.elapsed() < TOKEN_LIFETIME);
        self.by_id.insert(interaction_id, (token, Instant::now()));
    }

    /// The token for the answer to `reply_to`, once: the answer's first part replaces the
    /// response, later parts are ordinary messages.
    fn take(&mut self, reply_to: &str) -> Option<String> {
        let id: u64 = reply_to.strip_prefix(REFERENCE_PREFIX)?.parse().ok()?;
        let (token, at) = self.by_id.remove(&id)?;
        (at.elapsed() < TOKEN_LIFETIME).then_some(token)
    }
}

/// The registry as Discord commands: names Discord accepts (1–32 of `a-z0-9_-`), descriptions cut
/// to 100 characters, at most 100 commands. Anything else is left out, and said at debug level.
pub(crate) fn definitions(commands: &[(String, String)]) -> Vec<CreateCommand> {
    let valid_name = |name: &str| {
        (1..=32).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    };
    commands
        .iter()
        .filter(|(name, _)| {
            let ok = valid_name(name);
            if !ok {
                tracing::debug!(command = %name, "not a valid Discord command name; left out of the slash menu");
            }
            ok
        })
        .take(MAX_COMMANDS)
        .map(|(name, description)| {
            let description: String = if description.trim().is_empty() { name.clone() } else { description.chars().take(100).collect() };
            CreateCommand::new(name.clone())
                .description(description)
                .add_option(CreateCommandOption::new(CommandOptionType::String, INPUT_OPTION, "What follows the command").required(false))
        })
        .collect()
}

/// Replace the application's global commands with the registry's (one bulk overwrite, the same
/// whatever was there before), in the background. A failure leaves typed commands working; it is
/// logged.
pub(crate) fn publish(adapter: &DiscordAdapter, application_id: u64) {
    let Some(id) = std::num::NonZeroU64::new(application_id) else { return };
    adapter.http.set_application_id(ApplicationId::from(id));
    let definitions = definitions(&adapter.settings.commands);
    if definitions.is_empty() {
        return;
    }
    let http = adapter.http.clone();
    tokio::spawn(async move {
        match http.create_global_commands(&definitions).await {
            Ok(published) => tracing::debug!(count = published.len(), "Discord slash commands published"),
            Err(e) => {
                tracing::warn!("could not publish the Discord slash commands ({}); typed commands still work", crate::errors::classify(e))
            }
        }
    });
}

/// The answer to a slash command, written into its "thinking…" response. `None` when `msg` is not
/// such an answer (or its token expired): then it is sent as a message.
pub(crate) async fn answer_in_place(adapter: &DiscordAdapter, msg: &OutboundMessage) -> Option<Result<SendReceipt, SendError>> {
    if msg.file.is_some() {
        return None;
    }
    let token = adapter.pending_interactions.lock().ok()?.take(msg.reply_to.as_deref()?)?;
    let mut response = EditInteractionResponse::new().content(msg.text.clone()).allowed_mentions(CreateAllowedMentions::new());
    let components = crate::adapter::action_rows(&msg.buttons);
    if !components.is_empty() {
        response = response.components(components);
    }
    let edited = adapter.http.edit_original_interaction_response(&token, &response, Vec::new()).await;
    Some(edited.map(|m| SendReceipt { message_id: Some(m.id.get().to_string()) }).map_err(crate::errors::classify))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_discord_accepts_are_published_with_short_descriptions() {
        let long = "x".repeat(150);
        let commands = vec![
            ("status".to_string(), "Show the session".to_string()),
            ("reload-skills".to_string(), long),
            ("Bad Name".to_string(), "x".to_string()),
            ("a".repeat(33), "x".to_string()),
        ];
        let published = serde_json::to_value(definitions(&commands)).unwrap();
        let names: Vec<&str> = published.as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, vec!["status", "reload-skills"]);
        assert_eq!(published[1]["description"].as_str().unwrap().chars().count(), 100);
        assert_eq!(published[0]["options"][0]["name"], INPUT_OPTION);
        assert_eq!(published[0]["options"][0]["required"], false);
    }

    #[test]
    fn an_interaction_answers_in_place_once() {
        let mut pending = PendingInteractions::default();
        pending.insert(7, "token-7".into());
        assert_eq!(pending.take("42"), None, "a message id is not an interaction");
        assert_eq!(pending.take(&reference(7)), Some("token-7".into()));
        assert_eq!(pending.take(&reference(7)), None, "the rest of a long answer goes as messages");
    }
}
