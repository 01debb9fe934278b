//! Which platforms this replica serves: with a store shared by replicas, a platform's events are
//! routed, its turns run and its messages sent only in the replica holding the platform's lease
//! (its connection lease, or `platform:<name>` for a listener), so one session's turns run in one
//! replica at a time, and different platforms' leases spread over the replicas. The supervisors
//! (and [`super::own`] for listeners any replica runs) record each tenure here; the inbox asks
//! [`Tenures::serves`] before routing, the courier before sending, and the fenced writes ask
//! [`Tenures::intact_after_lapse`] before a turn writes.
//!
//! A tenure whose renewal is late (none succeeded for two thirds of the TTL) has lapsed: nothing
//! is routed or sent under it, and turn writes wait, until the store confirms or refuses it. A
//! tenure given back (the gateway stops, the adapter is parked) leaves the map. A tenure lost
//! (a renewal refused or unanswered: another replica may hold it now) stays, invalid, so every
//! turn write is refused from then on, and [`Tenures::lost`] tells the gateway to stop at once
//! and come back as a new replica: its turns of that platform are the new holder's to replay.
//! Alone on its store, a gateway serves every platform and holds no tenure.
//!
//! A platform whose answers go back on the request that brought them (the API server) is served
//! by every replica, each for the events it accepted ([`Tenures::serve_where_accepted`]): no
//! lease says where, and no replica routes another's rows while the replica that accepted them
//! lives (`intake::accepted_here`). One session's turns still run one at a time, each under a
//! claim on the session (`super::session_claims`). Those claims' clocks are held here beside the
//! tenures' ([`Tenures::hold_claim`]): a claim lost fences the turns' writes, and stops the
//! gateway, as a lost tenure does.
//!
//! A tenure being handed over to another replica while both live (`super::handover`) is still
//! held and its turns still write, but its platform is no longer followed: no new event of it is
//! routed here, so the turns running here can finish, and their parts be sent, before the lease
//! goes; then nothing of it is sent here either ([`Tenures::hand_over`]).

use super::TenureClock;
use futures::future::BoxFuture;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What runs when this replica takes a platform over, before its events are routed here: the
/// gateway closes the approvals the last holder left open.
pub(crate) type OnTaken = Box<dyn Fn(String) -> BoxFuture<'static, ()> + Send + Sync>;

/// What tells a hand-over that nothing of a platform runs here any more (the gateway's inbox and
/// courier): asked once the platform is no longer followed, before its lease is released.
#[async_trait::async_trait]
pub(crate) trait Drain: Send + Sync {
    /// Whether every turn of `platform` routed here has finished, looking again until `bound`.
    async fn turns_finished(&self, platform: &str, bound: std::time::Duration) -> bool;

    /// Wait until no send of `platform` is in flight here (`false`: still one after `bound`).
    async fn sends_settled(&self, platform: &str, bound: std::time::Duration) -> bool;
}

/// How far a held platform is handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handing {
    /// Not followed: no new event is routed here; the turns routed here finish, their parts
    /// are sent.
    Draining,
    /// Not served either: nothing of it is sent here; its lease is about to be released.
    Handed,
}

/// A platform taken out of this replica's following for a hand-over ([`Tenures::hand_over`]).
/// Dropped while the platform is still held (the hand-over did not finish, or the caller did
/// not give it back), it is followed again.
pub(crate) struct Unfollowed {
    tenures: Arc<Tenures>,
    platform: String,
}

impl Drop for Unfollowed {
    fn drop(&mut self) {
        self.tenures.handing_over().remove(&self.platform);
        if self.tenures.held().contains_key(&self.platform) {
            tracing::info!(platform = %self.platform, "not handed over; its events are routed here again");
            // The follower routes what was accepted while the platform was not followed.
            self.tenures.taken.send_modify(|n| *n += 1);
        }
    }
}

