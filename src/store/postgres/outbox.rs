//! The outbox in PostgreSQL: `INSERT … ON CONFLICT DO NOTHING` on the idempotency key queues a
//! part (an existing row says what happened to it before); a lane's head is its oldest row still
//! on its way, by the identity column `id`, which only grows. Every change to a part is one
//! conditional `UPDATE` (atomic on its own); queueing several parts is one transaction.

use super::PostgresStore;
use crate::store::clock::now_ms;
use crate::store::{AttemptEnd, DeadLetter, LaneHead, NewOutboxRow, Outbox, OutboxRow, QueueSummary, Queued, StoreError};
use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Transaction};
use std::time::Duration;
use tokio_postgres::Row;

/// The states of a part still on its way.
const ON_ITS_WAY: &str = "('pending', 'sending', 'ambiguous')";

/// How often a part is queued again after the row its key collided with vanished (pruned by
/// another replica between the insert and the read); more would mean something else is wrong.
const ENQUEUE_TRIES: usize = 3;

#[async_trait]
impl Outbox for PostgresStore {
    async fn outbox_enqueue(&self, rows: Vec<NewOutboxRow>) -> Result<Vec<Queued>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let mut queued = Vec::with_capacity(rows.len());
        for row in &rows {
            queued.push(enqueue_one(&tx, row).await?);
        }
        tx.commit().await?;
        Ok(queued)
    }

    async fn outbox_lane_head(&self, lane: &str) -> Result<Option<LaneHead>, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT id, idempotency_key, platform, message, state, attempts, error, next_attempt_at, created_at, deadline, \
             notify_on_death, lead, resent_marked, updated_at FROM outbox WHERE lane = $1 AND state IN {ON_ITS_WAY} ORDER BY id LIMIT 1"
        );
        let statement = client.prepare_cached(&sql).await?;
        client.query_opt(&statement, &[&lane]).await?.as_ref().map(row_to_head).transpose()
    }

    async fn outbox_busy_lanes(&self) -> Result<Vec<String>, StoreError> {
        let client = self.client().await?;
        let sql = format!("SELECT DISTINCT lane FROM outbox WHERE lane IS NOT NULL AND state IN {ON_ITS_WAY}");
        let statement = client.prepare_cached(&sql).await?;
        Ok(client.query(&statement, &[]).await?.iter().map(|r| r.try_get(0)).collect::<Result<_, _>>()?)
    }

    async fn outbox_begin_attempt(&self, key: &str, marked: bool) -> Result<(), StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "UPDATE outbox SET state = 'sending', attempts = attempts + 1, resent_marked = resent_marked OR $2, updated_at = $3 \
                 WHERE idempotency_key = $1",
            )
            .await?;
        client.execute(&statement, &[&key, &marked, &now_ms()]).await?;
        Ok(())
    }

    async fn outbox_end_attempt(&self, key: &str, end: AttemptEnd) -> Result<(), StoreError> {
        let client = self.client().await?;
        let now = now_ms();
        match end {
            // Delivered: the record stays, the copy of the message to resend is no longer needed.
            AttemptEnd::Sent { platform_message_id } => {
                let statement = client
                    .prepare_cached(
                        "UPDATE outbox SET state = 'sent', platform_message_id = $2, error = NULL, message = NULL, updated_at = $3 \
                         WHERE idempotency_key = $1",
                    )
                    .await?;
                client.execute(&statement, &[&key, &platform_message_id, &now]).await?;
            }
            AttemptEnd::RetryAt { at, error } => retry_at(&client, key, "pending", at, &error, now).await?,
            AttemptEnd::Ambiguous { at, detail } => retry_at(&client, key, "ambiguous", at, &detail, now).await?,
            AttemptEnd::Dead { reason } => set_state(&client, key, "dead", &reason, now).await?,
            AttemptEnd::Closed { reason } => set_state(&client, key, "failed", &reason, now).await?,
        }
        Ok(())
    }

    async fn outbox_get(&self, key: &str) -> Result<Option<OutboxRow>, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "SELECT idempotency_key, target, body, state, attempts, platform_message_id, error FROM outbox WHERE idempotency_key = $1",
            )
            .await?;
        client.query_opt(&statement, &[&key]).await?.as_ref().map(row_to_outbox).transpose()
    }

    async fn outbox_dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "SELECT id, idempotency_key, platform, target, body, error, attempts, created_at, updated_at FROM outbox \
                 WHERE state = 'dead' ORDER BY updated_at DESC, id DESC LIMIT $1",
            )
            .await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        client.query(&statement, &[&limit]).await?.iter().map(row_to_dead_letter).collect()
    }

    async fn outbox_requeue(&self, id: i64, deadline_ms: i64) -> Result<Option<String>, StoreError> {
        // A part resent by hand is a fresh delivery: no mark, attempts and deadline anew; it
        // keeps its place in its lane's order (its id). One statement changes it and names its
        // lane, so two operators resending it at once requeue it once.
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "UPDATE outbox SET state = 'pending', attempts = 0, resent_marked = FALSE, error = NULL, next_attempt_at = $2, \
                 deadline = $3, created_at = $2, updated_at = $2 WHERE id = $1 AND state = 'dead' AND message IS NOT NULL RETURNING lane",
            )
            .await?;
        let requeued = client.query_opt(&statement, &[&id, &now_ms(), &deadline_ms]).await?;
        let lane = requeued.map(|r| r.try_get::<_, Option<String>>(0)).transpose()?.flatten();
        if let Some(lane) = &lane {
            // Resent from the shell: the replica serving its platform sends it at once.
            announce(&client, lane).await?;
        }
        Ok(lane)
    }

    async fn outbox_drop(&self, id: i64) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let statement =
            client.prepare_cached("UPDATE outbox SET state = 'dropped', updated_at = $2 WHERE id = $1 AND state = 'dead'").await?;
        Ok(client.execute(&statement, &[&id, &now_ms()]).await? == 1)
    }

    async fn outbox_summary(&self) -> Result<Vec<QueueSummary>, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT platform, count(*) FILTER (WHERE state IN {ON_ITS_WAY}), count(*) FILTER (WHERE state = 'dead'), \
             min(created_at) FILTER (WHERE state IN {ON_ITS_WAY}) \
             FROM outbox WHERE platform IS NOT NULL AND state IN ('pending', 'sending', 'ambiguous', 'dead') GROUP BY platform ORDER BY platform"
        );
        let statement = client.prepare_cached(&sql).await?;
        client.query(&statement, &[]).await?.iter().map(row_to_summary).collect()
    }

    async fn outbox_prune(&self, finished: Duration, dead: Duration) -> Result<usize, StoreError> {
        let now = now_ms();
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "DELETE FROM outbox WHERE (state IN ('sent', 'dropped', 'failed') AND updated_at < $1) OR (state = 'dead' AND updated_at < $2)",
            )
            .await?;
        Ok(client.execute(&statement, &[&now.saturating_sub(ms(finished)), &now.saturating_sub(ms(dead))]).await? as usize)
    }
}

