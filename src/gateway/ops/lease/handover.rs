//! Spreading the leases again while every replica lives. Taking a free lease spreads them as
//! replicas start (the one holding fewest takes it first), but a replica that comes back after a
//! crash or a deploy would hold nothing while the survivors hold everything. So a standby that
//! finds a lease held by a replica holding at least two more than itself asks for it, by taking
//! the claim `handover:<lease>` (`store::Claims`); the holder, looking every third of the TTL,
//! hands the platform over once nothing of it runs here ([`Tenures::hand_over`]): its events stop
//! being routed here, the turns already routed finish, no send of it is left in flight, and the
//! lease is released for the standby to take, as at a clean stop. Each hand-over narrows the gap
//! between the two replicas, so the asks end once the leases are spread as evenly as they can be.
//!
//! Turns still running after [`drain_bound`] keep the platform here (its events are routed here
//! again), and asks are not heard for [`cool_down`]: a busy platform moves at a quiet moment,
//! never with a turn cut in two.

use super::ConnectionLeases;
use super::tenures::{Tenures, Unfollowed};
use crate::store::Lease;
use std::sync::Arc;
use std::time::Duration;

/// The claim a standby takes to ask for lease `name`.
fn ask_name(name: &str) -> String {
    format!("handover:{name}")
}

/// How many live leases `holder` holds in `all` (the lease table as read), on this replica's clock.
fn held_by(all: &[Lease], holder: &str) -> usize {
    let now = chrono::Utc::now();
    all.iter().filter(|lease| lease.holder == holder && lease.expires_at > now).count()
}

/// How long a holder asked for a platform waits for its running turns to finish.
pub(crate) fn drain_bound(ttl: Duration) -> Duration {
    ttl * 2
}

/// How long a holder that could not hand a platform over (its turns ran on) ignores asks.
pub(crate) fn cool_down(ttl: Duration) -> Duration {
    ttl * 10
}

/// A hand-over under way: until it is dropped (the lease released and the platform given back,
/// and the asker given time to take it), this replica hands nothing else over. Dropped with the
/// platform not given back, the platform is followed here again.
pub(crate) struct HandingOver {
    _unfollowed: Unfollowed,
    _one_at_a_time: tokio::sync::OwnedMutexGuard<()>,
}

impl ConnectionLeases {
    /// On a standby that could not take `name`: ask its holder to hand it over when the holder
    /// holds at least two leases more than this replica (`all`: the lease table just read).
    /// `true` when asked (again: an ask lasts one TTL).
    pub(super) async fn ask_if_uneven(&self, name: &str, all: &[Lease]) -> bool {
        let Some(claims) = &self.handovers else { return false };
        let now = chrono::Utc::now();
        let Some(lease) = all.iter().find(|lease| lease.name == name && lease.expires_at > now) else { return false };
        let (theirs, ours) = (held_by(all, &lease.holder), self.held_now());
        if lease.holder == self.holder || theirs < ours + 2 {
            return false;
        }
        match claims.claim_take(&ask_name(name), &self.holder, self.ttl).await {
            Ok(true) => {
                tracing::debug!(lease = name, holder = %lease.holder, theirs, ours, "asking the holder of more leases to hand this one over");
                true
            }
            // Another standby asked first.
            Ok(false) => false,
            Err(e) => {
                tracing::debug!(lease = name, "cannot ask for the lease ({e})");
                false
            }
        }
    }

    /// This replica took `name`: its ask, if it made one, is answered.
    pub(super) async fn asked_and_taken(&self, name: &str) {
        if let Some(claims) = &self.handovers
            && let Err(e) = claims.claim_release(&ask_name(name), &self.holder).await
        {
            tracing::debug!(lease = name, "cannot withdraw the ask for the lease ({e}); it runs out by itself");
        }
    }

    /// Resolves with the asker once a replica holding at least two leases fewer than this one
    /// asks for `name`, looked at every third of the TTL (never without hand-overs).
    async fn asked_for(&self, name: &str) -> String {
        let Some(claims) = &self.handovers else { return std::future::pending().await };
        loop {
            tokio::time::sleep(self.ttl / 3).await;
            // Holding one, a hand-over would only move the gap.
            if self.held_now() < 2 {
                continue;
            }
            let Ok(Some(asker)) = claims.claim_holder(&ask_name(name)).await else { continue };
            if asker != self.holder && self.still_uneven(&asker).await {
                return asker;
            }
        }
    }