/// How often a write held back by a lapsed tenure looks again whether it was renewed.
const LAPSE_LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// This replica's tenures, by platform.
pub(crate) struct Tenures {
    shared: AtomicBool,
    held: Mutex<HashMap<String, Arc<TenureClock>>>,
    /// Held platforms being handed over, and how far.
    handing_over: Mutex<HashMap<String, Handing>>,
    /// Platforms served wherever their events are accepted, without a lease.
    where_accepted: Mutex<HashSet<String>>,
    /// The claims this replica holds (a running turn's session, the events accepted here), by
    /// claim name.
    claims: Mutex<HashMap<String, Arc<TenureClock>>>,
    /// Cancelled when a tenure ends without being given back.
    lost: CancellationToken,
    /// Bumped at each tenure taken: the inbox follower routes what waits for it.
    taken: watch::Sender<u64>,
    on_taken: Mutex<Option<Arc<OnTaken>>>,
    drain: Mutex<Option<Arc<dyn Drain>>>,
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
            handing_over: Mutex::new(HashMap::new()),
            where_accepted: Mutex::new(HashSet::new()),
            claims: Mutex::new(HashMap::new()),
            lost: CancellationToken::new(),
            taken: watch::Sender::new(0),
            on_taken: Mutex::new(None),
            drain: Mutex::new(None),
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

    fn handing_over(&self) -> std::sync::MutexGuard<'_, HashMap<String, Handing>> {
        // Only inserted into and removed from: a panic elsewhere cannot leave it half made.
        self.handing_over.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How to tell that nothing of a platform runs here any more, for [`Self::hand_over`]. Until
    /// it is said, no tenure is handed over.
    pub(crate) fn drain_with(&self, drain: Arc<dyn Drain>) {
        if let Ok(mut slot) = self.drain.lock() {
            *slot = Some(drain);
        }
    }

    /// Make `platform` ready to be handed over to another replica. Its events stop being routed
    /// here; once the turns already routed have finished (within `bound`), nothing more of it
    /// is sent either, and once no send of it is in flight (within `bound` again), the caller
    /// may release its lease, give the platform back, and only then drop what this returns.
    /// With turns still running (`None`), or dropped before that, the platform is followed
    /// again and stays here, and what was accepted meanwhile is routed: the lease was never
    /// released, so nothing of it ran elsewhere.
    pub(crate) async fn hand_over(self: &Arc<Self>, platform: &str, bound: std::time::Duration) -> Option<Unfollowed> {
        let drain = self.drain.lock().ok().and_then(|slot| slot.clone())?;
        if !self.held().contains_key(platform) {
            return None;
        }
        self.handing_over().insert(platform.to_string(), Handing::Draining);
        let unfollowed = Unfollowed { tenures: self.clone(), platform: platform.to_string() };
        if !drain.turns_finished(platform, bound).await || self.lost.is_cancelled() {
            return None;
        }
        self.handing_over().insert(platform.to_string(), Handing::Handed);
        if !drain.sends_settled(platform, bound).await {
            // Left to the next holder, which reads it as cut off: looked up, or resent once, marked.
            tracing::warn!(platform, "a send was still in flight when the platform was handed over");
        }
        Some(unfollowed)
    }

    /// Whether `platform` is handed over, its lease about to be released: nothing of it is sent.
    fn handed(&self, platform: &str) -> bool {
        self.handing_over().get(platform) == Some(&Handing::Handed)
    }

