//! The durable inbox: every inbound event is appended to the store (deduplicated on its event
//! id) before the adapter acknowledges the platform, then handed to the router. On start the
//! events accepted but not finished before a crash are replayed.
//!
//! With a store shared by replicas, a standby's inbox only stores (the store wakes the leader),
//! and the leader also routes rows other replicas accepted ([`Inbox::route_unfinished`], run by
//! `intake::follow`). Every event goes to the router through one gate that remembers the ids it
//! let through until their rows are finished, so an event is routed once however many ways it
//! arrives (accepted here, heard from another replica, found by a poll).

use crate::store;
use async_trait::async_trait;
use hermes_adapter::{AcceptError, AcceptOutcome, InboundEvent, InboundSink};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Starts of a turn on one event after which a crash parks it instead of replaying it.
pub(crate) const CRASHES_BEFORE_PARKING: i64 = 3;

pub(crate) struct Inbox {
    /// The stored rows: the only store concern the inbox touches.
    rows: Arc<dyn store::Inbox>,
    /// `None` on a standby: it stores, and the replica that leads routes.
    router: Option<mpsc::UnboundedSender<InboundEvent>>,
    /// The ids handed to the router whose rows were unfinished when last looked at; kept only
    /// by a leader that also routes other replicas' rows (`tracks`), whose follower forgets the
    /// finished ones. Alone on a store, nothing else routes, and nothing would forget them.
    routed: Mutex<HashSet<String>>,
    tracks: bool,
    accepting: AtomicBool,
}

impl Inbox {
    /// The inbox of a gateway alone on its store.
    pub(crate) fn new(rows: Arc<dyn store::Inbox>, router: mpsc::UnboundedSender<InboundEvent>) -> Self {
        Self { rows, router: Some(router), routed: Mutex::new(HashSet::new()), tracks: false, accepting: AtomicBool::new(true) }
    }

    /// The inbox of the replica that leads: it also routes the rows other replicas accept (see
    /// `intake::follow`, which must run beside it), each once.
    pub(crate) fn following(rows: Arc<dyn store::Inbox>, router: mpsc::UnboundedSender<InboundEvent>) -> Self {
        Self { tracks: true, ..Self::new(rows, router) }
    }

    /// A standby's inbox: it stores what its adapters accept and routes nothing; the store
    /// announces each new row to the replica that leads.
    pub(crate) fn storing_only(rows: Arc<dyn store::Inbox>) -> Self {
        Self { rows, router: None, routed: Mutex::new(HashSet::new()), tracks: false, accepting: AtomicBool::new(true) }
    }

    fn routed(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        // The set is only inserted into and filtered: a panic elsewhere cannot leave it half made.
        self.routed.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `event_id` went to the router and may still be running.
    pub(crate) fn has_routed(&self, event_id: &str) -> bool {
        self.routed().contains(event_id)
    }

    /// Refuse new events from now on (drain); adapters then answer "try later" and do not ack.
    pub(crate) fn stop_accepting(&self) {
        self.accepting.store(false, Ordering::Release);
    }

    /// Hand `event` to the router unless it already went; `true` when it went now.
    fn route(&self, event: InboundEvent) -> bool {
        let Some(router) = &self.router else { return false };
        if self.tracks && !self.routed().insert(event.event_id.clone()) {
            return false;
        }
        if router.send(event).is_err() {
            // The router is gone (shutting down); the row stays and is replayed on the next start.
            tracing::warn!("router stopped; the event stays in the inbox for the next start");
            return false;
        }
        true
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

    /// Route every unfinished row not routed yet, oldest first (accepted by another replica,
    /// or left by a replica that led before), and forget the routed ids whose rows are finished.
    /// Returns how many went to the router now.
    pub(crate) async fn route_unfinished(&self) -> Result<usize, store::StoreError> {
        // Only ids routed before the rows are read may be forgotten: one routed meanwhile may
        // have been stored after the read, and would look finished.
        let known_before: HashSet<String> = self.routed().clone();
        let rows = self.rows.inbox_unfinished().await?;
        let unfinished: HashSet<&str> = rows.iter().map(|row| row.event_id.as_str()).collect();
        self.routed().retain(|id| !known_before.contains(id) || unfinished.contains(id.as_str()));
        let mut replayed = 0;
        for row in rows.iter().filter(|row| !known_before.contains(&row.event_id)) {
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
        let inserted = self
            .rows
            .inbox_accept(&event.event_id, event.source.platform.as_str(), &payload)
            .await
            .map_err(|e| AcceptError::Storage(e.to_string()))?;
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
