//! Events of a platform served where they are accepted (the API server: its answers go back on
//! the request, held open by the replica that took it): with a store shared by replicas, that
//! replica runs the event's turn, and no other routes it while it lives. Each such event is
//! claimed for this replica (`event:<id>` in `store::Claims`) before it is stored; the claims are
//! renewed together every third of the lease TTL, and given back once their rows are finished.
//!
//! A row whose claim ran out (its replica died, or was cut off from the store) is adopted by
//! whichever replica takes the claim first, and its turn runs there: the answer reaches the
//! conversation's history, which is where a client retrying with the same `Idempotency-Key` is
//! told to look, though the request that brought it died with its replica.
//!
//! The claims share one clock, held beside the tenures' (`Tenures::hold_claim`): renewals failing
//! for two thirds of the TTL fence this replica's turn writes, and a refused one (another replica
//! adopted an event) stops it, as a lost tenure does.

use crate::gateway::ops::lease::TenureClock;
use crate::gateway::ops::lease::tenures::Tenures;
use crate::store::{self, Claims, InboxRow, InboxState, StoreError};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The name the claims' shared clock is held under among the tenures.
const CLOCK_NAME: &str = "events accepted here";

/// Where an event claimed here stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Claimed; its row may not be stored yet.
    Storing,
    /// Its row is stored (accepted here, or adopted): given back once the row is finished.
    Stored,
}

/// The events this replica claimed.
pub(crate) struct AcceptedHere {
    claims: Arc<dyn Claims>,
    holder: String,
    ttl: Duration,
    held: Mutex<HashMap<String, Stage>>,
    clock: Arc<TenureClock>,
    /// Ends the clock: cancelled when a renewal is refused or too late, and when dropped.
    stop: CancellationToken,
    tenures: Arc<Tenures>,
    /// When this replica last tried to adopt: at most every third of the TTL, however often the
    /// inbox is looked at (every event accepted anywhere rings), since a claim runs out only a
    /// TTL after its replica's last renewal.
    adopt_looked: Mutex<Option<Instant>>,
}

fn claim_name(event_id: &str) -> String {
    format!("event:{event_id}")
}

