//! Messages in SQLite, and full-text search over them: FTS5 (unicode61 words) first, and the
//! trigram index for what word search cannot find (CJK text, substrings inside words).

use super::{CachedStatements, SqliteStore, now_ms, to_time};
use crate::store::{LoggedMessage, MessageRow, NewMessage, RouteEntry, SearchHit, SearchScope, SessionLog, StoreError, Undone};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

#[async_trait]
impl SessionLog for SqliteStore {
    async fn message_append(&self, message: NewMessage) -> Result<i64, StoreError> {
        self.write(move |c| insert_message(c, &message)).await
    }

    async fn messages(&self, session_id: &str, limit: Option<usize>) -> Result<Vec<MessageRow>, StoreError> {
        let id = session_id.to_string();
        let limit = limit.map(|l| l as i64).unwrap_or(-1);
        self.read(move |c| read_messages(c, &id, limit)).await
    }

    async fn messages_after(&self, after_id: i64, limit: usize) -> Result<Vec<LoggedMessage>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |c| read_logged_after(c, after_id, limit)).await
    }

    async fn latest_message_id(&self) -> Result<i64, StoreError> {
        self.read(|c| Ok(c.one("SELECT COALESCE(MAX(id), 0) FROM messages", [], |r| r.get(0))?)).await
    }

    async fn message_for_event(&self, session_id: &str, event_id: &str, role: &str) -> Result<Option<MessageRow>, StoreError> {
        let (session_id, event_id, role) = (session_id.to_string(), event_id.to_string(), role.to_string());
        self.read(move |c| read_message_for_event(c, &session_id, &event_id, &role)).await
    }

    async fn search_messages(&self, query: &str, scope: SearchScope, limit: usize) -> Result<Vec<SearchHit>, StoreError> {
        let query = query.trim().to_string();
        if query.is_empty() {
            return Ok(Vec::new());
        }
        self.read(move |c| {
            let hits = search_index(c, "messages_fts", &word_query(&query), &scope, limit)?;
            // Word search finds nothing inside CJK runs or within words; the trigram index does
            // (it needs at least three characters).
            if hits.is_empty() && query.chars().count() >= 3 {
                return search_index(c, "messages_trigram", &phrase(&query), &scope, limit);
            }
            Ok(hits)
        })
        .await
    }

    async fn session_prompt_freeze(&self, session_id: &str, prompt: &str) -> Result<String, StoreError> {
        self.freeze_prompt(session_id, prompt).await
    }

    async fn session_prompt(&self, session_id: &str) -> Result<Option<String>, StoreError> {
        self.read_prompt(session_id).await
    }

    async fn session_prompt_tokens(&self, session_id: &str) -> Result<(u64, u64), StoreError> {
        self.read_prompt_tokens(session_id).await
    }

    async fn session_set_title(&self, session_id: &str, title: &str) -> Result<bool, StoreError> {
        self.set_title(session_id, title).await
    }

    async fn messages_undo(&self, session_id: &str, turns: usize) -> Result<Option<Undone>, StoreError> {
        self.undo_turns(session_id, turns).await
    }

    async fn session_compress_into(
        &self,
        session_key: &str,
        expected_session: &str,
        model: &str,
        system_prompt: &str,
        carried: Vec<NewMessage>,
    ) -> Result<Option<RouteEntry>, StoreError> {
        self.compress_into(session_key, expected_session, model, system_prompt, carried).await
    }
}

/// Insert `message` (its session's message count follows); returns its id.
pub(super) fn insert_message(c: &Connection, message: &NewMessage) -> Result<i64, StoreError> {
    c.run(
        "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, event_id, finish_reason, timestamp, images)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            message.session_id,
            message.role,
            message.content,
            message.tool_call_id,
            message.tool_calls,
            message.tool_name,
            message.event_id,
            message.finish_reason,
            now_ms(),
            message.images
        ],
    )?;
    let id = c.last_insert_rowid();
    c.run("UPDATE sessions SET message_count = message_count + 1 WHERE id = ?1", [&message.session_id])?;
    Ok(id)
}

/// `SELECT` of the columns [`row_to_message`] reads, as a literal for `concat!` (statements are
/// cached by their text, so they are built at compile time).
macro_rules! select_messages {
    () => {
        "SELECT id, session_id, role, content, tool_call_id, tool_calls, tool_name, event_id, finish_reason, timestamp, images FROM messages"
    };
}

