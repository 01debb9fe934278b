//! Which platforms this replica serves: with a store shared by replicas, a platform's events are
//! routed, its turns run and its messages sent only in the replica holding the platform's lease
//! (its connection lease, or `platform:<name>` for a listener), so one session's turns run in one
//! replica at a time, and different platforms' leases spread over the replicas. The supervisors
//! (and [`super::own`] for listeners any replica runs) record each tenure here; the inbox asks
//! [`Tenures::serves`] before routing, the courier before sending, and the fenced writes ask
//! [`Tenures::intact`] before a turn writes.
//!
//! A tenure given back (the gateway stops, the adapter is parked) leaves the map. A tenure lost
//! (a renewal refused, or none for two thirds of the TTL: another replica may hold it now) stays,
//! invalid, so every turn write is refused from then on, and [`Tenures::lost`] tells the gateway
//! to stop at once and come back as a new replica: its turns of that platform are the new
//! holder's to replay. Alone on its store, a gateway serves every platform and holds no tenure.

use super::TenureClock;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What runs when this replica takes a platform over, before its events are routed here: the
/// gateway closes the approvals the last holder left open.
pub(crate) type OnTaken = Box<dyn Fn(String) -> BoxFuture<'static, ()> + Send + Sync>;

/// This replica's tenures, by platform.
pub(crate) struct Tenures {
    shared: AtomicBool,
    held: Mutex<HashMap<String, Arc<TenureClock>>>,
    /// Cancelled when a tenure ends without being given back.
    lost: CancellationToken,
    /// Bumped at each tenure taken: the inbox follower routes what waits for it.
    taken: watch::Sender<u64>,
    on_taken: Mutex<Option<Arc<OnTaken>>>,
}

impl std::fmt::Debug for Tenures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenures").field("shared", &self.is_shared()).field("serving", &self.platforms()).finish()
    }
}

impl Default for Tenures {
    fn default() -> Self {
        Tenures {
            shared: AtomicBool::new(false),
            held: Mutex::new(HashMap::new()),
            lost: CancellationToken::new(),
            taken: watch::Sender::new(0),
            on_taken: Mutex::new(None),
        }
    }
}

impl Tenures {
    /// From now on the store is shared: a platform is served only under its tenure. Said before
    /// anything routes or sends.
    pub(crate) fn share(&self, on_taken: OnTaken) {
        self.shared.store(true, Ordering::Release);
        if let Ok(mut hook) = self.on_taken.lock() {
            *hook = Some(Arc::new(on_taken));
        }
    }

    pub(crate) fn is_shared(&self) -> bool {
        self.shared.load(Ordering::Acquire)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<TenureClock>>> {
        // Only inserted into and removed from: a panic elsewhere cannot leave it half made.
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// This replica holds `platform` under `clock` now: what it left to do is done first (see
    /// [`OnTaken`]), then its events are served here. If the tenure ends before it is given
    /// back, it is lost ([`Self::lose`]), whatever the holder is doing meanwhile (backing off,
    /// paused).
    pub(crate) async fn take(self: &Arc<Self>, platform: &str, clock: Arc<TenureClock>) {
        let hook = self.on_taken.lock().ok().and_then(|hook| hook.clone());
        if let Some(hook) = hook {
            hook(platform.to_string()).await;
        }
        self.held().insert(platform.to_string(), clock.clone());
        self.taken.send_modify(|n| *n += 1);
        let (tenures, platform) = (self.clone(), platform.to_string());
        tokio::spawn(async move {
            clock.over().await;
            let still_held = tenures.held().get(&platform).is_some_and(|held| Arc::ptr_eq(held, &clock));
            if still_held {
                tenures.lose(&platform);
            }
        });
    }

    /// `platform`'s tenure was given back cleanly: nothing of it runs here any more.
    pub(crate) fn give_back(&self, platform: &str) {
        self.held().remove(platform);
    }

    /// `platform`'s tenure ended without being given back: another replica may hold it.
    pub(crate) fn lose(&self, platform: &str) {
        tracing::error!(platform, "this replica lost its lease on the platform");
        self.lost.cancel();
    }

    /// Whether this replica routes, runs and sends for `platform` now.
    pub(crate) fn serves(&self, platform: &str) -> bool {
        !self.is_shared() || self.held().get(platform).is_some_and(|clock| clock.valid())
    }

    /// Whether every tenure this replica holds is still valid: a turn may write.
    pub(crate) fn intact(&self) -> bool {
        !self.lost.is_cancelled() && self.held().values().all(|clock| clock.valid())
    }

    /// The platforms served here now, sorted.
    pub(crate) fn platforms(&self) -> Vec<String> {
        let mut held: Vec<String> = self.held().iter().filter(|(_, clock)| clock.valid()).map(|(p, _)| p.clone()).collect();
        held.sort();
        held
    }

    /// Resolves once a tenure was lost: the gateway stops.
    pub(crate) async fn lost(&self) {
        self.lost.cancelled().await;
    }

    /// Changes each time a tenure is taken.
    pub(crate) fn taken(&self) -> watch::Receiver<u64> {
        self.taken.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::time::Instant;

    fn clock(lost: &CancellationToken) -> Arc<TenureClock> {
        Arc::new(TenureClock::new(Instant::now(), Duration::from_secs(600), lost.clone()))
    }

    #[tokio::test]
    async fn alone_every_platform_is_served_and_shared_only_those_held() {
        let tenures = Arc::new(Tenures::default());
        assert!(tenures.serves("telegram") && tenures.intact());
        let taken = Arc::new(Mutex::new(Vec::new()));
        let seen = taken.clone();
        tenures.share(Box::new(move |platform| {
            let seen = seen.clone();
            Box::pin(async move { seen.lock().unwrap().push(platform) })
        }));
        assert!(!tenures.serves("telegram"), "shared, a platform not held is another replica's");
        let changes = tenures.taken();
        let telegram = CancellationToken::new();
        tenures.take("telegram", clock(&telegram)).await;
        assert!(changes.has_changed().unwrap(), "the follower hears of it");
        assert_eq!(*taken.lock().unwrap(), ["telegram"], "the takeover ran first");
        assert!(tenures.serves("telegram") && !tenures.serves("discord"));
        assert_eq!(tenures.platforms(), ["telegram"]);

        tenures.give_back("telegram");
        assert!(!tenures.serves("telegram") && tenures.intact(), "given back: not served, and nothing is lost");
    }

    #[tokio::test]
    async fn a_lost_tenure_stops_every_turn_write_and_the_gateway() {
        let tenures = Arc::new(Tenures::default());
        tenures.share(Box::new(|_| Box::pin(async {})));
        let (telegram, discord) = (CancellationToken::new(), CancellationToken::new());
        tenures.take("telegram", clock(&telegram)).await;
        tenures.take("discord", clock(&discord)).await;
        // Given back first, then ended: not lost.
        tenures.give_back("discord");
        discord.cancel();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(tenures.intact(), "a tenure given back is not lost");

        // Ended while held (a renewal refused): lost, whoever held it.
        telegram.cancel();
        tokio::time::timeout(Duration::from_secs(1), tenures.lost()).await.expect("the gateway is told to stop");
        assert!(!tenures.serves("telegram"));
        assert!(!tenures.intact(), "no turn writes once one tenure is lost");
    }
}
