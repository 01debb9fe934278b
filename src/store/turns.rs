//! What a turn writes and reads, each in one round trip to the store: opening the turn (inbox
//! row processing, the route, the user's message), reading its context (history, frozen prompt,
//! last prompt size), and recording what it produced (messages with the usage of the calls that
//! produced them). Every round trip is a hop to the writer or a reader thread and, for writes, a
//! commit: a plain chat turn used eleven of them before these were folded together.

use super::inbox::mark_processing;
use super::messages::{insert_message, read_message_for_event, read_messages, read_messages_after};
use super::routes::current_route;
use super::usage::{CallUsage, add_usage};
use super::{CachedStatements, MessageRow, NewMessage, RouteEntry, Store, StoreError};
use hermes_adapter::SessionSource;
use rusqlite::{Connection, OptionalExtension, params};

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
    /// nothing was held): read the history with [`Store::turn_context`].
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

impl Store {
    /// Open a turn in one write: the inbox row becomes `processing` (one more attempt), the
    /// session key's route is found or a session started, the user's message is stored unless
    /// this event's message already is, and what follows the caller's `known` history is read.
    pub async fn turn_open(&self, opening: TurnOpening, known: Option<KnownHistory>) -> Result<OpenedTurn, StoreError> {
        self.write(move |c| {
            mark_processing(c, &opening.event_id)?;
            let route = current_route(c, &opening.session_key, &opening.source, &opening.default_model)?;
            let session_id = route.session_id.clone();
            if read_message_for_event(c, &session_id, &opening.event_id, &opening.user_message.role)?.is_none() {
                let seeds_empty_session = !opening.seed.is_empty()
                    && c.one("SELECT 1 FROM messages WHERE session_id = ?1 AND active = 1 LIMIT 1", [&session_id], |_| Ok(()))
                        .optional()?
                        .is_none();
                if seeds_empty_session {
                    for m in opening.seed {
                        insert_message(c, &NewMessage { session_id: session_id.clone(), ..m })?;
                    }
                }
                insert_message(c, &NewMessage { session_id: session_id.clone(), ..opening.user_message })?;
            }
            let (system_prompt, last_prompt_tokens) =
                c.one("SELECT system_prompt, last_prompt_tokens FROM sessions WHERE id = ?1", [&session_id], |r| {
                    Ok((r.get::<_, Option<String>>(0)?, r.get::<_, i64>(1)?))
                })?;
            let history = match known.filter(|k| k.session_id == session_id) {
                Some(k) => history_after(c, &k)?,
                None => HistoryUpdate::Stale,
            };
            Ok(OpenedTurn { route, history, system_prompt, last_prompt_tokens: last_prompt_tokens.max(0) as u64 })
        })
        .await
    }

    /// Read a turn's history: the last `history_limit` active messages.
    pub async fn turn_context(&self, session_id: &str, history_limit: usize) -> Result<TurnContext, StoreError> {
        let id = session_id.to_string();
        self.read(move |c| {
            let history = read_messages(c, &id, history_limit as i64)?;
            let known = match history.last() {
                Some(last) => {
                    Some(KnownHistory { session_id: id.clone(), last_id: last.id, active_count: active_count_up_to(c, &id, last.id)? })
                }
                None => None,
            };
            Ok(TurnContext { history, known })
        })
        .await
    }

    /// Record what a turn produced in one write: `messages` in order, then the usage of the model
    /// calls since the last record; the last call's prompt size becomes the session's.
    pub async fn turn_record(&self, session_id: &str, messages: Vec<NewMessage>, calls: Vec<CallUsage>) -> Result<(), StoreError> {
        if messages.is_empty() && calls.is_empty() {
            return Ok(());
        }
        let session_id = session_id.to_string();
        self.write(move |c| {
            for m in &messages {
                insert_message(c, m)?;
            }
            for call in &calls {
                add_usage(c, &session_id, call)?;
            }
            if let Some(last) = calls.last() {
                c.run("UPDATE sessions SET last_prompt_tokens = ?2 WHERE id = ?1", params![session_id, last.usage.prompt_tokens as i64])?;
            }
            Ok(())
        })
        .await
    }
}

/// The active messages after `known`, when every message `known` covers is still there and
/// active (an `/undo` or `/retry` deactivates some, which makes the count differ).
fn history_after(c: &Connection, known: &KnownHistory) -> Result<HistoryUpdate, StoreError> {
    if active_count_up_to(c, &known.session_id, known.last_id)? != known.active_count {
        return Ok(HistoryUpdate::Stale);
    }
    let messages = read_messages_after(c, &known.session_id, known.last_id)?;
    Ok(HistoryUpdate::After { active_count: known.active_count + messages.len() as i64, messages })
}

fn active_count_up_to(c: &Connection, session_id: &str, last_id: i64) -> Result<i64, StoreError> {
    Ok(c.one("SELECT count(*) FROM messages WHERE session_id = ?1 AND active = 1 AND id <= ?2", params![session_id, last_id], |r| {
        r.get(0)
    })?)
}
