//! Sessions and routing: which session a session key currently talks to, where it came from
//! (the origin every later delivery and cron job needs), and its per-session overrides.

use crate::store::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use hermes_adapter::SessionSource;

#[derive(Debug, Clone)]
pub struct RouteEntry {
    pub session_key: String,
    pub session_id: String,
    pub origin: SessionSource,
    /// Per-session settings (e.g. `model_override`), a JSON object.
    pub overrides: serde_json::Value,
    pub updated_at: DateTime<Utc>,
    /// True when this call started the session.
    pub created: bool,
}

#[derive(Debug, Clone)]
pub struct SessionRow {
    pub id: String,
    pub session_key: String,
    pub source: SessionSource,
    pub user_id: Option<String>,
    pub chat_id: String,
    pub model: Option<String>,
    pub title: Option<String>,
    pub parent_session_id: Option<String>,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub end_reason: Option<String>,
    pub message_count: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
}

/// A conversation the gateway knows: a route and what its current session holds, for listing
/// (`hermes mcp serve`'s `conversations_list`).
#[derive(Debug, Clone)]
pub struct Conversation {
    pub session_key: String,
    pub session_id: String,
    /// Where the user last wrote from.
    pub origin: SessionSource,
    pub title: Option<String>,
    pub message_count: i64,
    /// The last time the route changed (a message started or moved it).
    pub updated_at: DateTime<Utc>,
}

/// What every backend stores the same way: a new session's id and a route's origin as JSON.
impl RouteEntry {
    /// Session ids sort by start time (`YYYYMMDD_HHMMSS_` prefix, as in Hermes) and are unguessable.
    pub(crate) fn new_session_id() -> String {
        let suffix: String = (0..12).map(|_| char::from(b"0123456789abcdef"[rand::random_range(0..16)])).collect();
        format!("{}_{suffix}", Utc::now().format("%Y%m%d_%H%M%S"))
    }

    /// An origin as stored.
    pub(crate) fn encode_origin(source: &SessionSource) -> Result<String, StoreError> {
        serde_json::to_string(source).map_err(|e| StoreError::Corrupt(format!("cannot encode a session origin: {e}")))
    }

    /// A stored origin back.
    pub(crate) fn decode_origin(raw: &str) -> Result<SessionSource, StoreError> {
        serde_json::from_str(raw).map_err(|e| StoreError::Corrupt(format!("unreadable session origin: {e}")))
    }
}

#[async_trait]
pub trait Routes: Send + Sync {
    async fn route_get(&self, session_key: &str) -> Result<Option<RouteEntry>, StoreError>;

    /// The key's current session, started (with `source` as its origin and `model` as its
    /// model) when there is none. The latest origin wins, so a reply goes where the user last
    /// wrote from.
    async fn route_get_or_create(&self, session_key: &str, source: &SessionSource, model: &str) -> Result<RouteEntry, StoreError>;

    /// End the key's current session with `reason` and start a new one on the same route; the
    /// route's overrides are kept (callers that want them cleared say so).
    async fn session_reset(&self, session_key: &str, source: &SessionSource, model: &str, reason: &str) -> Result<RouteEntry, StoreError>;

    /// End the key's current session and forget the route; `false` when there was none.
    async fn session_close(&self, session_key: &str, reason: &str) -> Result<bool, StoreError>;

    /// Replace the route's overrides; `false` when the key has no route.
    async fn route_set_overrides(&self, session_key: &str, overrides: &serde_json::Value) -> Result<bool, StoreError>;

    /// Whether `user_id` has ever talked to the bot in `chat_id` on `platform` (a session of
    /// theirs started there).
    async fn user_talked_in(&self, platform: &str, chat_id: &str, user_id: &str) -> Result<bool, StoreError>;

    async fn session_get(&self, session_id: &str) -> Result<Option<SessionRow>, StoreError>;

    /// The conversations with a route, most recently active first, at most `limit`.
    async fn conversations(&self, limit: usize) -> Result<Vec<Conversation>, StoreError>;
}