/// Queue one part inside the caller's transaction and say what was known of its key before.
/// A key already stored (or being stored by another replica: the insert waits for it) is not
/// inserted, and its row is read instead.
async fn enqueue_one(tx: &Transaction<'_>, row: &NewOutboxRow) -> Result<Queued, StoreError> {
    let insert = tx
        .prepare_cached(
            "INSERT INTO outbox (idempotency_key, target, body, state, created_at, updated_at, lane, platform, message, \
             next_attempt_at, deadline, notify_on_death, lead) VALUES ($1, $2, $3, 'pending', $4, $4, $5, $6, $7, $4, $8, $9, $10) \
             ON CONFLICT (idempotency_key) DO NOTHING",
        )
        .await?;
    let known = tx.prepare_cached("SELECT state, platform_message_id, error FROM outbox WHERE idempotency_key = $1").await?;
    for _ in 0..ENQUEUE_TRIES {
        let now = now_ms();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 10] = [
            &row.key,
            &row.target,
            &row.body,
            &now,
            &row.lane,
            &row.platform,
            &row.message,
            &row.deadline_ms,
            &row.notify_on_death,
            &row.lead,
        ];
        if tx.execute(&insert, &params).await? == 1 {
            announce(tx, &row.lane).await?;
            return Ok(Queued::New);
        }
        if let Some(found) = tx.query_opt(&known, &[&row.key]).await? {
            return Ok(Queued::from_stored(found.try_get(0)?, found.try_get(1)?, found.try_get(2)?));
        }
    }
    Err(StoreError::NotCommitted(format!("outbox key {:?} kept colliding with a row that vanished", row.key)))
}

