//! The inbox in SQLite: `INSERT OR IGNORE` on the event id is what drops a platform's
//! redelivery.

use super::{CachedStatements, SqliteStore, now_ms, to_time};
use crate::store::{Inbox, InboxRow, InboxState, StoreError};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use std::time::Duration;

#[async_trait]
impl Inbox for SqliteStore {
    async fn inbox_set_state(&self, event_id: &str, state: InboxState, error: Option<&str>) -> Result<(), StoreError> {
        let (event_id, error) = (event_id.to_string(), error.map(str::to_string));
        self.write(move |c| {
            c.run(
                "UPDATE inbox SET state = ?2, error = ?3, updated_at = ?4 WHERE event_id = ?1",
                params![event_id, state.as_str(), error, now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    async fn inbox_accept(&self, event_id: &str, platform: &str, payload: &str) -> Result<bool, StoreError> {
        let (event_id, platform, payload) = (event_id.to_string(), platform.to_string(), payload.to_string());
        self.write(move |c| {
            let now = now_ms();
            let inserted = c.run(
                "INSERT OR IGNORE INTO inbox (event_id, platform, payload, state, received_at, updated_at) VALUES (?1, ?2, ?3, 'accepted', ?4, ?4)",
                params![event_id, platform, payload, now],
            )?;
            Ok(inserted == 1)
        })
        .await
    }

    async fn inbox_accept_all(&self, events: Vec<(String, String, String)>) -> Result<Vec<bool>, StoreError> {
        self.write(move |c| {
            let now = now_ms();
            let mut inserted = Vec::with_capacity(events.len());
            for (event_id, platform, payload) in &events {
                inserted.push(
                    c.run(
                        "INSERT OR IGNORE INTO inbox (event_id, platform, payload, state, received_at, updated_at) VALUES (?1, ?2, ?3, 'accepted', ?4, ?4)",
                        params![event_id, platform, payload, now],
                    )? == 1,
                );
            }
            Ok(inserted)
        })
        .await
    }

    async fn inbox_mark_processing(&self, event_id: &str) -> Result<(), StoreError> {
        let event_id = event_id.to_string();
        self.write(move |c| mark_processing(c, &event_id)).await
    }

    async fn inbox_poisoned(&self, limit: usize) -> Result<Vec<InboxRow>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT event_id, platform, payload, state, attempts, error, received_at FROM inbox
                 WHERE state = 'poisoned' ORDER BY updated_at DESC, rowid DESC LIMIT ?1",
            )?;
            let rows = stmt.query_map([limit as i64], row_to_inbox)?;
            rows.map(|r| r.map_err(StoreError::from).and_then(|r| r)).collect()
        })
        .await
    }

    async fn inbox_unfinished(&self) -> Result<Vec<InboxRow>, StoreError> {
        self.read(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT event_id, platform, payload, state, attempts, error, received_at FROM inbox
                 WHERE state IN ('accepted', 'processing') ORDER BY received_at, rowid",
            )?;
            let rows = stmt.query_map([], row_to_inbox)?;
            rows.map(|r| r.map_err(StoreError::from).and_then(|r| r)).collect()
        })
        .await
    }

    async fn inbox_get(&self, event_id: &str) -> Result<Option<InboxRow>, StoreError> {
        let event_id = event_id.to_string();
        self.read(move |c| {
            c.one(
                "SELECT event_id, platform, payload, state, attempts, error, received_at FROM inbox WHERE event_id = ?1",
                [event_id],
                row_to_inbox,
            )
            .optional()?
            .transpose()
        })
        .await
    }

    async fn inbox_prune(&self, keep: Duration) -> Result<usize, StoreError> {
        let cutoff = now_ms() - keep.as_millis() as i64;
        self.write(move |c| Ok(c.run("DELETE FROM inbox WHERE state IN ('done', 'failed') AND updated_at <= ?1", [cutoff])?)).await
    }
}

/// One more attempt at the event starts (a finished event stays finished).
pub(super) fn mark_processing(c: &Connection, event_id: &str) -> Result<(), StoreError> {
    c.run(
        "UPDATE inbox SET state = 'processing', attempts = attempts + 1, updated_at = ?2 WHERE event_id = ?1 AND state IN ('accepted', 'processing')",
        params![event_id, now_ms()],
    )?;
    Ok(())
}

fn row_to_inbox(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<InboxRow, StoreError>> {
    let state: String = r.get(3)?;
    let row = InboxRow {
        event_id: r.get(0)?,
        platform: r.get(1)?,
        payload: r.get(2)?,
        state: InboxState::Accepted,
        attempts: r.get(4)?,
        error: r.get(5)?,
        received_at: to_time(r.get(6)?),
    };
    Ok(InboxState::parse(&state).map(|state| InboxRow { state, ..row }))
}