    fn where_accepted(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        // Only inserted into: a panic elsewhere cannot leave it half made.
        self.where_accepted.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn claims(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<TenureClock>>> {
        // Only inserted into and removed from: a panic elsewhere cannot leave it half made.
        self.claims.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `platform`'s events are served by the replica that accepted them, on every replica, with
    /// no lease: its answers go back on the request that brought the event, held open here.
    pub(crate) fn serve_where_accepted(&self, platform: &str) {
        self.where_accepted().insert(platform.to_string());
    }

    /// Whether `platform` is served where its events are accepted (no lease, no follower).
    pub(crate) fn serves_where_accepted(&self, platform: &str) -> bool {
        self.is_shared() && self.where_accepted().contains(platform)
    }

    /// The platforms served where their events are accepted, sorted (none alone on a store).
    pub(crate) fn served_where_accepted(&self) -> Vec<String> {
        if !self.is_shared() {
            return Vec::new();
        }
        let mut platforms: Vec<String> = self.where_accepted().iter().cloned().collect();
        platforms.sort();
        platforms
    }

    /// This replica holds the claim `name` under `clock`: until [`Self::end_claim`], turn writes
    /// need it valid, and its loss stops the gateway as a lost tenure does (another replica may
    /// run what it claimed now).
    pub(crate) fn hold_claim(self: &Arc<Self>, name: &str, clock: Arc<TenureClock>) {
        self.claims().insert(name.to_string(), clock.clone());
        self.lose_when_over(name, clock, |tenures, name| tenures.claims().get(name).cloned());
    }

    /// Once `clock` is over, the gateway stops, unless `name` was given back first (`current`
    /// no longer finds this very clock under it).
    fn lose_when_over(self: &Arc<Self>, name: &str, clock: Arc<TenureClock>, current: fn(&Tenures, &str) -> Option<Arc<TenureClock>>) {
        let (tenures, name) = (self.clone(), name.to_string());
        tokio::spawn(async move {
            clock.over().await;
            if current(&tenures, &name).is_some_and(|held| Arc::ptr_eq(&held, &clock)) {
                tenures.lose(&name);
            }
        });
    }

    /// The claim `name` is given back.
    pub(crate) fn end_claim(&self, name: &str) {
        self.claims().remove(name);
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
        self.lose_when_over(platform, clock, |tenures, platform| tenures.held().get(platform).cloned());
    }

    /// `platform`'s tenure was given back cleanly: nothing of it runs here any more.
    pub(crate) fn give_back(&self, platform: &str) {
        self.held().remove(platform);
        self.handing_over().remove(platform);
    }

    /// `name`'s tenure (a platform's, or a claim's) ended without being given back: another
    /// replica may hold it.
    pub(crate) fn lose(&self, name: &str) {
        tracing::error!(lease = name, "this replica lost a lease or claim it held");
        self.lost.cancel();
    }

    /// Whether this replica routes, runs and sends for `platform` now (for a platform served
    /// where accepted: the events it accepted).
    /// A platform being handed over is still served: the turns routed here finish, and their
    /// parts are sent.
    pub(crate) fn serves(&self, platform: &str) -> bool {
        (self.holds(platform) && !self.handed(platform)) || self.where_accepted().contains(platform)
    }

    /// Whether this replica routes every event of `platform`, wherever it was accepted: alone on
    /// its store, or holding the platform's tenure and not handing it over.
    pub(crate) fn follows(&self, platform: &str) -> bool {
        self.holds(platform) && !self.handing_over().contains_key(platform)
    }

    /// Alone on its store, or holding `platform`'s tenure, valid now.
    fn holds(&self, platform: &str) -> bool {
        !self.is_shared() || self.held().get(platform).is_some_and(|clock| clock.valid())
    }

    /// Whether every tenure and claim this replica holds is still valid: a turn may
    /// write.
    fn intact(&self) -> bool {
        !self.lost.is_cancelled() && self.held().values().all(|clock| clock.valid()) && self.claims().values().all(|clock| clock.valid())
    }

    /// Whether a turn may write, waiting out a lapse. A tenure whose renewal is late (the
    /// process starved of CPU, the store slow to answer) is invalid but not yet lost: the
    /// renewal in flight settles it, within the bound (`keep_renewing` gives up on one that long
    /// unanswered, and the tenure is lost). A renewal is conditional on the lease's token, which
    /// every acquisition changes, so one that succeeds proves no other replica held the
    /// platform meanwhile, and what was held back may be written. Refusing at once instead
    /// would end turns this replica still serves, their events routed here and never run again.
    /// `true` once every tenure is current again; `false` once one is lost (the gateway stops,
    /// and the next holder replays the refused turns).
    pub(crate) async fn intact_after_lapse(&self) -> bool {
        let over = |held: &HashMap<String, Arc<TenureClock>>| {
            held.values().any(|clock| clock.is_over()) || self.claims().values().any(|clock| clock.is_over())
        };
        self.after_lapse(|tenures| tenures.intact(), over, "turn writes").await
    }

    /// Whether this replica serves `platform`, waiting out a lapse of its tenure as
    /// [`Self::intact_after_lapse`] does: for a send already recorded as begun, which goes
    /// once the tenure is confirmed, and is left to the platform's next holder once it is lost.
    /// Refusing at a mere lapse would leave the part recorded as cut off, and resent marked as
    /// a possible repeat though it was never sent.
    pub(crate) async fn serves_after_lapse(&self, platform: &str) -> bool {
        if !self.is_shared() || self.where_accepted().contains(platform) {
            return true;
        }
        if !self.held().contains_key(platform) || self.handed(platform) {
            return false;
        }
        let over =
            |held: &HashMap<String, Arc<TenureClock>>| held.get(platform).is_none_or(|clock| clock.is_over()) || self.handed(platform);
        self.after_lapse(|tenures| tenures.serves(platform), over, "a send").await
    }

    /// Wait until `current` holds (`true`) or `over` does, or a tenure is lost (`false`).
    async fn after_lapse(
        &self,
        current: impl Fn(&Self) -> bool,
        over: impl Fn(&HashMap<String, Arc<TenureClock>>) -> bool,
        what: &str,
    ) -> bool {
        if current(self) {
            return true;
        }
        let waiting = tokio::time::Instant::now();
        loop {
            if self.lost.is_cancelled() || over(&self.held()) {
                return false;
            }
            if current(self) {
                tracing::info!(waited = ?waiting.elapsed(), "a lease renewal came back late but accepted; {what} held back meanwhile go on");
                return true;
            }
            tokio::select! {
                () = self.lost.cancelled() => return false,
                () = tokio::time::sleep(LAPSE_LOOK_EVERY) => {}
            }
        }
    }

    /// The platforms whose tenure this replica holds now and follows (whose events it routes
    /// wherever they were accepted), sorted.
    pub(crate) fn platforms(&self) -> Vec<String> {
        let handing_over = self.handing_over().clone();
        let mut held: Vec<String> =
            self.held().iter().filter(|(p, clock)| clock.valid() && !handing_over.contains_key(*p)).map(|(p, _)| p.clone()).collect();
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

    /// A tenure on a 2 s bound, renewed (by the request sent) now, lost when the token is
    /// cancelled.
    async fn holding_webhook() -> (Arc<Tenures>, Arc<TenureClock>, CancellationToken) {
        let tenures = Arc::new(Tenures::default());
        tenures.share(Box::new(|_| Box::pin(async {})));
        let lost = CancellationToken::new();
        let clock = Arc::new(TenureClock::new(Instant::now(), Duration::from_secs(2), lost.clone()));
        tenures.take("webhook", clock.clone()).await;
        (tenures, clock, lost)
    }

    /// A starved replica's renewal comes back late but accepted (no other replica took the
    /// platform): the turns it held back write then, and nothing stops. Refused instead, their
    /// events would stay routed here, never run.
    #[tokio::test(start_paused = true)]
    async fn a_late_renewal_holds_turn_writes_back_until_it_is_answered() {
        let (tenures, clock, _lost) = holding_webhook().await;
        tokio::time::sleep(Duration::from_millis(2100)).await;
        assert!(!tenures.intact() && !tenures.serves("webhook"), "past its bound: nothing is sent or routed meanwhile");
        let waiting = tokio::spawn({
            let tenures = tenures.clone();
            async move { tenures.intact_after_lapse().await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!waiting.is_finished(), "the write waits for the renewal's answer");
        // The renewal asked for 300 ms ago is accepted now.
        clock.renewed(Instant::now() - Duration::from_millis(300));
        assert!(waiting.await.unwrap(), "renewed: the write goes");
        assert!(tenures.serves("webhook"));
        let stopped = tokio::time::timeout(Duration::from_secs(10), tenures.lost()).await;
        assert!(stopped.is_err(), "a late renewal is not a lost lease");
    }

    /// A send begun under a lapsed tenure goes once the renewal is confirmed; for a platform
    /// not held, or once the tenure is lost, it is refused.
    #[tokio::test(start_paused = true)]
    async fn a_send_begun_in_a_lapse_goes_once_the_renewal_is_confirmed() {
        let (tenures, clock, lost) = holding_webhook().await;
        assert!(!tenures.serves_after_lapse("telegram").await, "not held here");
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let waiting = tokio::spawn({
            let tenures = tenures.clone();
            async move { tenures.serves_after_lapse("webhook").await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "the send waits for the renewal's answer");
        clock.renewed(Instant::now());
        assert!(waiting.await.unwrap(), "confirmed: it goes");

        tokio::time::sleep(Duration::from_millis(2100)).await;
        let waiting = tokio::spawn({
            let tenures = tenures.clone();
            async move { tenures.serves_after_lapse("webhook").await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        lost.cancel();
        assert!(!waiting.await.unwrap(), "lost: left to the next holder");
    }

    /// A tenure lost while a write waits (the renewal was refused: another replica holds it)
    /// refuses the write at once.
    #[tokio::test(start_paused = true)]
    async fn a_renewal_refused_while_a_write_waits_refuses_it() {
        let (tenures, _clock, lost) = holding_webhook().await;
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let waiting = tokio::spawn({
            let tenures = tenures.clone();
            async move { tenures.intact_after_lapse().await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let refused_at = Instant::now();
        lost.cancel();
        assert!(!waiting.await.unwrap());
        assert!(refused_at.elapsed() < Duration::from_millis(100), "{:?}", refused_at.elapsed());
    }
}
