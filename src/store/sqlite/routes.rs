//! Sessions and routing in SQLite: a `routes` row per session key pointing at its current
//! session, the origin stored as JSON.

use super::{CachedStatements, SqliteStore, now_ms, to_time};
use crate::store::{Conversation, RouteEntry, Routes, SessionRow, StoreError};
use async_trait::async_trait;
use hermes_adapter::SessionSource;
use rusqlite::{Connection, OptionalExtension, params};

#[async_trait]
impl Routes for SqliteStore {
    async fn route_get(&self, session_key: &str) -> Result<Option<RouteEntry>, StoreError> {
        let key = session_key.to_string();
        self.read(move |c| read_route(c, &key)).await
    }

    async fn route_get_or_create(&self, session_key: &str, source: &SessionSource, model: &str) -> Result<RouteEntry, StoreError> {
        let (key, source, model) = (session_key.to_string(), source.clone(), model.to_string());
        self.write(move |c| current_route(c, &key, &source, &model)).await
    }

    async fn session_reset(&self, session_key: &str, source: &SessionSource, model: &str, reason: &str) -> Result<RouteEntry, StoreError> {
        let (key, source, model, reason) = (session_key.to_string(), source.clone(), model.to_string(), reason.to_string());
        self.write(move |c| {
            let overrides = match read_route(c, &key)? {
                Some(route) => {
                    end_session(c, &route.session_id, &reason)?;
                    route.overrides
                }
                None => serde_json::json!({}),
            };
            start_session(c, &key, &source, &model, None, overrides)
        })
        .await
    }

    async fn session_close(&self, session_key: &str, reason: &str) -> Result<bool, StoreError> {
        let (key, reason) = (session_key.to_string(), reason.to_string());
        self.write(move |c| {
            let Some(route) = read_route(c, &key)? else {
                return Ok(false);
            };
            end_session(c, &route.session_id, &reason)?;
            c.run("DELETE FROM routes WHERE session_key = ?1", [&key])?;
            Ok(true)
        })
        .await
    }

    async fn route_set_overrides(&self, session_key: &str, overrides: &serde_json::Value) -> Result<bool, StoreError> {
        let (key, overrides) = (session_key.to_string(), overrides.to_string());
        self.write(move |c| Ok(c.run("UPDATE routes SET overrides = ?2 WHERE session_key = ?1", params![key, overrides])? == 1)).await
    }

    async fn user_talked_in(&self, platform: &str, chat_id: &str, user_id: &str) -> Result<bool, StoreError> {
        let (platform, chat_id, user_id) = (platform.to_string(), chat_id.to_string(), user_id.to_string());
        self.read(move |c| {
            Ok(c.one(
                "SELECT 1 FROM sessions WHERE platform = ?1 AND chat_id = ?2 AND user_id = ?3 LIMIT 1",
                params![platform, chat_id, user_id],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
        })
        .await
    }

    async fn session_get(&self, session_id: &str) -> Result<Option<SessionRow>, StoreError> {
        let id = session_id.to_string();
        self.read(move |c| {
            c.one(
                "SELECT id, session_key, source, user_id, chat_id, model, title, parent_session_id, started_at, ended_at,
                        end_reason, message_count, input_tokens, output_tokens
                 FROM sessions WHERE id = ?1",
                [id],
                |r| {
                    Ok(SessionRow {
                        id: r.get(0)?,
                        session_key: r.get(1)?,
                        source: decode_column(r.get(2)?, 2)?,
                        user_id: r.get(3)?,
                        chat_id: r.get(4)?,
                        model: r.get(5)?,
                        title: r.get(6)?,
                        parent_session_id: r.get(7)?,
                        started_at: to_time(r.get(8)?),
                        ended_at: r.get::<_, Option<i64>>(9)?.map(to_time),
                        end_reason: r.get(10)?,
                        message_count: r.get(11)?,
                        input_tokens: r.get(12)?,
                        output_tokens: r.get(13)?,
                    })
                },
            )
            .optional()
            .map_err(StoreError::from)
        })
        .await
    }

    async fn conversations(&self, limit: usize) -> Result<Vec<Conversation>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |c| read_conversations(c, limit)).await
    }
}

