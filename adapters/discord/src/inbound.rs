//! Discord messages, slash commands and button presses turned into the gateway's [`InboundEvent`]s: who and where
//! (DM, guild channel, thread), mention gating, the bot's own mention stripped from the text.
//! Pure functions; finding out whether a channel is a thread is [`crate::gateway`]'s job.
//!
//! The sender is its user id (a snowflake) and nothing else: usernames, global names and server
//! nicknames become the display name only (anyone can call themselves anything), and Discord
//! gets no verified handle (see [`SessionSource`]). Attachments are declared here (kind, size,
//! duration, MIME type, name: see [`crate::media`]), never downloaded.

use crate::commands::INPUT_OPTION;
use chrono::Utc;
use hermes_adapter::{ChatType, InboundEvent, MessageKind, Platform, SessionSource, untrusted};
use serenity::model::application::{CommandDataOptionValue, CommandInteraction, ComponentInteraction};
use serenity::model::channel::Message;
use serenity::model::user::User;
use std::collections::HashSet;

/// Who the bot is, from READY.
#[derive(Debug, Clone, Copy)]
pub struct Identity {
    pub bot_id: u64,
}

/// Which guild messages are for the bot.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    pub require_mention: bool,
    pub thread_require_mention: bool,
    pub free_response_channels: HashSet<u64>,
}

/// Where a message was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Dm,
    Channel,
    Thread { parent: u64 },
}

