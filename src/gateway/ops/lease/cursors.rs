//! The fenced cursors of a connection held under a lease: the gateway's side of
//! [`hermes_adapter::Cursors`]. A run started under a tenure gets a handle whose every save is
//! `store::Leases::cursor_put` under that tenure's token, so once another replica holds the
//! connection (the lease expired while this process was paused or cut off) the save is refused,
//! the adapter hears [`CursorWrite::Fenced`] and stops, and the cursor stays where the new holder
//! put it. A refused save also ends the tenure here at once, so the supervisor drops the run
//! without waiting for the next renewal to fail.
//!
//! Cursors are named after the lease, not the adapter's configured name: one account's cursor is
//! the same row in every replica, however each replica's configuration calls the platform, and
//! two accounts on one platform never share one.
//!
//! Without a shared store there is no lease and no handle from here: the run keeps
//! [`Cursors::local`], and the adapter's own state file stays its cursor (one process holds the
//! credential lock, so there is nobody to fence out, and an existing home keeps its position).

use super::{HeldLease, TenureClock};
use crate::store::Leases;
use async_trait::async_trait;
use hermes_adapter::{CursorError, CursorStore, CursorWrite, Cursors};
use std::sync::Arc;

/// Cursors written under one tenure of one connection lease.
struct LeaseCursors {
    leases: Arc<dyn Leases>,
    lease: String,
    token: i64,
    clock: Arc<TenureClock>,
}

impl HeldLease {
    /// The cursors a run started under this tenure reads and moves.
    pub(crate) fn cursors(&self) -> Cursors {
        Cursors::shared(Arc::new(LeaseCursors {
            leases: self.owner.leases.clone(),
            lease: self.name.clone(),
            token: self.token,
            clock: self.clock.clone(),
        }))
    }
}

impl LeaseCursors {
    fn key(&self, name: &str) -> String {
        format!("{}:{name}", self.lease)
    }

    fn fenced(&self, name: &str, why: &str) -> CursorWrite {
        tracing::warn!(lease = %self.lease, token = self.token, cursor = name, "cursor not moved: {why}; stopping the connection");
        // The tenure is over whatever the renewals say: the supervisor drops the run now.
        self.clock.lost.cancel();
        CursorWrite::Fenced
    }
}

#[async_trait]
impl CursorStore for LeaseCursors {
    async fn load(&self, name: &str) -> Result<Option<String>, CursorError> {
        self.leases.cursor_get(&self.key(name)).await.map_err(|e| CursorError::Storage(e.to_string()))
    }