/// The session's active messages in order; with `limit` (-1 = all), the most recent `limit`.
pub(super) fn read_messages(c: &Connection, session_id: &str, limit: i64) -> Result<Vec<MessageRow>, StoreError> {
    let mut stmt = c.prepare_cached(concat!(
        "SELECT * FROM (",
        select_messages!(),
        " WHERE session_id = ?1 AND active = 1 ORDER BY id DESC LIMIT ?2) ORDER BY id"
    ))?;
    let rows = stmt.query_map(params![session_id, limit], row_to_message)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The session's active messages after message `after_id`, in order.
pub(super) fn read_messages_after(c: &Connection, session_id: &str, after_id: i64) -> Result<Vec<MessageRow>, StoreError> {
    let mut stmt = c.prepare_cached(concat!(select_messages!(), " WHERE session_id = ?1 AND active = 1 AND id > ?2 ORDER BY id"))?;
    let rows = stmt.query_map(params![session_id, after_id], row_to_message)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Users' and the agent's words after `after_id` across sessions, oldest first. The id is the
/// rowid, so this is a range scan from the cursor, however long the log.
fn read_logged_after(c: &Connection, after_id: i64, limit: i64) -> Result<Vec<LoggedMessage>, StoreError> {
    let mut stmt = c.prepare_cached(
        "SELECT m.id, m.session_id, m.role, m.content, m.tool_call_id, m.tool_calls, m.tool_name, m.event_id, m.finish_reason,
                m.timestamp, m.images, s.session_key
         FROM messages m JOIN sessions s ON s.id = m.session_id
         WHERE m.id > ?1 AND m.active = 1 AND m.role IN ('user', 'assistant') AND m.content != ''
         ORDER BY m.id LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![after_id, limit], |r| Ok(LoggedMessage { session_key: r.get(11)?, message: row_to_message(r)? }))?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The active message with `role` stored for an inbound event, if any.
pub(super) fn read_message_for_event(
    c: &Connection,
    session_id: &str,
    event_id: &str,
    role: &str,
) -> Result<Option<MessageRow>, StoreError> {
    Ok(c.one(
        concat!(select_messages!(), " WHERE session_id = ?1 AND event_id = ?2 AND role = ?3 AND active = 1 ORDER BY id LIMIT 1"),
        params![session_id, event_id, role],
        row_to_message,
    )
    .optional()?)
}

/// Each word as a quoted term, so user text can never be read as FTS5 syntax.
fn word_query(query: &str) -> String {
    query.split_whitespace().map(phrase).collect::<Vec<_>>().join(" ")
}

fn phrase(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

fn search_index(c: &Connection, index: &str, fts_query: &str, scope: &SearchScope, limit: usize) -> Result<Vec<SearchHit>, StoreError> {
    let (scope_sql, scope_args) = scope.condition('?');
    let sql = format!(
        "SELECT m.id, m.session_id, m.role, snippet({index}, 0, '[', ']', '…', 16), m.timestamp
         FROM {index} JOIN messages m ON m.id = {index}.rowid
         WHERE {index} MATCH ?1 AND {scope_sql} AND m.active = 1 AND m.role IN ('user', 'assistant')
         ORDER BY bm25({index}) LIMIT ?2"
    );
    let mut stmt = c.prepare_cached(&sql)?;
    let mut args: Vec<&dyn rusqlite::ToSql> = vec![&fts_query, &limit];
    for a in &scope_args {
        args.push(a);
    }
    let rows = stmt.query_map(args.as_slice(), |r| {
        Ok(SearchHit { message_id: r.get(0)?, session_id: r.get(1)?, role: r.get(2)?, snippet: r.get(3)?, timestamp: to_time(r.get(4)?) })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

fn row_to_message(r: &rusqlite::Row<'_>) -> rusqlite::Result<MessageRow> {
    Ok(MessageRow {
        id: r.get(0)?,
        session_id: r.get(1)?,
        role: r.get(2)?,
        content: r.get(3)?,
        tool_call_id: r.get(4)?,
        tool_calls: r.get(5)?,
        tool_name: r.get(6)?,
        event_id: r.get(7)?,
        finish_reason: r.get(8)?,
        timestamp: to_time(r.get(9)?),
        images: r.get(10)?,
    })
}
