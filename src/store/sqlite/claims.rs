//! Claims in SQLite: one row per claimed name. Taking is a single upsert whose `WHERE` lets it
//! through only for the same holder or an expired claim, so of concurrent takers exactly one
//! changes the row (the writer thread runs them one after another anyway).

use super::{CachedStatements, SqliteStore, now_ms};
use crate::store::{Claims, StoreError};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use std::time::Duration;

#[async_trait]
impl Claims for SqliteStore {
    async fn claim_take(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let (name, holder) = (name.to_string(), holder.to_string());
        // A TTL too long for an i64 of milliseconds is "for ever", not an overflow.
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.write(move |c| {
            let now = now_ms();
            let changed = c.run(
                "INSERT INTO claims (name, holder, expires_at, updated_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, updated_at = excluded.updated_at
                 WHERE claims.holder = excluded.holder OR claims.expires_at <= ?4",
                params![name, holder, now.saturating_add(ttl_ms), now],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    async fn claim_release(&self, name: &str, holder: &str) -> Result<bool, StoreError> {
        let (name, holder) = (name.to_string(), holder.to_string());
        self.write(move |c| Ok(c.run("DELETE FROM claims WHERE name = ?1 AND holder = ?2", params![name, holder])? == 1)).await
    }

    async fn claim_holder(&self, name: &str) -> Result<Option<String>, StoreError> {
        let name = name.to_string();
        self.read(move |c| {
            Ok(c.one("SELECT holder FROM claims WHERE name = ?1 AND expires_at > ?2", params![name, now_ms()], |r| r.get(0)).optional()?)
        })
        .await
    }
}
