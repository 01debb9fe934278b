//! Session claims: with a store shared by replicas, a platform served where its events are
//! accepted (the API server: every replica answers the requests it took) can have two requests of
//! one conversation land on two replicas at once. Each such turn runs under the claim
//! `session:<key>` (`store::Claims`), taken before the turn starts and given back when it ends,
//! so one session's turns still run one at a time, in whichever replica; a turn that finds the
//! claim held waits for it, as a message waits for the running turn in one process.
//!
//! The claim is renewed every third of the lease TTL while the turn runs, and its clock is held
//! beside the tenures' ([`Tenures::hold_claim`]): a claim that cannot be renewed within two
//! thirds of the TTL fences the turn's writes, and once lost stops the gateway, as a lost tenure
//! does, before another replica could take the session. A claim is renewed only while its clock
//! is still valid: after a lapse it is not taken back (another replica may have run a turn
//! meanwhile), it is lost. Claims are rows that are deleted when given back: one per running
//! turn, none left per conversation.

use super::TenureClock;
use super::tenures::Tenures;
use crate::store::Claims;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often a turn waiting for its session's claim asks again.
const WAIT_STEP: Duration = Duration::from_millis(100);

/// What this replica takes session claims with.
pub(crate) struct SessionClaims {
    claims: Arc<dyn Claims>,
    /// This replica's name, as in the lease table.
    holder: String,
    ttl: Duration,
    tenures: Arc<Tenures>,
}

/// The gateway stopped while a turn waited for its session's claim.
#[derive(Debug)]
pub(crate) struct Stopped;

/// A session claim held by a running turn; give it back with [`HeldSession::release`].
pub(crate) struct HeldSession {
    name: String,
    lost: CancellationToken,
    renewing: JoinHandle<()>,
    owner: Arc<SessionClaims>,
    released: bool,
}

impl SessionClaims {
    pub(crate) fn new(claims: Arc<dyn Claims>, holder: String, ttl: Duration, tenures: Arc<Tenures>) -> Arc<SessionClaims> {
        Arc::new(SessionClaims { claims, holder, ttl, tenures })
    }

    /// Whether a turn of `platform` runs under a session claim: its events are served where
    /// accepted, by any replica.
    pub(crate) fn needed_for(&self, platform: &str) -> bool {
        self.tenures.serves_where_accepted(platform)
    }

    /// Take the claim on `session_key`'s turns, waiting while another turn (here or in another
    /// replica) holds it; `None` when `stop` is cancelled first.
    pub(crate) async fn hold(self: &Arc<Self>, session_key: &str, stop: &CancellationToken) -> Option<HeldSession> {
        let name = format!("session:{session_key}");
        let mut warned = false;
        loop {
            let asked = Instant::now();
            match self.claims.claim_take(&name, &self.holder, self.ttl).await {
                Ok(true) => return Some(self.held(name, asked)),
                Ok(false) => {}
                Err(e) if !warned => {
                    warned = true;
                    tracing::warn!(claim = %name, error = %e, "cannot take the session's claim; the turn waits until the store answers");
                }
                Err(_) => {}
            }
            tokio::select! {
                () = stop.cancelled() => return None,
                () = tokio::time::sleep(WAIT_STEP) => {}
            }
        }
    }

    /// [`Self::hold`] when `claims` are given and needed for `platform`: `Ok(None)` when no claim
    /// is needed, `Err(Stopped)` when `stop` came first.
    pub(crate) async fn hold_for(
        claims: Option<&Arc<Self>>,
        platform: &str,
        session_key: &str,
        stop: &CancellationToken,
    ) -> Result<Option<HeldSession>, Stopped> {
        match claims.filter(|claims| claims.needed_for(platform)) {
            Some(claims) => claims.hold(session_key, stop).await.map(Some).ok_or(Stopped),
            None => Ok(None),
        }
    }

