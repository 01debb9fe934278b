//! Where a message came from: the platform, the chat and the sender, normalized.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A platform's stable lower-case name (`telegram`, `api_server`, `webhook`, …). A string, not an
/// enum, so that adding an adapter needs no change here.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Platform(String);

impl Platform {
    /// The platform called `name`, lower-cased so `Telegram` and `telegram` are one platform.
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into().to_ascii_lowercase())
    }
    /// The lower-case name, as used in config keys, session keys and `platform:chat_id` targets.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Platform {
    fn from(s: &str) -> Self {
        Platform::new(s)
    }
}

/// The kind of conversation a message belongs to; it decides how session keys are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatType {
    /// A one-to-one conversation with the bot.
    Dm,
    /// A chat with several people; by default each member has their own session in it.
    Group,
    /// A broadcast channel.
    Channel,
    /// A thread inside a group or channel (`thread_id` says which).
    Thread,
    /// A topic of a forum-style group (`thread_id` says which).
    Forum,
    /// Not a chat: an HTTP delivery (webhook route, API request) whose answer goes to a program.
    Webhook,
}

impl ChatType {
    /// The lower-case name used in session keys and stored origins.
    pub fn as_str(self) -> &'static str {
        match self {
            ChatType::Dm => "dm",
            ChatType::Group => "group",
            ChatType::Channel => "channel",
            ChatType::Thread => "thread",
            ChatType::Forum => "forum",
            ChatType::Webhook => "webhook",
        }
    }
}

impl fmt::Display for ChatType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a message came from. Stored as a session's origin and a cron job's origin, so every
/// field is plain data.
///
/// # Who sent it: ids, handles and display names
///
/// Allowlists decide who may use the bot, so the sender is described by three fields that mean
/// different things, and every adapter (present and to come) fills them by the same rule:
///
/// - [`user_id`](Self::user_id): the id the platform assigns and the user cannot choose or change —
///   Telegram's numeric user id, Discord's snowflake, Slack's `U…` id, a Matrix mxid, an email
///   address only once the message was authenticated (DKIM/SPF per `Authentication-Results`).
///   Allowlist entries match it exactly.
/// - [`user_handle`](Self::user_handle): a handle the platform guarantees belongs to one account at
///   a time, read from the platform's field for exactly that (Telegram's `username`). Allowlist
///   entries match it case-insensitively, `@` optional. Adapters whose platform has no such
///   guarantee leave it `None` (Discord: allowlists name ids only).
/// - [`user_display_name`](Self::user_display_name): how to show the sender (first and last name,
///   a global name, a nickname). Anyone can set it to anything, including someone else's id or
///   handle, so it is for display and prompts only and never authorizes anything.
///
/// Chat, guild and channel names are display data too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSource {
    /// The platform the message arrived on.
    pub platform: Platform,
    /// The platform's id of the chat; answers go back to it.
    pub chat_id: String,
    /// What kind of chat it is; it shapes the session key and the prompt.
    pub chat_type: ChatType,
    /// The chat's title, or the other person's name in a DM: display only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_name: Option<String>,
    /// The platform-assigned sender id; see the type's documentation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// A unique handle the adapter read from the platform's own handle field (Telegram
    /// `username`, without `@`); see the type's documentation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_handle: Option<String>,
    /// A name the sender chose: display and prompts only. (Stored origins from before this field
    /// was split call it `user_name`; whatever it held is read as a display name.)
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "user_name")]
    pub user_display_name: Option<String>,
    /// A second platform-assigned id, preferred over `user_id` in session keys (Signal's UUID
    /// next to the phone number). Allowlists do not match it: an adapter puts the id operators
    /// list in `user_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id_alt: Option<String>,
    /// The thread or topic inside the chat, where the platform has them; it is part of the
    /// session key and of the reply's [`crate::ChatTarget`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Guild or workspace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    /// The sender is a bot account; the gateway never answers bots (two bots could loop).
    #[serde(default)]
    pub is_bot: bool,
}

impl SessionSource {
    /// A source with the chat filled in and every sender field empty.
    pub fn new(platform: Platform, chat_id: impl Into<String>, chat_type: ChatType) -> Self {
        Self {
            platform,
            chat_id: chat_id.into(),
            chat_type,
            chat_name: None,
            user_id: None,
            user_handle: None,
            user_display_name: None,
            user_id_alt: None,
            thread_id: None,
            scope_id: None,
            is_bot: false,
        }
    }

    /// The sender, by the id the platform (or an authenticating adapter) assigned.
    pub fn with_user(mut self, user_id: impl Into<String>) -> Self {
        self.user_id = Some(user_id.into());
        self
    }

    /// The sender's chosen name, for display and prompts.
    pub fn with_display_name(mut self, name: impl Into<String>) -> Self {
        self.user_display_name = Some(name.into());
        self
    }

    /// The sender identity used for session keys (`user_id_alt` first).
    pub fn participant(&self) -> Option<&str> {
        self.user_id_alt.as_deref().or(self.user_id.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_stored_with_the_old_user_name_reads_it_as_a_display_name_never_a_handle() {
        let stored = r#"{"platform":"telegram","chat_id":"5","chat_type":"dm","user_id":"5","user_name":"alice"}"#;
        let source: SessionSource = serde_json::from_str(stored).expect("an old origin still loads");
        assert_eq!(source.user_display_name.as_deref(), Some("alice"));
        assert_eq!(source.user_handle, None);
        let again: SessionSource = serde_json::from_str(&serde_json::to_string(&source).expect("serializes")).expect("round trip");
        assert_eq!(again, source);
    }
}
