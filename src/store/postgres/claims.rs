//! Claims in PostgreSQL: one row per name. Taking is one `INSERT … ON CONFLICT DO UPDATE … WHERE`
//! that changes the row only for the same holder or an expired claim; PostgreSQL locks the
//! conflicting row and checks the condition on its latest version, so of replicas taking one
//! claim at once exactly one changes it.
//!
//! Unlike the rest of the store, expiry is measured on the database's clock, not this process's:
//! the holders are different machines, and a replica whose clock ran ahead would otherwise take
//! a claim that is still another's.

use super::PostgresStore;
use crate::store::{Claims, StoreError};
use async_trait::async_trait;
use std::time::Duration;

/// Now on the database's clock, in the store's unit (milliseconds since the epoch).
const DB_NOW_MS: &str = "(extract(epoch FROM statement_timestamp()) * 1000)::bigint";

#[async_trait]
impl Claims for PostgresStore {
    async fn claim_take(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        // A TTL too long for an i64 of milliseconds is "for ever", not an overflow (the sum is
        // clamped in NUMERIC for the same reason).
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let sql = format!(
            "WITH now AS (SELECT {DB_NOW_MS} AS ms)
             INSERT INTO claims (name, holder, expires_at, updated_at)
             SELECT $1::text, $2::text, LEAST(now.ms::numeric + $3::bigint, 9223372036854775807)::bigint, now.ms FROM now
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, updated_at = excluded.updated_at
             WHERE claims.holder = excluded.holder OR claims.expires_at <= excluded.updated_at"
        );
        let client = self.client().await?;
        let statement = client.prepare_cached(&sql).await?;
        Ok(client.execute(&statement, &[&name, &holder, &ttl_ms]).await? == 1)
    }

    async fn claim_release(&self, name: &str, holder: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let statement = client.prepare_cached("DELETE FROM claims WHERE name = $1 AND holder = $2").await?;
        Ok(client.execute(&statement, &[&name, &holder]).await? == 1)
    }

    async fn claim_holder(&self, name: &str) -> Result<Option<String>, StoreError> {
        let client = self.client().await?;
        let statement = client.prepare_cached(&format!("SELECT holder FROM claims WHERE name = $1 AND expires_at > {DB_NOW_MS}")).await?;
        Ok(client.query_opt(&statement, &[&name]).await?.map(|r| r.try_get(0)).transpose()?)
    }
}
