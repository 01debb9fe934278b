//! What a turn writes and reads, each in one round trip to the store: opening the turn (inbox
//! row processing, the route, the user's message), reading its context (history, frozen prompt,
//! last prompt size), and recording what it produced (messages with the usage of the calls that
//! produced them). A plain chat turn used eleven round trips before these were folded together.

use super::{CallUsage, MessageRow, NewMessage, RouteEntry};
use crate::store::StoreError;
use async_trait::async_trait;
use hermes_adapter::SessionSource;

/// A turn about to start for an inbound event.
#[derive(Debug, Clone)]
pub struct TurnOpening {
    pub event_id: String,
    pub session_key: String,
    /// Where the event came from; the route's origin becomes this (replies go where the user
    /// last wrote from).
    pub source: SessionSource,
    /// The model a new session starts with.
    pub default_model: String,
    /// The user's message; `session_id` is filled in here. Stored once per event, so a replayed
    /// event does not store it again.
    pub user_message: NewMessage,
    /// An earlier conversation a client supplied, stored first when the session is empty.
    pub seed: Vec<NewMessage>,
}

/// What the caller already holds of a session's history from an earlier turn, so that opening
/// the next turn reads only what came after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownHistory {
    pub session_id: String,
    /// The id of the last message held.
    pub last_id: i64,
    /// How many active messages the session had up to and including `last_id`.
    pub active_count: i64,
}

/// The history as the opening of a turn found it.
#[derive(Debug, Clone)]
pub enum HistoryUpdate {
    /// What the caller holds is still the session's history: these active messages follow it
    /// (oldest first, ending with the user's message); `active_count` covers them too.
    After { messages: Vec<MessageRow>, active_count: i64 },
    /// What the caller holds no longer matches (another session, or messages were undone, or
    /// nothing was held): read the history with [`Turns::turn_context`].
    Stale,
}

/// What opening a turn found.
#[derive(Debug, Clone)]
pub struct OpenedTurn {
    pub route: RouteEntry,
    pub history: HistoryUpdate,
    /// The session's frozen system prompt, once its first turn stored it.
    pub system_prompt: Option<String>,
    /// The prompt size of the session's last model call.
    pub last_prompt_tokens: u64,
}

/// A turn's whole history, read when the caller held none that was still valid.
#[derive(Debug, Clone)]
pub struct TurnContext {
    /// The most recent active messages, oldest first, ending with the user's message.
    pub history: Vec<MessageRow>,
    /// The id of the session's last message and how many active messages it has.
    pub known: Option<KnownHistory>,
}

#[async_trait]
pub trait Turns: Send + Sync {
    /// Open a turn in one write: the inbox row becomes `processing` (one more attempt), the
    /// session key's route is found or a session started, the user's message is stored unless
    /// this event's message already is (with the seed first when the session is empty), and
    /// what follows the caller's `known` history is read.
    async fn turn_open(&self, opening: TurnOpening, known: Option<KnownHistory>) -> Result<OpenedTurn, StoreError>;

    /// Read a turn's history: the last `history_limit` active messages.
    async fn turn_context(&self, session_id: &str, history_limit: usize) -> Result<TurnContext, StoreError>;

    /// Record what a turn produced in one write: `messages` in order, then the usage of the model
    /// calls since the last record; the last call's prompt size becomes the session's.
    async fn turn_record(&self, session_id: &str, messages: Vec<NewMessage>, calls: Vec<CallUsage>) -> Result<(), StoreError>;
}
