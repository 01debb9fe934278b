//! Sessions and routing in PostgreSQL: a `routes` row per session key pointing at its current
//! session, the origin stored as JSON.
//!
//! Replicas route the same key at once, so a route is never read and then written: finding it
//! updates it (`UPDATE … RETURNING`, which also locks the row for the caller's transaction), and
//! creating it is an `INSERT … ON CONFLICT` that lets exactly one session win.

use super::PostgresStore;
use crate::store::clock::{now_ms, to_time};
use crate::store::{Conversation, RouteEntry, Routes, SessionRow, StoreError};
use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use hermes_adapter::SessionSource;
use tokio_postgres::Row;

#[async_trait]
impl Routes for PostgresStore {
    async fn route_get(&self, session_key: &str) -> Result<Option<RouteEntry>, StoreError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached("SELECT session_id, origin, overrides, updated_at FROM routes WHERE session_key = $1").await?;
        client.query_opt(&stmt, &[&session_key]).await?.map(|r| route_from_row(session_key, &r, false)).transpose()
    }

    async fn route_get_or_create(&self, session_key: &str, source: &SessionSource, model: &str) -> Result<RouteEntry, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let route = current_route(&tx, session_key, source, model).await?;
        tx.commit().await?;
        Ok(route)
    }

    async fn session_reset(&self, session_key: &str, source: &SessionSource, model: &str, reason: &str) -> Result<RouteEntry, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // The route row stays locked until commit, so a concurrent reset or turn waits and then
        // sees the new session rather than ending it twice.
        let existing = lock_route(&tx, session_key).await?;
        let overrides = match &existing {
            Some(route) => {
                end_session(&tx, &route.session_id, reason).await?;
                route.overrides.clone()
            }
            None => serde_json::json!({}),
        };
        let route = start_session(&tx, session_key, source, model, None, overrides).await?;
        if existing.is_none() {
            // A replica may have created the route after we found none; ours replaced it, so its
            // session ends here as it would have had it come first.
            let stmt = tx
                .prepare_cached(
                    "UPDATE sessions SET ended_at = $3, end_reason = $4 WHERE session_key = $1 AND id <> $2 AND ended_at IS NULL",
                )
                .await?;
            tx.execute(&stmt, &[&session_key, &route.session_id, &now_ms(), &reason]).await?;
        }
        tx.commit().await?;
        Ok(route)
    }

    async fn session_close(&self, session_key: &str, reason: &str) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // Deleting first decides which caller closes: only one gets the row back.
        let stmt = tx.prepare_cached("DELETE FROM routes WHERE session_key = $1 RETURNING session_id").await?;
        let Some(row) = tx.query_opt(&stmt, &[&session_key]).await? else {
            return Ok(false);
        };
        let session_id: String = row.try_get(0)?;
        end_session(&tx, &session_id, reason).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn route_set_overrides(&self, session_key: &str, overrides: &serde_json::Value) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached("UPDATE routes SET overrides = $2 WHERE session_key = $1").await?;
        Ok(client.execute(&stmt, &[&session_key, &overrides.to_string()]).await? == 1)
    }

    async fn user_talked_in(&self, platform: &str, chat_id: &str, user_id: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached("SELECT 1 FROM sessions WHERE platform = $1 AND chat_id = $2 AND user_id = $3 LIMIT 1").await?;
        Ok(client.query_opt(&stmt, &[&platform, &chat_id, &user_id]).await?.is_some())
    }

    async fn session_get(&self, session_id: &str) -> Result<Option<SessionRow>, StoreError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT id, session_key, source, user_id, chat_id, model, title, parent_session_id, started_at, ended_at,
                        end_reason, message_count, input_tokens, output_tokens
                 FROM sessions WHERE id = $1",
            )
            .await?;
        client.query_opt(&stmt, &[&session_id]).await?.map(|r| session_from_row(&r)).transpose()
    }

    async fn conversations(&self, limit: usize) -> Result<Vec<Conversation>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT r.session_key, r.session_id, r.origin, r.updated_at, s.title, s.message_count
                 FROM routes r JOIN sessions s ON s.id = r.session_id
                 ORDER BY r.updated_at DESC, r.session_key LIMIT $1",
            )
            .await?;
        client.query(&stmt, &[&limit]).await?.iter().map(conversation_from_row).collect()
    }
}

fn session_from_row(r: &Row) -> Result<SessionRow, StoreError> {
    Ok(SessionRow {
        id: r.try_get(0)?,
        session_key: r.try_get(1)?,
        source: RouteEntry::decode_origin(r.try_get(2)?)?,
        user_id: r.try_get(3)?,
        chat_id: r.try_get(4)?,
        model: r.try_get(5)?,
        title: r.try_get(6)?,
        parent_session_id: r.try_get(7)?,
        started_at: to_time(r.try_get(8)?),
        ended_at: r.try_get::<_, Option<i64>>(9)?.map(to_time),
        end_reason: r.try_get(10)?,
        message_count: r.try_get(11)?,
        input_tokens: r.try_get(12)?,
        output_tokens: r.try_get(13)?,
    })
}

fn conversation_from_row(r: &Row) -> Result<Conversation, StoreError> {
    Ok(Conversation {
        session_key: r.try_get(0)?,
        session_id: r.try_get(1)?,
        origin: RouteEntry::decode_origin(r.try_get(2)?)?,
        updated_at: to_time(r.try_get(3)?),
        title: r.try_get(4)?,
        message_count: r.try_get(5)?,
    })
}