impl AcceptedHere {
    /// Start holding claims as `holder`, renewed every third of `ttl`, their clock held in
    /// `tenures`.
    pub(crate) fn start(claims: Arc<dyn Claims>, holder: String, ttl: Duration, tenures: &Arc<Tenures>) -> Arc<AcceptedHere> {
        let lost = CancellationToken::new();
        let clock = Arc::new(TenureClock::new(Instant::now(), ttl * 2 / 3, lost.clone()));
        tenures.hold_claim(CLOCK_NAME, clock.clone());
        let here = Arc::new(AcceptedHere {
            claims,
            holder,
            ttl,
            held: Mutex::new(HashMap::new()),
            clock,
            stop: lost,
            tenures: tenures.clone(),
            adopt_looked: Mutex::new(None),
        });
        tokio::spawn(keep_renewing(Arc::downgrade(&here)));
        here
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Stage>> {
        // Single inserts and removals: a panic elsewhere cannot leave it half made.
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Claim `event_id` for this replica before its row is stored; `false` when another replica
    /// holds it (it is storing the same event now: this delivery is a duplicate).
    pub(crate) async fn claim(&self, event_id: &str) -> Result<bool, StoreError> {
        {
            let mut held = self.held();
            if held.contains_key(event_id) {
                // Claimed here already: the same request twice at once, or again while its turn
                // runs here.
                return Ok(false);
            }
            held.insert(event_id.to_string(), Stage::Storing);
        }
        let taken = self.claims.claim_take(&claim_name(event_id), &self.holder, self.ttl).await;
        if !matches!(taken, Ok(true)) {
            self.held().remove(event_id);
        }
        taken
    }

    /// The claimed event's row is stored (`true`), or was stored already by another delivery
    /// (`false`: the claim is given back).
    pub(crate) async fn stored(&self, event_id: &str, new: bool) {
        if new {
            self.held().insert(event_id.to_string(), Stage::Stored);
        } else {
            self.give_back(event_id).await;
        }
    }

    async fn give_back(&self, event_id: &str) {
        self.held().remove(event_id);
        if let Err(e) = self.claims.claim_release(&claim_name(event_id), &self.holder).await {
            tracing::debug!(event_id, error = %e, "cannot give an event's claim back; it expires on its own");
        }
    }

    /// Give back the claims of rows finished, and adopt what a dead replica left: of `platforms`'
    /// unfinished rows, those whose claim this replica could take (tried at most every third of
    /// the TTL). Returns the adopted rows.
    pub(crate) async fn settle(&self, rows: &dyn store::Inbox, platforms: &[String]) -> Result<Vec<InboxRow>, StoreError> {
        // Only rows stored before the read may be found finished by it.
        let stored_before: Vec<String> =
            self.held().iter().filter(|(_, stage)| **stage == Stage::Stored).map(|(id, _)| id.clone()).collect();
        let unfinished = rows.inbox_unfinished_of(platforms).await?;
        let still: HashSet<&str> = unfinished.iter().map(|row| row.event_id.as_str()).collect();
        for id in stored_before.iter().filter(|id| !still.contains(id.as_str())) {
            self.give_back(id).await;
        }
        let mut adopted = Vec::new();
        if !self.time_to_adopt() {
            return Ok(adopted);
        }
        for row in unfinished {
            if self.held().contains_key(&row.event_id)
                || !self.claims.claim_take(&claim_name(&row.event_id), &self.holder, self.ttl).await?
            {
                continue;
            }
            // Its replica gave the claim back when the row was finished, or died: asked again,
            // after taking the claim, the row says which.
            let current = rows.inbox_get(&row.event_id).await?;
            if current.as_ref().is_some_and(|row| matches!(row.state, InboxState::Accepted | InboxState::Processing)) {
                tracing::warn!(event_id = %row.event_id, platform = %row.platform, "adopting an event the replica that accepted it left unfinished");
                self.held().insert(row.event_id.clone(), Stage::Stored);
                adopted.push(row);
            } else {
                self.give_back(&row.event_id).await;
            }
        }
        Ok(adopted)
    }

    /// Whether a third of the TTL passed since the last try to adopt (then this is the next).
    /// Each try asks the store for the claim of every unfinished row held elsewhere.
    fn time_to_adopt(&self) -> bool {
        let mut looked = self.adopt_looked.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if looked.is_some_and(|at| at.elapsed() < self.ttl / 3) {
            return false;
        }
        *looked = Some(Instant::now());
        true
    }

    /// How many events this replica holds claims on.
    #[cfg(test)]
    pub(crate) fn holding(&self) -> usize {
        self.held().len()
    }
}

impl Drop for AcceptedHere {
    /// Given up (the gateway stops): the claims expire on their own, and nothing is lost.
    fn drop(&mut self) {
        self.tenures.end_claim(CLOCK_NAME);
        self.stop.cancel();
    }
}

/// Renew every claim every third of the TTL while the clock is valid; end the clock when a
/// renewal is refused or none succeeded within its bound.
async fn keep_renewing(here: Weak<AcceptedHere>) {
    loop {
        let Some(owner) = here.upgrade() else { return };
        let (clock, ttl) = (owner.clock.clone(), owner.ttl);
        // After a failed renewal (the last success long ago), retry soon but not at once: the
        // store may be down, and a tight loop would only hammer it and the log.
        let wait = (ttl / 3).saturating_sub(clock.since_renewed()).max(ttl / 15);
        drop(owner);
        tokio::time::sleep(wait).await;
        let Some(owner) = here.upgrade() else { return };
        if owner.stop.is_cancelled() {
            return;
        }
        if !clock.valid() {
            tracing::warn!("the claims on events accepted here went unrenewed past their bound; turn writes are refused");
            break;
        }
        let ids: Vec<String> = owner.held().keys().cloned().collect();
        let asked = Instant::now();
        // Answered within the clock's bound, or counted as failed: a lapse is settled in time.
        let bound = (ttl * 2 / 3).saturating_sub(clock.since_renewed());
        match tokio::time::timeout(bound, renew_all(&owner, &ids)).await {
            Ok(Ok(true)) => clock.renewed(asked),
            Ok(Ok(false)) => {
                tracing::warn!("another replica took a claim on an event accepted here; turn writes are refused");
                break;
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "renewing the claims on events accepted here failed; retrying"),
            Err(_) => tracing::warn!("renewing the claims on events accepted here went unanswered; retrying"),
        }
    }
    if let Some(owner) = here.upgrade() {
        owner.stop.cancel();
    }
}

/// Renew the claims on `ids`: `false` when one is another replica's now. A claim given back
/// meanwhile (its row finished) is taken again and given back at the next settling.
async fn renew_all(owner: &AcceptedHere, ids: &[String]) -> Result<bool, StoreError> {
    for id in ids {
        if !owner.claims.claim_take(&claim_name(id), &owner.holder, owner.ttl).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Inbox, SqliteStore};

    async fn replica(store: &Arc<SqliteStore>, name: &str, ttl: Duration) -> (Arc<AcceptedHere>, Arc<Tenures>) {
        let tenures = Arc::new(Tenures::default());
        tenures.share(Box::new(|_| Box::pin(async {})));
        tenures.serve_where_accepted("api_server");
        (AcceptedHere::start(store.clone(), name.into(), ttl, &tenures), tenures)
    }

    fn platforms() -> Vec<String> {
        vec!["api_server".to_string()]
    }

    /// While the replica that accepted an event lives, no other adopts it; once the event is
    /// finished its claim is given back; a replica that died leaves its events to be adopted,
    /// each by one replica, once its claims ran out.
    #[tokio::test]
    async fn an_event_is_adopted_only_when_its_replica_is_gone_and_only_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let ttl = Duration::from_secs(2);
        let (a, _) = replica(&store, "replica-a", ttl).await;
        let (b, _) = replica(&store, "replica-b", ttl).await;
        let (c, _) = replica(&store, "replica-c", ttl).await;

        assert!(a.claim("e1").await.unwrap());
        assert!(!b.claim("e1").await.unwrap(), "a second delivery of the same event elsewhere is a duplicate");
        assert!(store.inbox_accept("e1", "api_server", "{}").await.unwrap());
        a.stored("e1", true).await;
        // Past a whole TTL: a's claim is renewed, and nobody adopts its event.
        tokio::time::sleep(ttl + Duration::from_millis(500)).await;
        assert!(b.settle(store.as_ref(), &platforms()).await.unwrap().is_empty(), "a lives: not adopted");
        assert!(a.settle(store.as_ref(), &platforms()).await.unwrap().is_empty(), "a's own is not adopted by a");
        store.inbox_mark_done("e1").await.unwrap();
        a.settle(store.as_ref(), &platforms()).await.unwrap();
        assert_eq!(a.holding(), 0, "finished: given back");
        assert_eq!(store.claim_holder("event:e1").await.unwrap(), None);

        // a dies with e2 stored and unfinished.
        assert!(a.claim("e2").await.unwrap());
        assert!(store.inbox_accept("e2", "api_server", "{}").await.unwrap());
        a.stored("e2", true).await;
        drop(a);
        assert!(b.settle(store.as_ref(), &platforms()).await.unwrap().is_empty(), "not before its claim ran out");
        tokio::time::sleep(ttl + Duration::from_millis(200)).await;
        let served = platforms();
        let (by_b, by_c) = tokio::join!(b.settle(store.as_ref(), &served), c.settle(store.as_ref(), &served));
        let adopted: Vec<String> = by_b.unwrap().into_iter().chain(by_c.unwrap()).map(|row| row.event_id).collect();
        assert_eq!(adopted, ["e2"], "adopted once");
        tokio::time::sleep(ttl + Duration::from_millis(200)).await;
        assert!(
            b.settle(store.as_ref(), &platforms()).await.unwrap().is_empty()
                && c.settle(store.as_ref(), &platforms()).await.unwrap().is_empty(),
            "and held by its adopter"
        );
    }

    /// An event stored while the inbox was being read is not taken for finished.
    #[tokio::test]
    async fn a_claim_being_stored_is_neither_given_back_nor_adopted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let (a, _) = replica(&store, "replica-a", Duration::from_secs(30)).await;
        assert!(a.claim("e1").await.unwrap());
        assert!(!a.claim("e1").await.unwrap(), "the same request twice at once on one replica: a duplicate");
        assert!(a.settle(store.as_ref(), &platforms()).await.unwrap().is_empty());
        assert_eq!(a.holding(), 1, "still being stored: kept");
        assert!(store.inbox_accept("e1", "api_server", "{}").await.unwrap());
        assert!(a.settle(store.as_ref(), &platforms()).await.unwrap().is_empty(), "stored here: routed by the accept, not adopted");
        a.stored("e1", true).await;
        assert_eq!(a.holding(), 1);
    }
}
