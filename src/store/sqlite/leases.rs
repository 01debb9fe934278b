//! Leases and fenced cursors in SQLite. The writer thread runs writes one after another, so a
//! lease is read and changed in one write without a race; one process holds them all here, but
//! the gateway's code is the same whichever backend it runs on.

use super::{CachedStatements, SqliteStore, now_ms, to_time};
use crate::store::{Lease, Leases, StoreError};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use std::time::Duration;

/// A TTL too long for an i64 of milliseconds is "for ever", not an overflow.
fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

#[async_trait]
impl Leases for SqliteStore {
    async fn lease_acquire(&self, name: &str, holder: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        let (name, holder, ttl) = (name.to_string(), holder.to_string(), ttl_ms(ttl));
        self.write(move |c| {
            let now = now_ms();
            let expires_at = now.saturating_add(ttl);
            let stored: Option<(String, i64, i64, i64)> = c
                .one("SELECT holder, token, since, expires_at FROM leases WHERE name = ?1", [&name], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .optional()?;
            let (token, since) = match stored {
                Some((current, token, since, until)) if current == holder && until > now => (token, since),
                Some((_, _, _, until)) if until > now => return Ok(None),
                Some((_, token, _, _)) => (token + 1, now),
                None => (1, now),
            };
            c.run(
                "INSERT INTO leases (name, holder, token, since, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, token = excluded.token, since = excluded.since, expires_at = excluded.expires_at",
                params![name, holder, token, since, expires_at],
            )?;
            Ok(Some(Lease { name, holder, token, since: to_time(since), expires_at: to_time(expires_at) }))
        })
        .await
    }

    async fn lease_renew(&self, name: &str, holder: &str, token: i64, ttl: Duration) -> Result<bool, StoreError> {
        let (name, holder, ttl) = (name.to_string(), holder.to_string(), ttl_ms(ttl));
        self.write(move |c| {
            let now = now_ms();
            let changed = c.run(
                "UPDATE leases SET expires_at = ?4 WHERE name = ?1 AND holder = ?2 AND token = ?3 AND expires_at > ?5",
                params![name, holder, token, now.saturating_add(ttl), now],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    async fn lease_release(&self, name: &str, holder: &str, token: i64) -> Result<bool, StoreError> {
        let (name, holder) = (name.to_string(), holder.to_string());
        self.write(move |c| {
            let now = now_ms();
            let changed = c.run(
                "UPDATE leases SET expires_at = ?4 WHERE name = ?1 AND holder = ?2 AND token = ?3 AND expires_at > ?4",
                params![name, holder, token, now],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    async fn leases(&self) -> Result<Vec<Lease>, StoreError> {
        self.read(|c| {
            let mut statement = c.prepare_cached("SELECT name, holder, token, since, expires_at FROM leases ORDER BY name")?;
            let rows = statement.query_map([], |r| {
                Ok(Lease {
                    name: r.get(0)?,
                    holder: r.get(1)?,
                    token: r.get(2)?,
                    since: to_time(r.get(3)?),
                    expires_at: to_time(r.get(4)?),
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    async fn cursor_get(&self, name: &str) -> Result<Option<String>, StoreError> {
        let name = name.to_string();
        self.read(move |c| Ok(c.one("SELECT value FROM cursors WHERE name = ?1", [name], |r| r.get(0)).optional()?)).await
    }

    async fn cursor_put(&self, lease: &str, token: i64, name: &str, value: &str) -> Result<bool, StoreError> {
        let (lease, name, value) = (lease.to_string(), name.to_string(), value.to_string());
        self.write(move |c| {
            let now = now_ms();
            let changed = c.run(
                "INSERT INTO cursors (name, value, token, updated_at)
                 SELECT ?3, ?4, ?2, ?5 FROM leases WHERE name = ?1 AND token = ?2 AND expires_at > ?5
                 ON CONFLICT(name) DO UPDATE SET value = excluded.value, token = excluded.token, updated_at = excluded.updated_at
                 WHERE cursors.token <= excluded.token",
                params![lease, token, name, value, now],
            )?;
            Ok(changed == 1)
        })
        .await
    }
}
