//! The inbox: every inbound event, keyed by its platform event id, from acceptance until its turn
//! ended. `INSERT OR IGNORE` on the id is what drops a platform's redelivery.

use super::{CachedStatements, Store, StoreError, now_ms, to_time};
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxState {
    /// Stored, not yet picked up by a turn.
    Accepted,
    /// A turn is working on it.
    Processing,
    /// The turn ended (answered, refused or failed with a message to the user).
    Done,
    /// It can never be processed (e.g. an unreadable payload).
    Failed,
    /// Processing it crashed (a panic, or the gateway dying under it again and again): parked,
    /// never replayed, shown by `hermes gateway status`.
    Poisoned,
}

impl InboxState {
    fn as_str(self) -> &'static str {
        match self {
            InboxState::Accepted => "accepted",
            InboxState::Processing => "processing",
            InboxState::Done => "done",
            InboxState::Failed => "failed",
            InboxState::Poisoned => "poisoned",
        }
    }

    fn parse(s: &str) -> Result<Self, StoreError> {
        Ok(match s {
            "accepted" => InboxState::Accepted,
            "processing" => InboxState::Processing,
            "done" => InboxState::Done,
            "failed" => InboxState::Failed,
            "poisoned" => InboxState::Poisoned,
            other => return Err(StoreError::Corrupt(format!("unknown inbox state {other:?}"))),
        })
    }
}

#[derive(Debug, Clone)]
pub struct InboxRow {
    pub event_id: String,
    pub platform: String,
    pub payload: String,
    pub state: InboxState,
    /// How many times a turn started on it (more than one = replayed after a crash).
    pub attempts: i64,
    pub error: Option<String>,
    pub received_at: DateTime<Utc>,
}

impl Store {
    /// Store an inbound event; `false` when its id was already stored (a redelivery).
    pub async fn inbox_accept(&self, event_id: &str, platform: &str, payload: &str) -> Result<bool, StoreError> {
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

    /// Store several inbound events `(event_id, platform, payload)` in one write; for each,
    /// `false` when its id was already stored. All or none: a failure stores none of them.
    pub async fn inbox_accept_all(&self, events: Vec<(String, String, String)>) -> Result<Vec<bool>, StoreError> {
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

    /// A turn started on the event.
    pub async fn inbox_mark_processing(&self, event_id: &str) -> Result<(), StoreError> {
        let event_id = event_id.to_string();
        self.write(move |c| mark_processing(c, &event_id)).await
    }

    pub async fn inbox_mark_done(&self, event_id: &str) -> Result<(), StoreError> {
        self.inbox_set_state(event_id, InboxState::Done, None).await
    }

    pub async fn inbox_mark_failed(&self, event_id: &str, error: &str) -> Result<(), StoreError> {
        self.inbox_set_state(event_id, InboxState::Failed, Some(error)).await
    }

    /// Park an event whose processing crashed; `reason` says how (with the incident id).
    pub async fn inbox_mark_poisoned(&self, event_id: &str, reason: &str) -> Result<(), StoreError> {
        self.inbox_set_state(event_id, InboxState::Poisoned, Some(reason)).await
    }

    /// The most recently parked events, newest first.
    pub async fn inbox_poisoned(&self, limit: usize) -> Result<Vec<InboxRow>, StoreError> {
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

    /// Events accepted but not finished, oldest first: what a restart must replay.
    pub async fn inbox_unfinished(&self) -> Result<Vec<InboxRow>, StoreError> {
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

    pub async fn inbox_get(&self, event_id: &str) -> Result<Option<InboxRow>, StoreError> {
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

    /// Forget finished events older than `keep`; returns how many were removed. Until then a
    /// redelivery of the same event id is still recognised and dropped.
    pub async fn inbox_prune(&self, keep: Duration) -> Result<usize, StoreError> {
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
