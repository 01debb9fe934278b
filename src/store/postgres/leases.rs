//! Leases and fenced cursors in PostgreSQL, where replicas race for them. Each operation is one
//! statement, atomic on its own: taking a lease is an upsert whose `WHERE` lets it through only
//! for its holder or an expired lease (of concurrent takers, the row lock makes one win), and a
//! cursor write joins the lease row, so it lands only under the live tenure it names.
//!
//! "Now" is the database server's clock (`now()`, the statement's transaction start), so
//! replicas on machines whose clocks differ agree on when a lease ran out.

use super::PostgresStore;
use crate::store::clock::to_time;
use crate::store::{Lease, Leases, StoreError};
use async_trait::async_trait;
use std::time::Duration;

/// A TTL too long for an i64 of milliseconds is "for ever", not an overflow.
fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

fn lease(row: &tokio_postgres::Row) -> Result<Lease, StoreError> {
    Ok(Lease {
        name: row.try_get(0)?,
        holder: row.try_get(1)?,
        token: row.try_get(2)?,
        since: to_time(row.try_get(3)?),
        expires_at: to_time(row.try_get(4)?),
    })
}

#[async_trait]
impl Leases for PostgresStore {
    async fn lease_acquire(&self, name: &str, holder: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        let client = self.client().await?;
        // The same holder's live tenure is extended (same token, same start); a free or expired
        // lease starts a new tenure with the next token.
        let statement = client
            .prepare_cached(
                "WITH clock AS (SELECT (extract(epoch FROM now()) * 1000)::bigint AS now)
                 INSERT INTO leases AS l (name, holder, token, since, expires_at)
                 SELECT $1, $2, 1, clock.now, clock.now + $3 FROM clock
                 ON CONFLICT (name) DO UPDATE SET
                     token = CASE WHEN l.holder = excluded.holder AND l.expires_at > excluded.since THEN l.token ELSE l.token + 1 END,
                     since = CASE WHEN l.holder = excluded.holder AND l.expires_at > excluded.since THEN l.since ELSE excluded.since END,
                     holder = excluded.holder,
                     expires_at = excluded.expires_at
                 WHERE l.holder = excluded.holder OR l.expires_at <= excluded.since
                 RETURNING name, holder, token, since, expires_at",
            )
            .await?;
        let row = client.query_opt(&statement, &[&name, &holder, &ttl_ms(ttl)]).await?;
        row.as_ref().map(lease).transpose()
    }

    async fn lease_renew(&self, name: &str, holder: &str, token: i64, ttl: Duration) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "WITH clock AS (SELECT (extract(epoch FROM now()) * 1000)::bigint AS now)
                 UPDATE leases SET expires_at = clock.now + $4 FROM clock
                 WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > clock.now",
            )
            .await?;
        Ok(client.execute(&statement, &[&name, &holder, &token, &ttl_ms(ttl)]).await? == 1)
    }

    async fn lease_release(&self, name: &str, holder: &str, token: i64) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "WITH clock AS (SELECT (extract(epoch FROM now()) * 1000)::bigint AS now)
                 UPDATE leases SET expires_at = clock.now FROM clock
                 WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > clock.now",
            )
            .await?;
        Ok(client.execute(&statement, &[&name, &holder, &token]).await? == 1)
    }

    async fn leases(&self) -> Result<Vec<Lease>, StoreError> {
        let client = self.client().await?;
        let statement = client.prepare_cached("SELECT name, holder, token, since, expires_at FROM leases ORDER BY name").await?;
        client.query(&statement, &[]).await?.iter().map(lease).collect()
    }

    async fn cursor_get(&self, name: &str) -> Result<Option<String>, StoreError> {
        let client = self.client().await?;
        let statement = client.prepare_cached("SELECT value FROM cursors WHERE name = $1").await?;
        Ok(client.query_opt(&statement, &[&name]).await?.map(|row| row.try_get(0)).transpose()?)
    }

    async fn cursor_put(&self, lease: &str, token: i64, name: &str, value: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "WITH clock AS (SELECT (extract(epoch FROM now()) * 1000)::bigint AS now)
                 INSERT INTO cursors AS c (name, value, token, updated_at)
                 SELECT $3, $4, $2, clock.now FROM leases, clock WHERE leases.name = $1 AND leases.token = $2 AND leases.expires_at > clock.now
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value, token = excluded.token, updated_at = excluded.updated_at
                 WHERE c.token <= excluded.token",
            )
            .await?;
        Ok(client.execute(&statement, &[&lease, &token, &name, &value]).await? == 1)
    }
}