/// Ring the couriers with `lane` (delivered when the transaction commits, never for a part that
/// is not; an overlong lane rings unnamed, which listeners read as "look at the outbox").
async fn announce(c: &impl GenericClient, lane: &str) -> Result<(), StoreError> {
    static NOTIFY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!("SELECT pg_notify({}, CASE WHEN octet_length($1::text) < 4000 THEN $1::text ELSE '' END)", super::wakeups::OUTBOX_CHANNEL)
    });
    let statement = c.prepare_cached(&NOTIFY).await?;
    c.query_one(&statement, &[&lane]).await?;
    Ok(())
}

/// An attempt ended in a failure that may pass: the part waits in `state` until `at`.
async fn retry_at(c: &impl GenericClient, key: &str, state: &str, at: i64, error: &str, now: i64) -> Result<(), StoreError> {
    let statement = c
        .prepare_cached("UPDATE outbox SET state = $2, next_attempt_at = $3, error = $4, updated_at = $5 WHERE idempotency_key = $1")
        .await?;
    c.execute(&statement, &[&key, &state, &at, &error, &now]).await?;
    Ok(())
}

async fn set_state(c: &impl GenericClient, key: &str, state: &str, error: &str, now: i64) -> Result<(), StoreError> {
    let statement = c.prepare_cached("UPDATE outbox SET state = $2, error = $3, updated_at = $4 WHERE idempotency_key = $1").await?;
    c.execute(&statement, &[&key, &state, &error, &now]).await?;
    Ok(())
}

fn row_to_head(r: &Row) -> Result<LaneHead, StoreError> {
    Ok(LaneHead {
        id: r.try_get(0)?,
        key: r.try_get(1)?,
        platform: r.try_get::<_, Option<String>>(2)?.unwrap_or_default(),
        message: r.try_get::<_, Option<String>>(3)?.unwrap_or_default(),
        state: r.try_get(4)?,
        attempts: r.try_get(5)?,
        error: r.try_get(6)?,
        next_attempt_at: r.try_get(7)?,
        created_at: r.try_get(8)?,
        deadline: r.try_get(9)?,
        notify_on_death: r.try_get(10)?,
        lead: r.try_get(11)?,
        resent_marked: r.try_get(12)?,
        updated_at: r.try_get(13)?,
    })
}

fn row_to_outbox(r: &Row) -> Result<OutboxRow, StoreError> {
    Ok(OutboxRow {
        idempotency_key: r.try_get(0)?,
        target: r.try_get(1)?,
        body: r.try_get(2)?,
        state: r.try_get(3)?,
        attempts: r.try_get(4)?,
        platform_message_id: r.try_get(5)?,
        error: r.try_get(6)?,
    })
}

fn row_to_dead_letter(r: &Row) -> Result<DeadLetter, StoreError> {
    Ok(DeadLetter {
        id: r.try_get(0)?,
        key: r.try_get(1)?,
        platform: r.try_get::<_, Option<String>>(2)?.unwrap_or_default(),
        target: r.try_get(3)?,
        body: r.try_get(4)?,
        reason: r.try_get::<_, Option<String>>(5)?.unwrap_or_default(),
        attempts: r.try_get(6)?,
        created_at: r.try_get(7)?,
        updated_at: r.try_get(8)?,
    })
}

fn row_to_summary(r: &Row) -> Result<QueueSummary, StoreError> {
    Ok(QueueSummary {
        platform: r.try_get(0)?,
        pending: r.try_get::<_, i64>(1)?.max(0) as u64,
        dead: r.try_get::<_, i64>(2)?.max(0) as u64,
        oldest_pending_at: r.try_get(3)?,
    })
}
