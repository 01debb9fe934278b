//! The durable inbox: every inbound event is appended to the store (deduplicated on its event
//! id) before the adapter acknowledges the platform, then handed to the router. On start the
//! events accepted but not finished before a crash are replayed.
//!
//! With a store shared by replicas, an event is routed only in the replica serving its platform
//! (`ops::lease::tenures`); elsewhere it is only stored, and the store wakes the others. The
//! serving replica also routes the rows other replicas accepted, or a dead holder left
//! unfinished ([`Inbox::route_unfinished`], run by `intake::follow`). Every event goes to the
//! router through one gate that remembers the ids it let through until their rows are finished,
//! so an event is routed once however many ways it arrives (accepted here, heard from another
//! replica, found by a poll). A platform served where its events are accepted (the API server,
//! which answers on the request) is routed by the replica that accepted the event, and only
//! there: no other replica reads its rows, so its ids need no remembering.

use super::accepted_here::AcceptedHere;
use crate::gateway::ops::lease::tenures::Tenures;
use crate::store;
use async_trait::async_trait;
use hermes_adapter::{AcceptError, AcceptOutcome, InboundEvent, InboundSink};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Starts of a turn on one event after which a crash parks it instead of replaying it.
pub(crate) const CRASHES_BEFORE_PARKING: i64 = 3;
/// How often a hand-over looks again whether the platform's turns here have finished.
const DRAIN_LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

pub(crate) struct Inbox {
    /// The stored rows: the only store concern the inbox touches.
    rows: Arc<dyn store::Inbox>,
    router: mpsc::UnboundedSender<InboundEvent>,
    /// The ids handed to the router whose rows were unfinished when last looked at, with their
    /// platform; kept only with a shared store, where the follower forgets the finished ones.
    /// Alone on a store, nothing else routes, and nothing would forget them.
    routed: Mutex<HashMap<String, String>>,
    /// With a shared store, the platforms this replica serves; `None` alone.
    serving: Option<Arc<Tenures>>,
    /// With a shared store and a platform served where accepted, the events claimed here.
    accepted_here: Option<Arc<AcceptedHere>>,
    accepting: AtomicBool,
}

impl Inbox {
    /// The inbox of a gateway alone on its store.
    pub(crate) fn new(rows: Arc<dyn store::Inbox>, router: mpsc::UnboundedSender<InboundEvent>) -> Self {
        Self { rows, router, routed: Mutex::new(HashMap::new()), serving: None, accepted_here: None, accepting: AtomicBool::new(true) }
    }

    /// The inbox of a replica: it routes the events of the platforms it serves, its own and those
    /// other replicas accepted (see `intake::follow`, which must run beside it), each once.
    pub(crate) fn shared(rows: Arc<dyn store::Inbox>, router: mpsc::UnboundedSender<InboundEvent>, serving: Arc<Tenures>) -> Self {
        Self { serving: Some(serving), ..Self::new(rows, router) }
    }

    /// The events of the platforms served where accepted are claimed for this replica through
    /// `accepted_here` when stored, and what a dead replica left of them is adopted.
    pub(crate) fn with_accepted_here(self, accepted_here: Arc<AcceptedHere>) -> Self {
        Self { accepted_here: Some(accepted_here), ..self }
    }

    /// The claims of events served where accepted, when `platform` is such a platform here.
    fn claims_for(&self, platform: &str) -> Option<&AcceptedHere> {
        let where_accepted = self.serving.as_ref().is_some_and(|tenures| tenures.serves_where_accepted(platform));
        self.accepted_here.as_deref().filter(|_| where_accepted)
    }

    /// Whether this replica routes the `platform` events it accepts.
    pub(crate) fn serves(&self, platform: &str) -> bool {
        self.serving.as_ref().is_none_or(|tenures| tenures.serves(platform))
    }

    /// Whether this replica routes `platform`'s events wherever they were accepted.
    pub(crate) fn follows(&self, platform: &str) -> bool {
        self.serving.as_ref().is_none_or(|tenures| tenures.follows(platform))
    }