/// Routes with their current session's title and size, most recently active first.
fn read_conversations(c: &Connection, limit: i64) -> Result<Vec<Conversation>, StoreError> {
    let mut stmt = c.prepare_cached(
        "SELECT r.session_key, r.session_id, r.origin, r.updated_at, s.title, s.message_count
         FROM routes r JOIN sessions s ON s.id = r.session_id
         ORDER BY r.updated_at DESC, r.session_key LIMIT ?1",
    )?;
    let rows = stmt.query_map([limit], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, i64>(3)?, r.get(4)?, r.get(5)?))
    })?;
    let mut conversations = Vec::new();
    for row in rows {
        let (session_key, session_id, origin, updated_at, title, message_count) = row?;
        let origin = RouteEntry::decode_origin(&origin)?;
        conversations.push(Conversation { session_key, session_id, origin, title, message_count, updated_at: to_time(updated_at) });
    }
    Ok(conversations)
}

/// The key's current session, started (with `source` as its origin) when there is none; the
/// latest origin wins, so a reply goes where the user last wrote from.
pub(super) fn current_route(c: &Connection, key: &str, source: &SessionSource, model: &str) -> Result<RouteEntry, StoreError> {
    if let Some(mut route) = read_route(c, key)? {
        c.run(
            "UPDATE routes SET origin = ?2, updated_at = ?3 WHERE session_key = ?1",
            params![key, RouteEntry::encode_origin(source)?, now_ms()],
        )?;
        route.origin = source.clone();
        return Ok(route);
    }
    start_session(c, key, source, model, None, serde_json::json!({}))
}

pub(super) fn read_route(c: &Connection, key: &str) -> Result<Option<RouteEntry>, StoreError> {
    let raw = c
        .one("SELECT session_id, origin, overrides, updated_at FROM routes WHERE session_key = ?1", [key], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, i64>(3)?))
        })
        .optional()?;
    raw.map(|(session_id, origin, overrides, updated_at)| {
        Ok(RouteEntry {
            session_key: key.to_string(),
            session_id,
            origin: RouteEntry::decode_origin(&origin)?,
            overrides: serde_json::from_str(&overrides).map_err(|e| StoreError::Corrupt(format!("route overrides for {key}: {e}")))?,
            updated_at: to_time(updated_at),
            created: false,
        })
    })
    .transpose()
}

pub(super) fn start_session(
    c: &Connection,
    key: &str,
    source: &SessionSource,
    model: &str,
    parent: Option<&str>,
    overrides: serde_json::Value,
) -> Result<RouteEntry, StoreError> {
    let id = RouteEntry::new_session_id();
    let now = now_ms();
    let origin = RouteEntry::encode_origin(source)?;
    c.run(
        "INSERT INTO sessions (id, session_key, source, platform, user_id, chat_id, model, parent_session_id, started_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![id, key, origin, source.platform.as_str(), source.user_id, source.chat_id, model, parent, now],
    )?;
    c.run(
        "INSERT INTO routes (session_key, session_id, origin, overrides, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(session_key) DO UPDATE SET session_id = excluded.session_id, origin = excluded.origin,
             overrides = excluded.overrides, updated_at = excluded.updated_at",
        params![key, id, origin, overrides.to_string(), now],
    )?;
    Ok(RouteEntry {
        session_key: key.to_string(),
        session_id: id,
        origin: source.clone(),
        overrides,
        updated_at: to_time(now),
        created: true,
    })
}

pub(super) fn end_session(c: &Connection, session_id: &str, reason: &str) -> Result<(), StoreError> {
    c.run("UPDATE sessions SET ended_at = ?2, end_reason = ?3 WHERE id = ?1 AND ended_at IS NULL", params![session_id, now_ms(), reason])?;
    Ok(())
}

/// [`RouteEntry::decode_origin`] inside a row mapper.
fn decode_column(raw: String, column: usize) -> rusqlite::Result<SessionSource> {
    serde_json::from_str(&raw).map_err(|e| rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, Box::new(e)))
}
