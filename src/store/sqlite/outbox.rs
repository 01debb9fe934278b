//! The outbox in SQLite: `INSERT OR IGNORE` on the idempotency key queues a part (an existing
//! row says what happened to it before); a lane's head is its oldest row still on its way, by
//! rowid, which only grows.

use super::{CachedStatements, SqliteStore, now_ms};
use crate::store::{AttemptEnd, DeadLetter, LaneHead, NewOutboxRow, Outbox, OutboxRow, QueueSummary, Queued, StoreError};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use std::time::Duration;

/// The states of a part still on its way.
const ON_ITS_WAY: &str = "('pending', 'sending', 'ambiguous')";

#[async_trait]
impl Outbox for SqliteStore {
    async fn outbox_enqueue(&self, rows: Vec<NewOutboxRow>) -> Result<Vec<Queued>, StoreError> {
        self.write(move |c| rows.iter().map(|row| enqueue_one(c, row)).collect()).await
    }

    async fn outbox_lane_head(&self, lane: &str) -> Result<Option<LaneHead>, StoreError> {
        let lane = lane.to_string();
        self.read(move |c| {
            let sql = format!(
                "SELECT rowid, idempotency_key, platform, message, state, attempts, error, next_attempt_at, created_at, deadline, \
                 notify_on_death, lead, resent_marked, updated_at FROM outbox WHERE lane = ?1 AND state IN {ON_ITS_WAY} ORDER BY rowid LIMIT 1"
            );
            Ok(c.one(&sql, [lane], |r| {
                Ok(LaneHead {
                    id: r.get(0)?,
                    key: r.get(1)?,
                    platform: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                    message: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                    state: r.get(4)?,
                    attempts: r.get(5)?,
                    error: r.get(6)?,
                    next_attempt_at: r.get(7)?,
                    created_at: r.get(8)?,
                    deadline: r.get(9)?,
                    notify_on_death: r.get(10)?,
                    lead: r.get(11)?,
                    resent_marked: r.get(12)?,
                    updated_at: r.get(13)?,
                })
            })
            .optional()?)
        })
        .await
    }

    async fn outbox_busy_lanes(&self) -> Result<Vec<String>, StoreError> {
        self.read(|c| {
            let sql = format!("SELECT DISTINCT lane FROM outbox WHERE lane IS NOT NULL AND state IN {ON_ITS_WAY}");
            let mut statement = c.prepare_cached(&sql)?;
            let lanes = statement.query_map([], |r| r.get(0))?.collect::<Result<Vec<String>, _>>()?;
            Ok(lanes)
        })
        .await
    }