    fn routed(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        // The map is only inserted into and filtered: a panic elsewhere cannot leave it half made.
        self.routed.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `event_id` went to the router and may still be running.
    pub(crate) fn has_routed(&self, event_id: &str) -> bool {
        self.routed().contains_key(event_id)
    }

    /// Refuse new events from now on (drain); adapters then answer "try later" and do not ack.
    pub(crate) fn stop_accepting(&self) {
        self.accepting.store(false, Ordering::Release);
    }

    /// Hand `event` to the router unless it already went; `true` when it went now.
    fn route(&self, event: InboundEvent) -> bool {
        let platform = event.source.platform.as_str();
        if let Some(tenures) = self.serving.as_ref().filter(|tenures| !tenures.serves_where_accepted(platform)) {
            // Remembered, since the follower may find the row too. Whether the platform is
            // followed is asked under the lock, so a hand-over that stops following it and then
            // takes the lock ([`Inbox::drained_of`]) sees every event routed before.
            let mut routed = self.routed();
            if !tenures.follows(platform) {
                // Another replica's to route: the store rings there.
                return false;
            }
            if routed.insert(event.event_id.clone(), platform.to_string()).is_some() {
                return false;
            }
        } else if !self.serves(platform) {
            return false;
        }
        // An event served where it was accepted reaches the router from here alone.
        if self.router.send(event).is_err() {
            // The router is gone (shutting down); the row stays and is replayed on the next start.
            tracing::warn!("router stopped; the event stays in the inbox for the next start");
            return false;
        }
        true
    }

    /// Whether every event of `platform` routed here has finished, looking again until `bound`
    /// runs out. Asked once the platform is no longer followed ([`Tenures::hand_over`]), so no
    /// new one is routed meanwhile.
    pub(crate) async fn drained_of(&self, platform: &str, bound: std::time::Duration) -> Result<bool, store::StoreError> {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            // Taking the lock waits out a route that found the platform still followed.
            let routed: HashSet<String> = self.routed().iter().filter(|(_, p)| *p == platform).map(|(id, _)| id.clone()).collect();
            let running = if routed.is_empty() {
                0
            } else {
                let unfinished = self.rows.inbox_unfinished_of(&[platform.to_string()]).await?;
                unfinished.iter().filter(|row| routed.contains(&row.event_id)).count()
            };
            if running == 0 {
                // None of them runs any more: forgotten, so a later tenure routes afresh.
                self.routed().retain(|id, _| !routed.contains(id));
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::info!(platform, running, "turns of the platform still run here; it is not handed over now");
                return Ok(false);
            }
            tokio::time::sleep(DRAIN_LOOK_EVERY.min(deadline - tokio::time::Instant::now())).await;
        }
    }

    /// Hand every accepted-but-unfinished event to the router again, oldest first: at start,
    /// what the last run left.
    pub(crate) async fn replay_unfinished(&self) -> Result<usize, store::StoreError> {
        let replayed = self.route_unfinished().await?;
        if replayed > 0 {
            tracing::info!(count = replayed, "replaying events accepted before the last stop");
        }
        Ok(replayed)
    }

    /// Route every unfinished row of a platform served here not routed yet, oldest first
    /// (accepted by another replica, or left by the platform's last holder), and forget the
    /// routed ids whose rows are finished.
    /// Returns how many went to the router now.
    pub(crate) async fn route_unfinished(&self) -> Result<usize, store::StoreError> {
        // Only ids routed before the rows are read may be forgotten: one routed meanwhile may
        // have been stored after the read, and would look finished.
        let known_before: HashSet<String> = self.routed().keys().cloned().collect();
        // Only the served platforms' rows are read: the others' are routed where they are
        // served, and a replica serving few platforms of a busy cluster reads few rows. `None`:
        // alone on the store, every row.
        let read: Option<Vec<String>> = self.serving.as_ref().map(|tenures| tenures.platforms());
        let mut rows = match &read {
            Some(platforms) => self.rows.inbox_unfinished_of(platforms).await?,
            None => self.rows.inbox_unfinished().await?,
        };
        // Events answered where accepted: what a dead replica left, once its claims ran out.
        let adopted = match (&self.accepted_here, &self.serving) {
            (Some(here), Some(tenures)) => here.settle(self.rows.as_ref(), &tenures.served_where_accepted()).await?,
            _ => Vec::new(),
        };
        let adopted_ids: HashSet<String> = adopted.iter().map(|row| row.event_id.clone()).collect();
        let unfinished: HashSet<&str> = rows.iter().map(|row| row.event_id.as_str()).collect();
        // An id is forgotten only when its platform's rows were read and its row was not among
        // the unfinished: a platform not read now (its tenure late to be renewed, or given back)
        // may still be running its turns here.
        let was_read = |platform: &str| read.as_ref().is_none_or(|platforms| platforms.iter().any(|p| p == platform));
        self.routed().retain(|id, platform| !known_before.contains(id) || !was_read(platform) || unfinished.contains(id.as_str()));
        rows.extend(adopted);
        let mut replayed = 0;
        let ours = |row: &store::InboxRow| adopted_ids.contains(&row.event_id) || self.follows(&row.platform);
        for row in rows.iter().filter(|row| !known_before.contains(&row.event_id) && ours(row)) {
            if self.has_routed(&row.event_id) {
                // Accepted here while the rows were read: already on its way.
                continue;
            }
            // Its turn started this many times and the gateway died under it each time: running
            // it once more would only crash again.
            if row.attempts >= CRASHES_BEFORE_PARKING {
                let reason = format!("poisoned: the gateway stopped {} times while processing it", row.attempts);
                tracing::error!(event_id = %row.event_id, platform = %row.platform, "{reason}; parked, not replayed");
                self.rows.inbox_mark_poisoned(&row.event_id, &reason).await?;
                continue;
            }
            match serde_json::from_str::<InboundEvent>(&row.payload) {
                Ok(event) => {
                    if self.route(event) {
                        replayed += 1;
                    }
                }
                Err(e) => {
                    tracing::error!(event_id = %row.event_id, error = %e, "unreadable inbox row; marking it failed");
                    self.rows.inbox_mark_failed(&row.event_id, &format!("unreadable payload: {e}")).await?;
                }
            }
        }
        Ok(replayed)
    }
}

