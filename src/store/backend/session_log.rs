//! A session's log: its messages, search over them, and the state the agent core keeps between
//! turns (the frozen system prompt, the last prompt size, the title, soft-deleted turns, and
//! rotating to a compressed child session whose lineage points at its parent).

use super::RouteEntry;
use crate::store::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// A message to append. `session_id`, `role` and `content` are required; the rest is optional.
#[derive(Debug, Clone, Default)]
pub struct NewMessage {
    pub session_id: String,
    pub role: String,
    pub content: String,
    pub tool_call_id: Option<String>,
    /// The assistant's tool calls, as JSON.
    pub tool_calls: Option<String>,
    pub tool_name: Option<String>,
    /// The inbound event this message belongs to (so a replayed event is not stored twice).
    pub event_id: Option<String>,
    pub finish_reason: Option<String>,
    /// The pictures that went with the message, as a JSON list of image references
    /// ([`crate::agent::ImagePart`]s: the prepared file, its type and size, never its bytes).
    pub images: Option<String>,
}

#[derive(Debug, Clone)]
pub struct MessageRow {
    pub id: i64,
    pub session_id: String,
    pub role: String,
    pub content: String,
    pub tool_call_id: Option<String>,
    pub tool_calls: Option<String>,
    pub tool_name: Option<String>,
    pub event_id: Option<String>,
    pub finish_reason: Option<String>,
    /// As [`NewMessage::images`].
    pub images: Option<String>,
    pub timestamp: DateTime<Utc>,
}

/// A user's or the agent's words with the conversation they belong to, in the order they were
/// stored across all conversations (`hermes mcp serve`'s events).
#[derive(Debug, Clone)]
pub struct LoggedMessage {
    pub session_key: String,
    pub message: MessageRow,
}

/// Whose messages a search may see. Searches are always scoped: one user's search never
/// returns another user's conversation.
#[derive(Debug, Clone)]
pub enum SearchScope {
    /// One session only.
    Session(String),
    /// Every session of this user on this platform.
    User { platform: String, user_id: String },
    /// Every session with this session key (a shared group chat, for example).
    SessionKey(String),
    /// Every session of this user in this chat (`user_id` `None`: sessions without a user).
    Origin { platform: String, chat_id: String, user_id: Option<String> },
}

impl SearchScope {
    /// The condition on `m.session_id` that keeps a search within this scope, with its values for
    /// the parameters numbered from 3 on; `marker` is the backend's parameter sign (`?` in SQLite,
    /// `$` in PostgreSQL). Shared so every backend scopes a search alike: a user scope never sees
    /// another user's sessions, nor user-less ones.
    pub(crate) fn condition(&self, marker: char) -> (String, Vec<&str>) {
        let (sql, values) = match self {
            SearchScope::Session(id) => ("m.session_id = #3", vec![id.as_str()]),
            SearchScope::User { platform, user_id } => (
                "m.session_id IN (SELECT id FROM sessions WHERE platform = #3 AND user_id = #4)",
                vec![platform.as_str(), user_id.as_str()],
            ),
            SearchScope::SessionKey(key) => ("m.session_id IN (SELECT id FROM sessions WHERE session_key = #3)", vec![key.as_str()]),
            SearchScope::Origin { platform, chat_id, user_id: Some(user) } => (
                "m.session_id IN (SELECT id FROM sessions WHERE platform = #3 AND chat_id = #4 AND user_id = #5)",
                vec![platform.as_str(), chat_id.as_str(), user.as_str()],
            ),
            SearchScope::Origin { platform, chat_id, user_id: None } => (
                "m.session_id IN (SELECT id FROM sessions WHERE platform = #3 AND chat_id = #4 AND user_id IS NULL)",
                vec![platform.as_str(), chat_id.as_str()],
            ),
        };
        (sql.replace('#', &marker.to_string()), values)
    }
}

#[derive(Debug, Clone)]
pub struct SearchHit {
    pub message_id: i64,
    pub session_id: String,
    pub role: String,
    /// The matching passage with the match marked `[...]`.
    pub snippet: String,
    pub timestamp: DateTime<Utc>,
}

/// What `/undo` removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    pub turns: usize,
    pub messages: usize,
    /// The first user message removed (to copy and edit).
    pub first_user_text: String,
}

#[async_trait]
pub trait SessionLog: Send + Sync {
    /// Append a message (the session's message count follows); returns its id. Ids grow in
    /// append order. Fails when the session does not exist.
    async fn message_append(&self, message: NewMessage) -> Result<i64, StoreError>;

    /// The session's active messages in order; with a limit, the most recent `limit` of them.
    async fn messages(&self, session_id: &str, limit: Option<usize>) -> Result<Vec<MessageRow>, StoreError>;

    /// The active message with `role` stored for an inbound event, if any.
    /// The words of users and of the agent (no tool messages, nothing empty or undone) stored
    /// after message `after_id` in any session, oldest first, at most `limit`.
    async fn messages_after(&self, after_id: i64, limit: usize) -> Result<Vec<LoggedMessage>, StoreError>;

    /// The id of the newest message stored (0 when there is none): where a reader starts to
    /// see only what comes next.
    async fn latest_message_id(&self) -> Result<i64, StoreError>;

    async fn message_for_event(&self, session_id: &str, event_id: &str, role: &str) -> Result<Option<MessageRow>, StoreError>;

    /// Search the text of active user and assistant messages within `scope`, best matches first.
    /// Whole words first; when they find nothing, a substring of three characters or more
    /// (text inside words, CJK runs). The query is text, never query syntax.
    async fn search_messages(&self, query: &str, scope: SearchScope, limit: usize) -> Result<Vec<SearchHit>, StoreError>;

    /// The session's frozen system prompt, stored on first use so every later turn of the
    /// session sends the same prefix. Returns the stored one when it already exists.
    async fn session_prompt_freeze(&self, session_id: &str, prompt: &str) -> Result<String, StoreError>;

    async fn session_prompt(&self, session_id: &str) -> Result<Option<String>, StoreError>;

    /// The prompt size of the session's last model call and how many times it was compressed
    /// into this session; `(0, 0)` for an unknown session.
    async fn session_prompt_tokens(&self, session_id: &str) -> Result<(u64, u64), StoreError>;

    /// Set the session's title; `Ok(false)` when another session already has it.
    async fn session_set_title(&self, session_id: &str, title: &str) -> Result<bool, StoreError>;

    /// Soft-delete the last `turns` user turns (each user message and everything after it);
    /// they are no longer read or found. `None` when there was no user turn.
    async fn messages_undo(&self, session_id: &str, turns: usize) -> Result<Option<Undone>, StoreError>;

    /// Rotate `session_key` to a new session that starts with `carried` (a summary plus the
    /// protected messages) and links to the old one as its parent. The old session ends with
    /// `compressed`; its messages stay searchable. Returns the new route; `None` when the key's
    /// session is no longer `expected_session` (another compression or `/new` got there first).
    async fn session_compress_into(
        &self,
        session_key: &str,
        expected_session: &str,
        model: &str,
        system_prompt: &str,
        carried: Vec<NewMessage>,
    ) -> Result<Option<RouteEntry>, StoreError>;
}
