//! Pending approvals in PostgreSQL: a row per prompt, open until answered. Closing marks the row
//! with its outcome rather than deleting it, so the history of who was asked what stays
//! inspectable. Each close is one conditional `UPDATE`, so an approval closes once even when
//! replicas race to answer it.

use super::PostgresStore;
use crate::store::clock::{now_ms, to_time};
use crate::store::{Approvals, PendingApproval, StoreError};
use async_trait::async_trait;
use hermes_adapter::{ChatTarget, Platform};
use tokio_postgres::Row;

#[async_trait]
impl Approvals for PostgresStore {
    async fn approval_open(&self, pending: &PendingApproval) -> Result<(), StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "INSERT INTO approvals (id, session_key, platform, chat_id, thread_id, command, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .await?;
        let target = &pending.target;
        let created_at = pending.created_at.timestamp_millis();
        client
            .execute(
                &statement,
                &[
                    &pending.id,
                    &pending.session_key,
                    &target.platform.as_str(),
                    &target.chat_id,
                    &target.thread_id,
                    &pending.command,
                    &created_at,
                ],
            )
            .await?;
        Ok(())
    }

    async fn approval_close(&self, id: &str, outcome: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let statement =
            client.prepare_cached("UPDATE approvals SET outcome = $2, closed_at = $3 WHERE id = $1 AND outcome IS NULL").await?;
        Ok(client.execute(&statement, &[&id, &outcome, &now_ms()]).await? == 1)
    }

    async fn approval_close_orphans(&self, outcome: &str, platform: Option<&str>) -> Result<Vec<PendingApproval>, StoreError> {
        // One statement closes and returns the same rows, so an approval closed in between by
        // someone else is neither closed twice nor reported. `RETURNING` has no order: sorted
        // after (by id where two share a millisecond; SQLite breaks that tie by insertion order).
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "WITH closed AS (
                     UPDATE approvals SET outcome = $1, closed_at = $2
                     WHERE outcome IS NULL AND ($3::text IS NULL OR platform = $3)
                     RETURNING id, session_key, platform, chat_id, thread_id, command, created_at)
                 SELECT * FROM closed ORDER BY created_at, id",
            )
            .await?;
        client.query(&statement, &[&outcome, &now_ms(), &platform]).await?.iter().map(row_to_pending).collect()
    }
}

fn row_to_pending(r: &Row) -> Result<PendingApproval, StoreError> {
    Ok(PendingApproval {
        id: r.try_get(0)?,
        session_key: r.try_get(1)?,
        target: ChatTarget { platform: Platform::new(r.try_get::<_, &str>(2)?), chat_id: r.try_get(3)?, thread_id: r.try_get(4)? },
        command: r.try_get(5)?,
        created_at: to_time(r.try_get(6)?),
    })
}
