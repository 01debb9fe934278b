//! Claims: durable, exclusive, expiring leases on a name, so that of several gateways (or a
//! gateway and its restarted self) only one runs a given piece of work, such as a cron job's
//! next run. A holder that dies without releasing loses the claim when it expires.

use crate::store::StoreError;
use async_trait::async_trait;
use std::time::Duration;

#[async_trait]
pub trait Claims: Send + Sync {
    /// Take the claim on `name` for `holder` for `ttl` from now. `true` when taken: it was free,
    /// its last holder's time ran out, or `holder` already held it (then its time is extended
    /// to `ttl` from now). `false` while another holder's claim is unexpired. Atomic: of
    /// concurrent takers, one wins.
    async fn claim_take(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError>;

    /// Give the claim up; `false` when `holder` did not hold it (never held, taken over after
    /// it expired, or already released), which leaves it untouched.
    async fn claim_release(&self, name: &str, holder: &str) -> Result<bool, StoreError>;

    /// Who holds the claim now; `None` when it is free or expired.
    async fn claim_holder(&self, name: &str) -> Result<Option<String>, StoreError>;
}