    /// Whether this replica still holds at least two leases more than `asker`.
    async fn still_uneven(&self, asker: &str) -> bool {
        self.leases.leases().await.is_ok_and(|all| self.held_now() >= held_by(&all, asker) + 2)
    }

    /// Resolves once `platform`, held under lease `name`, was handed over on an ask
    /// ([`Tenures::hand_over`]): the caller releases the lease, stands by, and only then drops
    /// what this returns. This replica hands over one lease at a time, each after it looked
    /// again whether it still holds more than the asker, so two asks answered at once cannot
    /// swap the gap. Never without hand-overs.
    pub(crate) async fn handed_over(&self, name: &str, tenures: &Arc<Tenures>, platform: &str) -> HandingOver {
        loop {
            let asker = self.asked_for(name).await;
            let one_at_a_time = self.handing.clone().lock_owned().await;
            if !self.still_uneven(&asker).await {
                continue;
            }
            tracing::info!(lease = name, asker = %asker, "a replica holding fewer leases asks for this one; handing it over once its running turns finish");
            if let Some(unfollowed) = tenures.hand_over(platform, drain_bound(self.ttl)).await {
                tracing::info!(lease = name, asker = %asker, "handed over");
                return HandingOver { _unfollowed: unfollowed, _one_at_a_time: one_at_a_time };
            }
            drop(one_at_a_time);
            tracing::info!(lease = name, "not handed over: its turns still run; asks are ignored for {}s", cool_down(self.ttl).as_secs());
            tokio::time::sleep(cool_down(self.ttl)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;
    use async_trait::async_trait;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio_util::sync::CancellationToken;

    const TTL: Duration = Duration::from_millis(600);

    /// A gateway's drain whose turns finish when `idle` says so.
    struct Turns {
        idle: AtomicBool,
    }

    #[async_trait]
    impl super::super::tenures::Drain for Turns {
        async fn turns_finished(&self, _platform: &str, bound: Duration) -> bool {
            let deadline = tokio::time::Instant::now() + bound;
            while tokio::time::Instant::now() < deadline {
                if self.idle.load(Ordering::Relaxed) {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            false
        }

        async fn sends_settled(&self, _platform: &str, _bound: Duration) -> bool {
            true
        }
    }

    /// A replica named `name` on `store`, asking and answering hand-overs, its turns idle or not.
    fn replica(store: &Arc<SqliteStore>, name: &str, idle: bool) -> (ConnectionLeases, Arc<Tenures>) {
        let leases = ConnectionLeases::new(store.clone(), name.into(), TTL).with_handovers(store.clone());
        let tenures = Arc::new(Tenures::default());
        tenures.share(Box::new(|_| Box::pin(async {})));
        tenures.drain_with(Arc::new(Turns { idle: AtomicBool::new(idle) }));
        (leases, tenures)
    }

    /// A listener (no credential): its lease is `platform:<name>`, and any replica runs it.
    struct Listener {
        platform: hermes_adapter::Platform,
        caps: hermes_adapter::Capabilities,
    }

    #[async_trait]
    impl hermes_adapter::PlatformAdapter for Listener {
        fn platform(&self) -> &hermes_adapter::Platform {
            &self.platform
        }
        fn capabilities(&self) -> &hermes_adapter::Capabilities {
            &self.caps
        }
        async fn run(&self, _ctx: hermes_adapter::AdapterContext) -> Result<(), hermes_adapter::AdapterError> {
            std::future::pending().await
        }
        async fn send(&self, _msg: &hermes_adapter::OutboundMessage) -> Result<hermes_adapter::SendReceipt, hermes_adapter::SendError> {
            Ok(hermes_adapter::SendReceipt { message_id: None })
        }
    }

    /// Serve `platforms` as a listener's lease holder does (`lease::own`): until stopped,
    /// handing each over when asked and standing by again. Returns a view of the platforms
    /// served and followed here now.
    fn serve(leases: &ConnectionLeases, tenures: &Arc<Tenures>, platforms: &[&str], stop: &CancellationToken) -> impl Fn() -> Vec<String> {
        for platform in platforms {
            let listener = Listener { platform: hermes_adapter::Platform::new(*platform), caps: hermes_adapter::Capabilities::http() };
            drop(super::super::own(leases.clone(), &listener, tenures.clone(), stop.clone()));
        }
        let tenures = tenures.clone();
        move || tenures.platforms()
    }

    async fn until(timeout: Duration, done: impl Fn() -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if done() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        done()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_replica_that_comes_back_is_handed_leases_until_they_are_even() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let stop = CancellationToken::new();
        let (a, a_tenures) = replica(&store, "replica-a", true);
        let all = ["telegram", "discord", "webhook"];
        let a_serves = serve(&a, &a_tenures, &all, &stop);
        assert!(until(TTL * 10, || a_serves().len() == 3).await, "alone, replica-a takes all three");

        // replica-b comes (back): it stands by for all three, and is handed one.
        let (b, b_tenures) = replica(&store, "replica-b", true);
        let b_serves = serve(&b, &b_tenures, &all, &stop);
        let counts = || (a_serves().len(), b_serves().len());
        assert!(until(TTL * 20, || counts() == (2, 1)).await, "handed one over: {:?}", counts());
        // Two against one is as even as three go: nothing moves any more.
        tokio::time::sleep(TTL * 5).await;
        assert_eq!(counts(), (2, 1), "no lease moves once they are even");
        let (on_a, on_b) = (a_serves(), b_serves());
        assert!(on_b.iter().all(|p| !on_a.contains(p)), "each platform served by exactly one replica: {on_a:?} {on_b:?}");
        stop.cancel();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_platform_whose_turns_still_run_is_not_handed_over_and_is_followed_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let stop = CancellationToken::new();
        let (a, a_tenures) = replica(&store, "replica-a", false);
        let a_serves = serve(&a, &a_tenures, &["telegram", "discord"], &stop);
        assert!(until(TTL * 10, || a_serves().len() == 2).await);
        let (b, b_tenures) = replica(&store, "replica-b", true);
        let b_serves = serve(&b, &b_tenures, &["telegram", "discord"], &stop);
        // Asked, replica-a stops following one platform while its turns run, then follows it
        // again when they run on past the bound (and tries the other, which fares the same).
        let unfollowed = || ["telegram", "discord"].into_iter().find(|p| !a_serves().iter().any(|served| served == p));
        assert!(until(TTL * 10, || unfollowed().is_some()).await, "asked: one platform is being handed over");
        let first = unfollowed().unwrap_or_default();
        let followed_again = until(drain_bound(TTL) + TTL * 5, || a_serves().iter().any(|served| served == first)).await;
        assert!(followed_again, "its turns ran on: {first} followed again");
        assert!(b_serves().is_empty(), "nothing was handed over");
        stop.cancel();
    }

    #[tokio::test]
    async fn a_standby_asks_only_a_holder_with_two_leases_more() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let (b, _) = replica(&store, "replica-b", true);
        let lease = |name: &str, holder: &str| Lease {
            name: name.into(),
            holder: holder.into(),
            token: 1,
            since: chrono::Utc::now(),
            expires_at: chrono::Utc::now() + chrono::Duration::seconds(10),
        };
        let one = [lease("platform:webhook", "replica-a")];
        assert!(!b.ask_if_uneven("platform:webhook", &one).await, "one against none: handing it over only moves the gap");
        let mut expired = lease("platform:telegram", "replica-a");
        expired.expires_at = chrono::Utc::now() - chrono::Duration::seconds(1);
        assert!(!b.ask_if_uneven("platform:webhook", &[one[0].clone(), expired]).await, "an expired lease is nobody's");
        let two = [lease("platform:webhook", "replica-a"), lease("platform:telegram", "replica-a")];
        assert!(b.ask_if_uneven("platform:webhook", &two).await, "two against none: asked");
        assert_eq!(
            crate::store::Claims::claim_holder(store.as_ref(), "handover:platform:webhook").await.unwrap().as_deref(),
            Some("replica-b")
        );
        b.asked_and_taken("platform:webhook").await;
        assert_eq!(
            crate::store::Claims::claim_holder(store.as_ref(), "handover:platform:webhook").await.unwrap(),
            None,
            "withdrawn once taken"
        );
    }
}