    async fn save(&self, name: &str, value: &str) -> Result<CursorWrite, CursorError> {
        // A process woken past its bound (SIGSTOP, a suspended VM) does not even ask: the store
        // would refuse too, unless it cannot be reached, and then nothing must move either.
        if !self.clock.valid() {
            return Ok(self.fenced(name, "the lease went unrenewed past its bound"));
        }
        match self.leases.cursor_put(&self.lease, self.token, &self.key(name), value).await {
            Ok(true) => Ok(CursorWrite::Saved),
            Ok(false) => Ok(self.fenced(name, "the store refused it: the lease is another replica's now")),
            Err(e) => Err(CursorError::Storage(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::ops::lease::ConnectionLeases;
    use crate::store::SqliteStore;
    use hermes_adapter::cursors::MAX_CURSOR_VALUE_BYTES;
    use std::time::Duration;
    use tokio::time::Instant;
    use tokio_util::sync::CancellationToken;

    async fn store() -> (tempfile::TempDir, Arc<SqliteStore>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        (dir, store)
    }

    async fn hold(store: &Arc<SqliteStore>, replica: &str, ttl: Duration) -> HeldLease {
        let leases = ConnectionLeases::new(store.clone(), replica.into(), ttl);
        leases.acquire("connection:telegram-bot-token-1", &CancellationToken::new(), |_| {}).await.unwrap()
    }

    #[tokio::test]
    async fn a_stale_holder_is_fenced_stops_and_never_moves_the_new_holders_cursor() {
        let (_dir, store) = store().await;
        let old = hold(&store, "replica-a", Duration::from_millis(300)).await;
        let stale = old.cursors();
        assert_eq!(stale.save("offset", "10").await.unwrap(), CursorWrite::Saved);
        assert_eq!(store.cursor_get("connection:telegram-bot-token-1:offset").await.unwrap().as_deref(), Some("10"));

        // Replica A stops renewing (frozen); its lease runs out and B takes the connection.
        old.renewing.abort();
        tokio::time::sleep(Duration::from_millis(400)).await;
        let new = hold(&store, "replica-b", Duration::from_secs(60)).await;
        let fresh = new.cursors();
        assert_eq!(fresh.load("offset").await.unwrap().as_deref(), Some("10"), "B continues from where A stopped");
        assert_eq!(fresh.save("offset", "20").await.unwrap(), CursorWrite::Saved);

        // A wakes: neither back nor forward.
        for value in ["11", "30"] {
            assert_eq!(stale.save("offset", value).await.unwrap(), CursorWrite::Fenced);
        }
        assert!(old.is_lost(), "a fenced save ends the tenure, so the supervisor drops the run");
        assert_eq!(fresh.load("offset").await.unwrap().as_deref(), Some("20"));
        assert!(!new.is_lost());
    }

    #[tokio::test]
    async fn the_store_refusing_ends_the_tenure_at_once() {
        let (_dir, store) = store().await;
        let held = hold(&store, "replica-a", Duration::from_secs(60)).await;
        // Taken over behind this replica's back (its renewals have not noticed yet).
        assert!(store.lease_release("connection:telegram-bot-token-1", "replica-a", held.token).await.unwrap());
        store.lease_acquire("connection:telegram-bot-token-1", "replica-b", Duration::from_secs(60)).await.unwrap().unwrap();
        assert!(!held.is_lost());
        assert_eq!(held.cursors().save("offset", "5").await.unwrap(), CursorWrite::Fenced);
        assert!(held.is_lost());
        assert_eq!(store.cursor_get("connection:telegram-bot-token-1:offset").await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_holder_past_its_bound_writes_nothing_even_where_the_store_would_take_it() {
        let (_dir, store) = store().await;
        let held = hold(&store, "replica-a", Duration::from_secs(60)).await;
        // The local clock says the tenure may be over (as after a SIGSTOP), though the store's
        // lease has not expired yet.
        let cursors = LeaseCursors {
            leases: store.clone(),
            lease: held.name.clone(),
            token: held.token,
            clock: Arc::new(TenureClock::new(Instant::now(), Duration::ZERO, CancellationToken::new())),
        };
        assert_eq!(cursors.save("offset", "5").await.unwrap(), CursorWrite::Fenced);
        assert_eq!(store.cursor_get("connection:telegram-bot-token-1:offset").await.unwrap(), None);
    }

    #[tokio::test]
    async fn hostile_cursors_are_stored_as_data_and_a_huge_one_is_refused_by_name() {
        let (_dir, store) = store().await;
        let held = hold(&store, "replica-a", Duration::from_secs(60)).await;
        let cursors = held.cursors();
        let name = "x'); DELETE FROM leases; --";
        let value = "'\"\\%_$1?1 ␀ \u{202e}😀\n";
        assert_eq!(cursors.save(name, value).await.unwrap(), CursorWrite::Saved);
        assert_eq!(cursors.load(name).await.unwrap().as_deref(), Some(value));
        assert_eq!(store.leases().await.unwrap().len(), 1, "the lease table is untouched");

        let error = cursors.save("next_batch", &"s".repeat(MAX_CURSOR_VALUE_BYTES * 64)).await.unwrap_err();
        assert_eq!(error.to_string(), "cursor `next_batch` refused: the value is 1048576 bytes, more than 16384");
        assert_eq!(cursors.load("next_batch").await.unwrap(), None);
        assert!(!held.is_lost(), "a refused value is the adapter's bug, not a lost tenure");
    }
}