    fn held(self: &Arc<Self>, name: String, asked: Instant) -> HeldSession {
        let lost = CancellationToken::new();
        let clock = Arc::new(TenureClock::new(asked, self.ttl * 2 / 3, lost.clone()));
        self.tenures.hold_claim(&name, clock.clone());
        let renewing = tokio::spawn(keep_renewing(self.clone(), name.clone(), clock));
        HeldSession { name, lost, renewing, owner: self.clone(), released: false }
    }
}

impl HeldSession {
    /// The turn ended: the claim is given back, and the session's next turn may run anywhere.
    pub(crate) async fn release(mut self) {
        self.released = true;
        self.renewing.abort();
        self.owner.tenures.end_claim(&self.name);
        self.lost.cancel();
        if let Err(e) = self.owner.claims.claim_release(&self.name, &self.owner.holder).await {
            tracing::warn!(claim = %self.name, error = %e, "cannot give the session's claim back; it expires on its own");
        }
    }
}

impl Drop for HeldSession {
    /// Dropped without [`HeldSession::release`] (the turn's task was torn down): nothing runs
    /// under the claim any more, and it is given back in the background.
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.renewing.abort();
        self.owner.tenures.end_claim(&self.name);
        self.lost.cancel();
        let (owner, name) = (self.owner.clone(), self.name.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = owner.claims.claim_release(&name, &owner.holder).await;
            });
        }
    }
}

