//! Session state the agent core keeps between turns, in PostgreSQL: the frozen system-prompt
//! snapshot, the prompt size of the last turn, titles, soft-deleting turns (`active = FALSE`)
//! and rotating to a compressed child session whose lineage points at its parent.
//!
//! Each write is one statement or one transaction that first locks the row it decides on (the
//! session for `/undo`, the route for compression), so replicas doing the same at once queue
//! behind each other instead of both acting on what they read.

use super::PostgresStore;
use super::messages::insert_message;
use super::routes::{end_session, lock_route, start_session};
use crate::store::{NewMessage, RouteEntry, StoreError, Undone};
use tokio_postgres::error::SqlState;

/// The agent-state half of [`crate::store::SessionLog`] (the trait impl, in `messages`, calls
/// these): one trait impl cannot span two files.
impl PostgresStore {
    /// The session's frozen system prompt, stored on first use so every later turn of the
    /// session sends the same prefix. Returns the stored one when it already exists.
    pub(super) async fn freeze_prompt(&self, session_id: &str, prompt: &str) -> Result<String, StoreError> {
        let client = self.client().await?;
        // One statement: of two replicas freezing at once, the second keeps the first's prompt.
        let stmt = client
            .prepare_cached("UPDATE sessions SET system_prompt = COALESCE(system_prompt, $2) WHERE id = $1 RETURNING system_prompt")
            .await?;
        let stored: Option<String> = match client.query_opt(&stmt, &[&session_id, &prompt]).await? {
            Some(row) => row.try_get(0)?,
            None => None,
        };
        Ok(stored.unwrap_or_else(|| prompt.to_string()))
    }

    pub(super) async fn read_prompt(&self, session_id: &str) -> Result<Option<String>, StoreError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached("SELECT system_prompt FROM sessions WHERE id = $1").await?;
        match client.query_opt(&stmt, &[&session_id]).await? {
            Some(row) => Ok(row.try_get(0)?),
            None => Ok(None),
        }
    }

    pub(super) async fn read_prompt_tokens(&self, session_id: &str) -> Result<(u64, u64), StoreError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached("SELECT last_prompt_tokens, compression_count FROM sessions WHERE id = $1").await?;
        let Some(row) = client.query_opt(&stmt, &[&session_id]).await? else {
            return Ok((0, 0));
        };
        let (tokens, compressions): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        Ok((tokens.max(0) as u64, compressions.max(0) as u64))
    }

    /// Set the session's title; `Ok(false)` when another session already has it. The unique
    /// index on titles decides, so two sessions taking one title at once cannot both get it.
    pub(super) async fn set_title(&self, session_id: &str, title: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached("UPDATE sessions SET title = $2 WHERE id = $1").await?;
        match client.execute(&stmt, &[&session_id, &title]).await {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Soft-delete the last `turns` user turns (each user message and everything after it).
    pub(super) async fn undo_turns(&self, session_id: &str, turns: usize) -> Result<Option<Undone>, StoreError> {
        let turns = i64::try_from(turns).unwrap_or(i64::MAX);
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // Lock the session first: appending a message updates this row too, so an undo waits for
        // a turn being written, and two undos never pick the same turns.
        tx.execute(&tx.prepare_cached("SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE").await?, &[&session_id]).await?;
        let stmt = tx
            .prepare_cached("SELECT id, content FROM messages WHERE session_id = $1 AND active AND role = 'user' ORDER BY id DESC LIMIT $2")
            .await?;
        let users = tx.query(&stmt, &[&session_id, &turns]).await?;
        let Some(first) = users.last() else { return Ok(None) };
        let (from, first_user_text): (i64, String) = (first.try_get(0)?, first.try_get(1)?);
        let stmt = tx.prepare_cached("UPDATE messages SET active = FALSE WHERE session_id = $1 AND active AND id >= $2").await?;
        let removed = tx.execute(&stmt, &[&session_id, &from]).await?;
        tx.execute(&tx.prepare_cached("UPDATE sessions SET last_prompt_tokens = 0 WHERE id = $1").await?, &[&session_id]).await?;
        tx.commit().await?;
        Ok(Some(Undone { turns: users.len(), messages: removed as usize, first_user_text }))
    }

    /// Rotate `session_key` to a new session that starts with `carried` (a summary plus the
    /// protected messages) and links to the old one as its parent. The old session ends with
    /// `compressed`; its messages stay searchable. Returns the new route.
    pub(super) async fn compress_into(
        &self,
        session_key: &str,
        expected: &str,
        model: &str,
        system_prompt: &str,
        carried: Vec<NewMessage>,
    ) -> Result<Option<RouteEntry>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // The route stays locked until commit: a compression or /new racing this one waits, then
        // finds another session than it expected.
        let Some(route) = lock_route(&tx, session_key).await? else { return Ok(None) };
        // Another compression (or /new) got there first: do not fork the lineage.
        if route.session_id != expected {
            return Ok(None);
        }
        let stmt = tx.prepare_cached("SELECT compression_count FROM sessions WHERE id = $1").await?;
        let count: i64 = tx.query_one(&stmt, &[&expected]).await?.try_get(0)?;
        end_session(&tx, expected, "compressed").await?;
        let next = start_session(&tx, session_key, &route.origin, model, Some(expected), route.overrides.clone()).await?;
        let stmt = tx.prepare_cached("UPDATE sessions SET system_prompt = $2, compression_count = $3 WHERE id = $1").await?;
        tx.execute(&stmt, &[&next.session_id, &system_prompt, &(count + 1)]).await?;
        for m in carried {
            insert_message(&tx, &NewMessage { session_id: next.session_id.clone(), ..m }).await?;
        }
        tx.commit().await?;
        Ok(Some(RouteEntry { created: false, ..next }))
    }
}
