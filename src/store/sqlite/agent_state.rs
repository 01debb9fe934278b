//! Session state the agent core keeps between turns, in SQLite: the frozen system-prompt
//! snapshot, the prompt size of the last turn, titles, soft-deleting turns (`active = 0`) and
//! rotating to a compressed child session whose lineage points at its parent.

use super::messages::insert_message;
use super::routes::{end_session, read_route, start_session};
use super::{CachedStatements, SqliteStore};
use crate::store::{NewMessage, RouteEntry, StoreError, Undone};
use rusqlite::{OptionalExtension, params};

/// The agent-state half of [`crate::store::SessionLog`] (the trait impl, in `messages`, calls
/// these): one trait impl cannot span two files.
impl SqliteStore {
    /// The session's frozen system prompt, stored on first use so every later turn of the
    /// session sends the same prefix. Returns the stored one when it already exists.
    pub(super) async fn freeze_prompt(&self, session_id: &str, prompt: &str) -> Result<String, StoreError> {
        let (id, prompt) = (session_id.to_string(), prompt.to_string());
        self.write(move |c| {
            c.run("UPDATE sessions SET system_prompt = ?2 WHERE id = ?1 AND system_prompt IS NULL", params![id, prompt])?;
            let stored: Option<String> =
                c.one("SELECT system_prompt FROM sessions WHERE id = ?1", [&id], |r| r.get(0)).optional()?.flatten();
            Ok(stored.unwrap_or(prompt))
        })
        .await
    }

    pub(super) async fn read_prompt(&self, session_id: &str) -> Result<Option<String>, StoreError> {
        let id = session_id.to_string();
        self.read(move |c| Ok(c.one("SELECT system_prompt FROM sessions WHERE id = ?1", [&id], |r| r.get(0)).optional()?.flatten())).await
    }

    pub(super) async fn read_prompt_tokens(&self, session_id: &str) -> Result<(u64, u64), StoreError> {
        let id = session_id.to_string();
        self.read(move |c| {
            Ok(c.one("SELECT last_prompt_tokens, compression_count FROM sessions WHERE id = ?1", [&id], |r| {
                Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
            })
            .optional()?
            .unwrap_or((0, 0)))
        })
        .await
    }

    /// Set the session's title; `Ok(false)` when another session already has it.
    pub(super) async fn set_title(&self, session_id: &str, title: &str) -> Result<bool, StoreError> {
        let (id, title) = (session_id.to_string(), title.to_string());
        self.write(move |c| {
            let taken: Option<String> =
                c.one("SELECT id FROM sessions WHERE title = ?1 AND id != ?2", params![title, id], |r| r.get(0)).optional()?;
            if taken.is_some() {
                return Ok(false);
            }
            c.run("UPDATE sessions SET title = ?2 WHERE id = ?1", params![id, title])?;
            Ok(true)
        })
        .await
    }

    /// Soft-delete the last `turns` user turns (each user message and everything after it).
    pub(super) async fn undo_turns(&self, session_id: &str, turns: usize) -> Result<Option<Undone>, StoreError> {
        let id = session_id.to_string();
        self.write(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT id, content FROM messages WHERE session_id = ?1 AND active = 1 AND role = 'user' ORDER BY id DESC LIMIT ?2",
            )?;
            let users: Vec<(i64, String)> =
                stmt.query_map(params![id, turns as i64], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
            let Some((from, text)) = users.last().cloned() else { return Ok(None) };
            let removed = c.run("UPDATE messages SET active = 0 WHERE session_id = ?1 AND active = 1 AND id >= ?2", params![id, from])?;
            c.run("UPDATE sessions SET last_prompt_tokens = 0 WHERE id = ?1", [&id])?;
            Ok(Some(Undone { turns: users.len(), messages: removed, first_user_text: text }))
        })
        .await
    }

    /// Rotate `session_key` to a new session that starts with `carried` (a summary plus the
    /// protected messages) and links to the old one as its parent. The old session ends with
    /// `compressed`; its messages stay searchable. Returns the new route.
    pub(super) async fn compress_into(
        &self,
        session_key: &str,
        expected_session: &str,
        model: &str,
        system_prompt: &str,
        carried: Vec<NewMessage>,
    ) -> Result<Option<RouteEntry>, StoreError> {
        let (key, expected, model, prompt) =
            (session_key.to_string(), expected_session.to_string(), model.to_string(), system_prompt.to_string());
        self.write(move |c| {
            let Some(route) = read_route(c, &key)? else { return Ok(None) };
            // Another compression (or /new) got there first: do not fork the lineage.
            if route.session_id != expected {
                return Ok(None);
            }
            let count: i64 = c.one("SELECT compression_count FROM sessions WHERE id = ?1", [&expected], |r| r.get(0))?;
            end_session(c, &expected, "compressed")?;
            let mut next = start_session(c, &key, &route.origin, &model, Some(&expected), route.overrides.clone())?;
            c.run(
                "UPDATE sessions SET system_prompt = ?2, compression_count = ?3 WHERE id = ?1",
                params![next.session_id, prompt, count + 1],
            )?;
            for m in carried {
                insert_message(c, &NewMessage { session_id: next.session_id.clone(), ..m })?;
            }
            next.created = false;
            Ok(Some(next))
        })
        .await
    }
}