    async fn outbox_begin_attempt(&self, key: &str, marked: bool) -> Result<(), StoreError> {
        let key = key.to_string();
        self.write(move |c| {
            c.run(
                "UPDATE outbox SET state = 'sending', attempts = attempts + 1, resent_marked = resent_marked OR ?2, updated_at = ?3 \
                 WHERE idempotency_key = ?1",
                params![key, marked, now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    async fn outbox_end_attempt(&self, key: &str, end: AttemptEnd) -> Result<(), StoreError> {
        let key = key.to_string();
        self.write(move |c| {
            let now = now_ms();
            match end {
                // Delivered: the record stays, the copy of the message to resend is no longer needed.
                AttemptEnd::Sent { platform_message_id } => c.run(
                    "UPDATE outbox SET state = 'sent', platform_message_id = ?2, error = NULL, message = NULL, updated_at = ?3 \
                     WHERE idempotency_key = ?1",
                    params![key, platform_message_id, now],
                )?,
                AttemptEnd::RetryAt { at, error } => c.run(
                    "UPDATE outbox SET state = 'pending', next_attempt_at = ?2, error = ?3, updated_at = ?4 WHERE idempotency_key = ?1",
                    params![key, at, error, now],
                )?,
                AttemptEnd::Ambiguous { at, detail } => c.run(
                    "UPDATE outbox SET state = 'ambiguous', next_attempt_at = ?2, error = ?3, updated_at = ?4 WHERE idempotency_key = ?1",
                    params![key, at, detail, now],
                )?,
                AttemptEnd::Dead { reason } => set_state(c, &key, "dead", &reason, now)?,
                AttemptEnd::Closed { reason } => set_state(c, &key, "failed", &reason, now)?,
            };
            Ok(())
        })
        .await
    }

    async fn outbox_get(&self, key: &str) -> Result<Option<OutboxRow>, StoreError> {
        let key = key.to_string();
        self.read(move |c| {
            Ok(c.one(
                "SELECT idempotency_key, target, body, state, attempts, platform_message_id, error FROM outbox WHERE idempotency_key = ?1",
                [key],
                |r| {
                    Ok(OutboxRow {
                        idempotency_key: r.get(0)?,
                        target: r.get(1)?,
                        body: r.get(2)?,
                        state: r.get(3)?,
                        attempts: r.get(4)?,
                        platform_message_id: r.get(5)?,
                        error: r.get(6)?,
                    })
                },
            )
            .optional()?)
        })
        .await
    }

    async fn outbox_dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        self.read(move |c| {
            let mut statement = c.prepare_cached(
                "SELECT rowid, idempotency_key, platform, target, body, error, attempts, created_at, updated_at FROM outbox \
                 WHERE state = 'dead' ORDER BY updated_at DESC, rowid DESC LIMIT ?1",
            )?;
            let rows = statement
                .query_map([limit as i64], |r| {
                    Ok(DeadLetter {
                        id: r.get(0)?,
                        key: r.get(1)?,
                        platform: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                        target: r.get(3)?,
                        body: r.get(4)?,
                        reason: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
                        attempts: r.get(6)?,
                        created_at: r.get(7)?,
                        updated_at: r.get(8)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    async fn outbox_requeue(&self, id: i64, deadline_ms: i64) -> Result<Option<String>, StoreError> {
        self.write(move |c| {
            let now = now_ms();
            // A part resent by hand is a fresh delivery: no mark, attempts and deadline anew; it
            // keeps its place in its lane's order (its rowid).
            let changed = c.run(
                "UPDATE outbox SET state = 'pending', attempts = 0, resent_marked = 0, error = NULL, next_attempt_at = ?2, \
                 deadline = ?3, created_at = ?2, updated_at = ?2 WHERE rowid = ?1 AND state = 'dead' AND message IS NOT NULL",
                params![id, now, deadline_ms],
            )?;
            if changed == 0 {
                return Ok(None);
            }
            Ok(c.one("SELECT lane FROM outbox WHERE rowid = ?1", [id], |r| r.get(0))?)
        })
        .await
    }

    async fn outbox_drop(&self, id: i64) -> Result<bool, StoreError> {
        self.write(move |c| {
            let changed =
                c.run("UPDATE outbox SET state = 'dropped', updated_at = ?2 WHERE rowid = ?1 AND state = 'dead'", params![id, now_ms()])?;
            Ok(changed == 1)
        })
        .await
    }

    async fn outbox_prune(&self, finished: Duration, dead: Duration) -> Result<usize, StoreError> {
        self.write(move |c| {
            let now = now_ms();
            let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
            let gone = c.run(
                "DELETE FROM outbox WHERE (state IN ('sent', 'dropped', 'failed') AND updated_at < ?1) OR (state = 'dead' AND updated_at < ?2)",
                params![now.saturating_sub(ms(finished)), now.saturating_sub(ms(dead))],
            )?;
            Ok(gone)
        })
        .await
    }

    async fn outbox_summary(&self) -> Result<Vec<QueueSummary>, StoreError> {
        self.read(|c| {
            let sql = format!(
                "SELECT platform, SUM(state IN {ON_ITS_WAY}), SUM(state = 'dead'), MIN(CASE WHEN state IN {ON_ITS_WAY} THEN created_at END) \
                 FROM outbox WHERE platform IS NOT NULL AND state IN ('pending', 'sending', 'ambiguous', 'dead') GROUP BY platform ORDER BY platform"
            );
            let mut statement = c.prepare_cached(&sql)?;
            let rows = statement
                .query_map([], |r| {
                    Ok(QueueSummary {
                        platform: r.get(0)?,
                        pending: r.get::<_, i64>(1)? as u64,
                        dead: r.get::<_, i64>(2)? as u64,
                        oldest_pending_at: r.get(3)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }
}

fn enqueue_one(c: &Connection, row: &NewOutboxRow) -> Result<Queued, StoreError> {
    let now = now_ms();
    let inserted = c.run(
        "INSERT OR IGNORE INTO outbox (idempotency_key, target, body, state, created_at, updated_at, lane, platform, message, \
         next_attempt_at, deadline, notify_on_death, lead) VALUES (?1, ?2, ?3, 'pending', ?4, ?4, ?5, ?6, ?7, ?4, ?8, ?9, ?10)",
        params![row.key, row.target, row.body, now, row.lane, row.platform, row.message, row.deadline_ms, row.notify_on_death, row.lead],
    )?;
    if inserted == 1 {
        return Ok(Queued::New);
    }
    let (state, message_id, error): (String, Option<String>, Option<String>) =
        c.one("SELECT state, platform_message_id, error FROM outbox WHERE idempotency_key = ?1", [&row.key], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    Ok(Queued::from_stored(&state, message_id, error))
}

fn set_state(c: &Connection, key: &str, state: &str, error: &str, now: i64) -> rusqlite::Result<usize> {
    c.run("UPDATE outbox SET state = ?2, error = ?3, updated_at = ?4 WHERE idempotency_key = ?1", params![key, state, error, now])
}