/// Renew every third of the TTL while the clock is valid; end the claim (cancel its clock) when a
/// renewal is refused, or none succeeded within the clock's bound.
async fn keep_renewing(owner: Arc<SessionClaims>, name: String, clock: Arc<TenureClock>) {
    let every = owner.ttl / 3;
    loop {
        // After a failed renewal (the last success long ago), retry soon but not at once: the
        // store may be down, and a tight loop would only hammer it and the log.
        let since = clock.since_renewed();
        tokio::time::sleep(every.saturating_sub(since).max(owner.ttl / 15)).await;
        if !clock.valid() {
            // Past its bound: another replica may have taken the session once the claim expired.
            tracing::warn!(claim = %name, "a session's claim went unrenewed past its bound; the turn's writes are refused");
            break;
        }
        let asked = Instant::now();
        let bound = (owner.ttl * 2 / 3).saturating_sub(clock.since_renewed());
        match tokio::time::timeout(bound, owner.claims.claim_take(&name, &owner.holder, owner.ttl)).await {
            Ok(Ok(true)) => clock.renewed(asked),
            Ok(Ok(false)) => {
                tracing::warn!(claim = %name, "a session's claim was taken by another replica; the turn's writes are refused");
                break;
            }
            Ok(Err(e)) => tracing::warn!(claim = %name, error = %e, "renewing a session's claim failed; retrying"),
            Err(_) => {}
        }
    }
    clock.lost.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    async fn replica(store: &Arc<SqliteStore>, name: &str) -> (Arc<SessionClaims>, Arc<Tenures>) {
        let tenures = Arc::new(Tenures::default());
        tenures.share(Box::new(|_| Box::pin(async {})));
        tenures.serve_where_accepted("api_server");
        (SessionClaims::new(store.clone(), name.into(), Duration::from_secs(3), tenures.clone()), tenures)
    }

    /// Two replicas' turns of one session run one after the other; another session's turn does
    /// not wait; a claim given back lets the waiting turn in at once.
    #[tokio::test]
    async fn one_sessions_turns_run_one_at_a_time_across_replicas() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let ((a, a_tenures), (b, _)) = (replica(&store, "replica-a").await, replica(&store, "replica-b").await);
        assert!(a.needed_for("api_server") && !a.needed_for("telegram"), "only a platform served where accepted");
        let stop = CancellationToken::new();
        let unneeded = SessionClaims::hold_for(Some(&a), "telegram", "telegram:c1", &stop).await;
        assert!(matches!(unneeded, Ok(None)), "a platform served under its lease takes no claim");
        let first = a.hold("api_server:c1", &stop).await.unwrap();
        assert!(a_tenures.intact_after_lapse().await);

        let waiting = tokio::spawn({
            let (b, stop) = (b.clone(), stop.clone());
            async move { b.hold("api_server:c1", &stop).await }
        });
        let other = b.hold("api_server:c2", &stop).await.expect("another session does not wait");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(!waiting.is_finished(), "the same session's turn waits in the other replica");
        first.release().await;
        let second = tokio::time::timeout(Duration::from_secs(2), waiting).await.expect("let in once given back").unwrap();
        assert!(second.is_some());
        other.release().await;
        second.unwrap().release().await;
        assert_eq!(store.claim_holder("session:api_server:c1").await.unwrap(), None, "no claim row is left");

        // A turn waiting for its claim when the gateway stops never runs.
        let _held = a.hold("api_server:c3", &stop).await.unwrap();
        let waiting = tokio::spawn({
            let (b, stop) = (b.clone(), stop.clone());
            async move { b.hold("api_server:c3", &stop).await }
        });
        stop.cancel();
        assert!(waiting.await.unwrap().is_none());
    }

    /// A store that grants the claim, then fails every renewal at once (connection refused).
    #[derive(Default)]
    struct Failing {
        calls: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Claims for Failing {
        async fn claim_take(&self, _name: &str, _holder: &str, _ttl: Duration) -> Result<bool, crate::store::StoreError> {
            match self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
                0 => Ok(true),
                _ => Err(crate::store::StoreError::Closed),
            }
        }
        async fn claim_release(&self, _name: &str, _holder: &str) -> Result<bool, crate::store::StoreError> {
            Err(crate::store::StoreError::Closed)
        }
        async fn claim_holder(&self, _name: &str) -> Result<Option<String>, crate::store::StoreError> {
            Err(crate::store::StoreError::Closed)
        }
    }

    /// While the store refuses every renewal, the claim is tried again a few times within its
    /// bound, not in a tight loop hammering the store and the log, and then given up: the turn's
    /// writes are refused and the gateway stops.
    #[tokio::test]
    async fn renewals_the_store_refuses_are_retried_a_few_times_then_the_claim_is_given_up() {
        let store = Arc::new(Failing::default());
        let tenures = Arc::new(Tenures::default());
        tenures.share(Box::new(|_| Box::pin(async {})));
        tenures.serve_where_accepted("api_server");
        let claims = SessionClaims::new(store.clone(), "replica-a".into(), Duration::from_secs(3), tenures.clone());
        let _held = claims.hold("api_server:c1", &CancellationToken::new()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), tenures.lost()).await.expect("given up within its bound");
        let renewals = store.calls.load(std::sync::atomic::Ordering::Relaxed) - 1;
        assert!((2..=8).contains(&renewals), "retried every TTL/15 between the first renewal and the bound: {renewals}");
    }

    /// A claim another replica took (this one's expired while it was frozen) fences the turn's
    /// writes and stops the gateway.
    #[tokio::test]
    async fn a_claim_taken_by_another_replica_fences_the_turn_and_stops_the_gateway() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let (a, a_tenures) = replica(&store, "replica-a").await;
        let held = a.hold("api_server:c1", &CancellationToken::new()).await.unwrap();
        // The row says another replica holds it now, as after an expiry and a takeover.
        store.claim_release("session:api_server:c1", "replica-a").await.unwrap();
        assert!(store.claim_take("session:api_server:c1", "replica-b", Duration::from_secs(60)).await.unwrap());
        tokio::time::timeout(Duration::from_secs(5), a_tenures.lost()).await.expect("the renewal is refused: the gateway stops");
        assert!(!a_tenures.intact_after_lapse().await, "the turn's writes are refused");
        drop(held);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            store.claim_holder("session:api_server:c1").await.unwrap().as_deref(),
            Some("replica-b"),
            "not given back for the other"
        );
    }
}