#[derive(Debug)]
pub enum Inbound {
    Message(Box<InboundEvent>),
    /// A button press; the interaction is acknowledged once the event is accepted.
    Button {
        event: Box<InboundEvent>,
        interaction_id: u64,
        token: String,
    },
    /// A slash command; acknowledged as "thinking…" before the event is accepted, and answered in
    /// that response.
    Command {
        event: Box<InboundEvent>,
        interaction_id: u64,
        token: String,
    },
    /// Not for the bot, or nothing it can act on; the reason is logged at debug level.
    Ignore(&'static str),
}

pub fn message_event_id(message_id: u64) -> String {
    format!("discord:{message_id}")
}

/// The inbox's id for a button press or a slash command.
pub fn interaction_event_id(interaction_id: u64) -> String {
    format!("discord:interaction:{interaction_id}")
}

pub fn from_message(message: &Message, place: Place, me: &Identity, gate: &Gate) -> Inbound {
    if message.author.id.get() == me.bot_id {
        return Inbound::Ignore("the bot's own message");
    }
    if message.author.bot || message.webhook_id.is_some() {
        return Inbound::Ignore("a message from a bot or webhook");
    }
    let text = with_outside_context(message, strip_mention(&message.content, me.bot_id));
    // Declared only: the gateway loop downloads them once it knows the sender is allowed.
    let attachments = crate::media::declared(message);
    if text.trim().is_empty() && attachments.is_empty() {
        return Inbound::Ignore("a message with no text (an embed, a sticker, a system message)");
    }
    let channel = message.channel_id.get();
    let needs_mention = match place {
        Place::Dm => false,
        Place::Channel => gate.require_mention && !gate.free_response_channels.contains(&channel),
        Place::Thread { parent } => {
            gate.require_mention
                && gate.thread_require_mention
                && !gate.free_response_channels.contains(&channel)
                && !gate.free_response_channels.contains(&parent)
        }
    };
    if needs_mention && !addresses_bot(message, me) {
        return Inbound::Ignore("a guild message that does not mention the bot");
    }
    let nick = message.member.as_ref().and_then(|m| m.nick.as_deref());
    let mut event = InboundEvent::text(
        message_event_id(message.id.get()),
        source(place, channel, &message.author, nick, message.guild_id.map(|g| g.get())),
        text,
    );
    event.message_id = Some(message.id.get().to_string());
    event.received_at = Utc::now();
    event.kind = crate::media::message_kind(&attachments);
    event.attachments = attachments;
    Inbound::Message(Box::new(event))
}

/// The user's text with what came from someone else marked as untrusted: a forwarded message
/// (its snapshot) is entirely someone else's; a reply carries the referenced message's words
/// before the user's. Commands stay as typed.
fn with_outside_context(message: &Message, own: String) -> String {
    if own.starts_with('/') {
        return untrusted::unmarked(&own);
    }
    if let Some(snapshot) = message.message_snapshots.first().filter(|s| !s.content.trim().is_empty()) {
        let forwarded = untrusted::forwarded(None, &snapshot.content);
        return if own.trim().is_empty() { forwarded } else { format!("{forwarded}\n\n{}", untrusted::unmarked(&own)) };
    }
    match message.referenced_message.as_deref().filter(|r| !r.content.trim().is_empty()) {
        Some(replied) => untrusted::with_reply_context(Some(replied.author.display_name()), &replied.content, &own),
        None => untrusted::unmarked(&own),
    }
}

pub fn from_component(interaction: &ComponentInteraction, place: Place, me: &Identity) -> Inbound {
    let data = interaction.data.custom_id.trim();
    if data.is_empty() {
        return Inbound::Ignore("a button press without data");
    }
    if interaction.message.author.id.get() != me.bot_id {
        return Inbound::Ignore("a button under another bot's message");
    }
    let channel = interaction.channel_id.get();
    let nick = interaction.member.as_ref().and_then(|m| m.nick.as_deref());
    let source = source(place, channel, &interaction.user, nick, interaction.guild_id.map(|g| g.get()));
    let mut event = InboundEvent::text(interaction_event_id(interaction.id.get()), source, data);
    event.kind = MessageKind::ButtonPress;
    event.received_at = Utc::now();
    Inbound::Button { event: Box::new(event), interaction_id: interaction.id.get(), token: interaction.token.clone() }
}

/// A slash command becomes the text a typed command would be (`/model gpt-5`). It is addressed
/// to the bot by nature: no mention needed anywhere.
pub fn from_command(interaction: &CommandInteraction, place: Place) -> Inbound {
    let name = interaction.data.name.trim();
    if name.is_empty() {
        return Inbound::Ignore("a slash command without a name");
    }
    let input = interaction.data.options.iter().find_map(|o| match (&o.value, o.name.as_str()) {
        (CommandDataOptionValue::String(v), INPUT_OPTION) => Some(v.trim().to_string()),
        _ => None,
    });
    let text = match input.filter(|i| !i.is_empty()) {
        Some(input) => format!("/{name} {input}"),
        None => format!("/{name}"),
    };
    let channel = interaction.channel_id.get();
    let nick = interaction.member.as_ref().and_then(|m| m.nick.as_deref());
    let source = source(place, channel, &interaction.user, nick, interaction.guild_id.map(|g| g.get()));
    let mut event = InboundEvent::text(interaction_event_id(interaction.id.get()), source, text);
    event.message_id = Some(crate::commands::reference(interaction.id.get()));
    event.received_at = Utc::now();
    Inbound::Command { event: Box::new(event), interaction_id: interaction.id.get(), token: interaction.token.clone() }
}

/// Where and who: the author's id identifies; the server nickname, global name or username only
/// names them for display.
fn source(place: Place, channel: u64, author: &User, nick: Option<&str>, guild: Option<u64>) -> SessionSource {
    let (chat_id, chat_type, thread_id) = match place {
        Place::Dm => (channel, ChatType::Dm, None),
        Place::Channel => (channel, ChatType::Group, None),
        Place::Thread { parent } => (parent, ChatType::Thread, Some(channel.to_string())),
    };
    let mut source = SessionSource::new(Platform::new("discord"), chat_id.to_string(), chat_type);
    source.thread_id = thread_id;
    source.user_id = Some(author.id.get().to_string());
    source.user_display_name = [nick, author.global_name.as_deref(), Some(author.name.as_str())]
        .into_iter()
        .flatten()
        .find(|name| !name.trim().is_empty())
        .map(str::to_string);
    source.scope_id = guild.map(|g| g.to_string());
    source
}

/// Mentioned by id, or a reply to one of the bot's messages.
fn addresses_bot(message: &Message, me: &Identity) -> bool {
    message.mentions.iter().any(|u| u.id.get() == me.bot_id)
        || message.content.contains(&format!("<@{}>", me.bot_id))
        || message.content.contains(&format!("<@!{}>", me.bot_id))
        || message.referenced_message.as_ref().is_some_and(|m| m.author.id.get() == me.bot_id)
}

/// The text without the bot's own mention, which only says "this is for you".
pub fn strip_mention(text: &str, bot_id: u64) -> String {
    text.replace(&format!("<@{bot_id}>"), "").replace(&format!("<@!{bot_id}>"), "").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bots_mention_is_stripped_in_both_forms_and_others_are_kept() {
        assert_eq!(strip_mention("<@42> hello <@7>", 42), "hello <@7>");
        assert_eq!(strip_mention("hi <@!42>", 42), "hi");
        assert_eq!(strip_mention("<@420> hi", 42), "<@420> hi");
    }
}