/// A route from `session_id, origin, overrides, updated_at`.
fn route_from_row(key: &str, r: &Row, created: bool) -> Result<RouteEntry, StoreError> {
    let overrides: &str = r.try_get(2)?;
    Ok(RouteEntry {
        session_key: key.to_string(),
        session_id: r.try_get(0)?,
        origin: RouteEntry::decode_origin(r.try_get(1)?)?,
        overrides: serde_json::from_str(overrides).map_err(|e| StoreError::Corrupt(format!("route overrides for {key}: {e}")))?,
        updated_at: to_time(r.try_get(3)?),
        created,
    })
}

/// The key's current session, started (with `source` as its origin) when there is none; the
/// latest origin wins, so a reply goes where the user last wrote from. Leaves the route row
/// locked for the rest of `tx`.
pub(super) async fn current_route(
    tx: &impl GenericClient,
    key: &str,
    source: &SessionSource,
    model: &str,
) -> Result<RouteEntry, StoreError> {
    let origin = RouteEntry::encode_origin(source)?;
    let stmt = tx
        .prepare_cached(
            "UPDATE routes SET origin = $2, updated_at = $3 WHERE session_key = $1 RETURNING session_id, origin, overrides, updated_at",
        )
        .await?;
    if let Some(row) = tx.query_opt(&stmt, &[&key, &origin, &now_ms()]).await? {
        return route_from_row(key, &row, false);
    }
    let (id, now) = (RouteEntry::new_session_id(), now_ms());
    insert_session(tx, &id, key, source, model, None, now).await?;
    // Another replica may create the route between the UPDATE above and here: the conflict waits
    // for its commit and then takes its session (with our origin), so the key keeps one session.
    let stmt = tx
        .prepare_cached(
            "INSERT INTO routes (session_key, session_id, origin, overrides, updated_at) VALUES ($1, $2, $3, '{}', $4)
             ON CONFLICT (session_key) DO UPDATE SET origin = excluded.origin, updated_at = excluded.updated_at
             RETURNING session_id, origin, overrides, updated_at",
        )
        .await?;
    let row = tx.query_one(&stmt, &[&key, &id, &origin, &now]).await?;
    let route = route_from_row(key, &row, false)?;
    if route.session_id != id {
        // We lost the race: the session we started is nobody's, so it never commits.
        tx.execute(&tx.prepare_cached("DELETE FROM sessions WHERE id = $1").await?, &[&id]).await?;
        return Ok(route);
    }
    Ok(RouteEntry { created: true, ..route })
}

/// The key's route, its row locked for the rest of `tx`.
pub(super) async fn lock_route(tx: &impl GenericClient, key: &str) -> Result<Option<RouteEntry>, StoreError> {
    let stmt = tx.prepare_cached("SELECT session_id, origin, overrides, updated_at FROM routes WHERE session_key = $1 FOR UPDATE").await?;
    tx.query_opt(&stmt, &[&key]).await?.map(|r| route_from_row(key, &r, false)).transpose()
}

/// Start a session for `key` and point its route at it (replacing any route there was).
pub(super) async fn start_session(
    tx: &impl GenericClient,
    key: &str,
    source: &SessionSource,
    model: &str,
    parent: Option<&str>,
    overrides: serde_json::Value,
) -> Result<RouteEntry, StoreError> {
    let (id, now, origin) = (RouteEntry::new_session_id(), now_ms(), RouteEntry::encode_origin(source)?);
    insert_session(tx, &id, key, source, model, parent, now).await?;
    let stmt = tx
        .prepare_cached(
            "INSERT INTO routes (session_key, session_id, origin, overrides, updated_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (session_key) DO UPDATE SET session_id = excluded.session_id, origin = excluded.origin,
                 overrides = excluded.overrides, updated_at = excluded.updated_at",
        )
        .await?;
    tx.execute(&stmt, &[&key, &id, &origin, &overrides.to_string(), &now]).await?;
    Ok(RouteEntry {
        session_key: key.to_string(),
        session_id: id,
        origin: source.clone(),
        overrides,
        updated_at: to_time(now),
        created: true,
    })
}

/// A new session's row; `source` is where it started, kept as it was.
async fn insert_session(
    tx: &impl GenericClient,
    id: &str,
    key: &str,
    source: &SessionSource,
    model: &str,
    parent: Option<&str>,
    now: i64,
) -> Result<(), StoreError> {
    let origin = RouteEntry::encode_origin(source)?;
    let stmt = tx
        .prepare_cached(
            "INSERT INTO sessions (id, session_key, source, platform, user_id, chat_id, model, parent_session_id, started_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .await?;
    tx.execute(&stmt, &[&id, &key, &origin, &source.platform.as_str(), &source.user_id, &source.chat_id, &model, &parent, &now]).await?;
    Ok(())
}

pub(super) async fn end_session(tx: &impl GenericClient, session_id: &str, reason: &str) -> Result<(), StoreError> {
    let stmt = tx.prepare_cached("UPDATE sessions SET ended_at = $2, end_reason = $3 WHERE id = $1 AND ended_at IS NULL").await?;
    tx.execute(&stmt, &[&session_id, &now_ms(), &reason]).await?;
    Ok(())
}
