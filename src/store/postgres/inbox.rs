//! The inbox in PostgreSQL: `INSERT … ON CONFLICT DO NOTHING` on the event id is what drops a
//! platform's redelivery, and of replicas accepting one id at once exactly one inserts it (the
//! primary key decides). Every state change is one conditional `UPDATE`, atomic on its own. An
//! accepted row is announced on the inbox's channel (`wakeups`) as it commits.

use super::PostgresStore;
use crate::store::clock::{now_ms, to_time};
use crate::store::{Inbox, InboxRow, InboxState, StoreError};
use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use std::time::Duration;
use tokio_postgres::Row;

/// Insert the event unless its id is stored, and only when it was inserted, announce it on the
/// inbox's channel in the same statement: the notification goes out when the row is committed,
/// never for a row that is not, and never for a redelivery. It names the platform and the id
/// (`$5` the separator, [`crate::store::Heard::accepted`] reads them), so a replica that does
/// not serve the platform need not read the inbox. (A payload is at most 8000 bytes; a longer
/// one is announced empty, which listeners read as "look at the inbox".)
static ACCEPT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH accepted AS (INSERT INTO inbox (event_id, platform, payload, state, received_at, updated_at) \
         VALUES ($1, $2, $3, 'accepted', $4, $4) ON CONFLICT (event_id) DO NOTHING RETURNING platform || $5::text || event_id AS ring) \
         SELECT pg_notify({}, CASE WHEN octet_length(ring) < 4000 THEN ring ELSE '' END) FROM accepted",
        super::wakeups::INBOX_CHANNEL
    )
});

const COLUMNS: &str = "event_id, platform, payload, state, attempts, error, received_at";

#[async_trait]
impl Inbox for PostgresStore {
    async fn inbox_set_state(&self, event_id: &str, state: InboxState, error: Option<&str>) -> Result<(), StoreError> {
        let client = self.client().await?;
        let statement = client.prepare_cached("UPDATE inbox SET state = $2, error = $3, updated_at = $4 WHERE event_id = $1").await?;
        client.execute(&statement, &[&event_id, &state.as_str(), &error, &now_ms()]).await?;
        Ok(())
    }

    async fn inbox_accept(&self, event_id: &str, platform: &str, payload: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        accept(&client, event_id, platform, payload, now_ms()).await
    }

    async fn inbox_accept_all(&self, events: Vec<(String, String, String)>) -> Result<Vec<bool>, StoreError> {
        // One transaction: all or none, as the trait promises.
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let now = now_ms();
        let mut inserted = Vec::with_capacity(events.len());
        for (event_id, platform, payload) in &events {
            inserted.push(accept(&tx, event_id, platform, payload, now).await?);
        }
        tx.commit().await?;
        Ok(inserted)
    }

    async fn inbox_mark_processing(&self, event_id: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        mark_processing(&client, event_id).await
    }

    async fn inbox_poisoned(&self, limit: usize) -> Result<Vec<InboxRow>, StoreError> {
        let client = self.client().await?;
        let sql = format!("SELECT {COLUMNS} FROM inbox WHERE state = 'poisoned' ORDER BY updated_at DESC, id DESC LIMIT $1");
        let statement = client.prepare_cached(&sql).await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        client.query(&statement, &[&limit]).await?.iter().map(row_to_inbox).collect()
    }

    async fn inbox_unfinished(&self) -> Result<Vec<InboxRow>, StoreError> {
        let client = self.client().await?;
        let sql = format!("SELECT {COLUMNS} FROM inbox WHERE state IN ('accepted', 'processing') ORDER BY received_at, id");
        let statement = client.prepare_cached(&sql).await?;
        client.query(&statement, &[]).await?.iter().map(row_to_inbox).collect()
    }

    async fn inbox_unfinished_of(&self, platforms: &[String]) -> Result<Vec<InboxRow>, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT {COLUMNS} FROM inbox WHERE state IN ('accepted', 'processing') AND platform = ANY($1) ORDER BY received_at, id"
        );
        let statement = client.prepare_cached(&sql).await?;
        client.query(&statement, &[&platforms]).await?.iter().map(row_to_inbox).collect()
    }

    async fn inbox_get(&self, event_id: &str) -> Result<Option<InboxRow>, StoreError> {
        let client = self.client().await?;
        let statement = client.prepare_cached(&format!("SELECT {COLUMNS} FROM inbox WHERE event_id = $1")).await?;
        client.query_opt(&statement, &[&event_id]).await?.as_ref().map(row_to_inbox).transpose()
    }

    async fn inbox_prune(&self, keep: Duration) -> Result<usize, StoreError> {
        let cutoff = now_ms().saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX));
        let client = self.client().await?;
        let statement = client.prepare_cached("DELETE FROM inbox WHERE state IN ('done', 'failed') AND updated_at <= $1").await?;
        Ok(client.execute(&statement, &[&cutoff]).await? as usize)
    }
}

/// Store one event as accepted; `false` when its id was already stored (or stored by another
/// replica first: the primary key makes a concurrent insert wait for and see the winner).
async fn accept(c: &impl GenericClient, event_id: &str, platform: &str, payload: &str, now: i64) -> Result<bool, StoreError> {
    let statement = c.prepare_cached(&ACCEPT).await?;
    let separator = crate::store::backend::ACCEPTED_SEPARATOR.to_string();
    Ok(c.query(&statement, &[&event_id, &platform, &payload, &now, &separator]).await?.len() == 1)
}

/// One more attempt at the event starts (a finished event stays finished). On a connection or
/// inside a caller's transaction (a turn's opening).
pub(super) async fn mark_processing(c: &impl GenericClient, event_id: &str) -> Result<(), StoreError> {
    let statement = c
        .prepare_cached(
            "UPDATE inbox SET state = 'processing', attempts = attempts + 1, updated_at = $2 \
             WHERE event_id = $1 AND state IN ('accepted', 'processing')",
        )
        .await?;
    c.execute(&statement, &[&event_id, &now_ms()]).await?;
    Ok(())
}

fn row_to_inbox(r: &Row) -> Result<InboxRow, StoreError> {
    Ok(InboxRow {
        event_id: r.try_get(0)?,
        platform: r.try_get(1)?,
        payload: r.try_get(2)?,
        state: InboxState::parse(r.try_get(3)?)?,
        attempts: r.try_get(4)?,
        error: r.try_get(5)?,
        received_at: to_time(r.try_get(6)?),
    })
}
