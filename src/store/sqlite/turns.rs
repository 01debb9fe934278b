//! A turn's round trips in SQLite: each is one write (or one read) on the store's connection,
//! so a turn costs three hops to the writer or a reader thread instead of eleven.

use super::inbox::mark_processing;
use super::messages::{insert_message, read_message_for_event, read_messages, read_messages_after};
use super::routes::current_route;
use super::usage::add_usage;
use super::{CachedStatements, SqliteStore};
use crate::store::{CallUsage, HistoryUpdate, KnownHistory, NewMessage, OpenedTurn, StoreError, TurnContext, TurnOpening, Turns};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

#[async_trait]
impl Turns for SqliteStore {
    async fn turn_open(&self, opening: TurnOpening, known: Option<KnownHistory>) -> Result<OpenedTurn, StoreError> {
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

    async fn turn_context(&self, session_id: &str, history_limit: usize) -> Result<TurnContext, StoreError> {
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

    async fn turn_record(&self, session_id: &str, messages: Vec<NewMessage>, calls: Vec<CallUsage>) -> Result<(), StoreError> {
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