#[async_trait]
impl InboundSink for Inbox {
    async fn accept(&self, event: InboundEvent) -> Result<AcceptOutcome, AcceptError> {
        if !self.accepting.load(Ordering::Acquire) {
            return Err(AcceptError::ShuttingDown);
        }
        let payload = serde_json::to_string(&event).map_err(|e| AcceptError::Storage(e.to_string()))?;
        let claims = self.claims_for(event.source.platform.as_str());
        if let Some(claims) = claims
            && !claims.claim(&event.event_id).await.map_err(|e| AcceptError::Storage(e.to_string()))?
        {
            tracing::debug!(event_id = %event.event_id, "the same event is being accepted elsewhere; duplicate");
            return Ok(AcceptOutcome::Duplicate);
        }
        let inserted = self.rows.inbox_accept(&event.event_id, event.source.platform.as_str(), &payload).await;
        if let Some(claims) = claims {
            claims.stored(&event.event_id, matches!(inserted, Ok(true))).await;
        }
        let inserted = inserted.map_err(|e| AcceptError::Storage(e.to_string()))?;
        if !inserted {
            tracing::debug!(event_id = %event.event_id, "duplicate delivery ignored");
            return Ok(AcceptOutcome::Duplicate);
        }
        crate::observe::metrics::global().message_received(event.source.platform.as_str(), &event.source.chat_id);
        self.route(event);
        Ok(AcceptOutcome::Accepted)
    }

    async fn accept_all(&self, events: Vec<InboundEvent>) -> Result<Vec<AcceptOutcome>, AcceptError> {
        if !self.accepting.load(Ordering::Acquire) {
            return Err(AcceptError::ShuttingDown);
        }
        if events.iter().any(|event| self.claims_for(event.source.platform.as_str()).is_some()) {
            // Claimed one by one before each is stored.
            let mut outcomes = Vec::with_capacity(events.len());
            for event in events {
                outcomes.push(self.accept(event).await?);
            }
            return Ok(outcomes);
        }
        let rows = events
            .iter()
            .map(|e| Ok((e.event_id.clone(), e.source.platform.as_str().to_string(), serde_json::to_string(e)?)))
            .collect::<Result<Vec<_>, serde_json::Error>>()
            .map_err(|e| AcceptError::Storage(e.to_string()))?;
        let inserted = self.rows.inbox_accept_all(rows).await.map_err(|e| AcceptError::Storage(e.to_string()))?;
        let mut outcomes = Vec::with_capacity(events.len());
        for (event, new) in events.into_iter().zip(inserted) {
            if new {
                crate::observe::metrics::global().message_received(event.source.platform.as_str(), &event.source.chat_id);
                self.route(event);
                outcomes.push(AcceptOutcome::Accepted);
            } else {
                tracing::debug!(event_id = %event.event_id, "duplicate delivery ignored");
                outcomes.push(AcceptOutcome::Duplicate);
            }
        }
        Ok(outcomes)
    }
}
