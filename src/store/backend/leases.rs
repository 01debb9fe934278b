//! Leases: work that only one replica may do at a time (hold a platform's connection: Telegram
//! long polling, Discord's gateway, Slack Socket Mode, Matrix sync, IMAP IDLE), each held under a
//! fencing token, and the cursors that work moves, written only under a live lease.
//!
//! A holder renews its lease every few seconds; one that cannot stops at once. A standby takes
//! a lease when it expires, and every new tenure gets a larger token. A cursor write names the
//! token it was made under and is refused when that tenure is over, and a cursor is never
//! overwritten by a write from an older tenure: a paused or partitioned holder that wakes up can
//! neither move a cursor back nor forward.
//!
//! Times are the store's own clock (the database server's, for a shared store), so replicas
//! whose clocks differ still agree on when a lease ran out.

use crate::store::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// One lease as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub name: String,
    pub holder: String,
    /// Grows with every new tenure; a write made under a smaller token is stale.
    pub token: i64,
    /// When this tenure began.
    pub since: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

#[async_trait]
pub trait Leases: Send + Sync {
    /// Take `name` for `holder` for `ttl`: when it is free or expired, a new tenure with a token
    /// larger than any before; when `holder` already holds it, the same tenure extended. `None`
    /// while another holder's lease is unexpired. Atomic: of concurrent takers, one wins.
    async fn lease_acquire(&self, name: &str, holder: &str, ttl: Duration) -> Result<Option<Lease>, StoreError>;

    /// Extend the tenure `token` of `holder` to `ttl` from now; `false` when it is over (expired,
    /// taken over, released): the holder must stop the work at once.
    async fn lease_renew(&self, name: &str, holder: &str, token: i64, ttl: Duration) -> Result<bool, StoreError>;

    /// End the tenure `token` of `holder` now, so a standby need not wait for it to expire;
    /// `false` when it was already over.
    async fn lease_release(&self, name: &str, holder: &str, token: i64) -> Result<bool, StoreError>;

    /// Every lease, held or expired, by name.
    async fn leases(&self) -> Result<Vec<Lease>, StoreError>;

    /// The cursor stored under `name`.
    async fn cursor_get(&self, name: &str) -> Result<Option<String>, StoreError>;

    /// Store `value` as cursor `name`, only while tenure `token` of lease `lease` is current and
    /// unexpired, and never over a value written under a larger token. `false`: fenced out,
    /// nothing written.
    async fn cursor_put(&self, lease: &str, token: i64, name: &str, value: &str) -> Result<bool, StoreError>;
}
