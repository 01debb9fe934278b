//! Where a message came from: the platform, the chat and the sender, normalized.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A platform's stable lower-case name (`telegram`, `api_server`, `webhook`, …). A string, not an
/// enum, so that adding an adapter needs no change here.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Platform(String);

impl Platform {
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into().to_ascii_lowercase())
    }
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
    Dm,
    Group,
    Channel,
    Thread,
    Forum,
    Webhook,
}

impl ChatType {
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSource {
    pub platform: Platform,
    pub chat_id: String,
    pub chat_type: ChatType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_name: Option<String>,
    /// A stable alternative sender id, preferred over `user_id` in session keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id_alt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Guild or workspace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    #[serde(default)]
    pub is_bot: bool,
}

impl SessionSource {
    pub fn new(platform: Platform, chat_id: impl Into<String>, chat_type: ChatType) -> Self {
        Self {
            platform,
            chat_id: chat_id.into(),
            chat_type,
            chat_name: None,
            user_id: None,
            user_name: None,
            user_id_alt: None,
            thread_id: None,
            scope_id: None,
            is_bot: false,
        }
    }

    pub fn with_user(mut self, user_id: impl Into<String>, user_name: Option<String>) -> Self {
        self.user_id = Some(user_id.into());
        self.user_name = user_name;
        self
    }

    /// The sender identity used for session keys and authorization (`user_id_alt` first).
    pub fn participant(&self) -> Option<&str> {
        self.user_id_alt.as_deref().or(self.user_id.as_deref())
    }
}
