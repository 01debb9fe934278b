//! The durable inbox: every inbound event is appended to SQLite (deduplicated on its event id)
//! before the adapter acknowledges the platform, then handed to the router. On start the events
//! accepted but not finished before a crash are replayed.

use crate::store;
use async_trait::async_trait;
use hermes_adapter::{AcceptError, AcceptOutcome, InboundEvent, InboundSink};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc;

/// Starts of a turn on one event after which a crash parks it instead of replaying it.
pub(crate) const CRASHES_BEFORE_PARKING: i64 = 3;

pub(crate) struct Inbox {
    /// The stored rows: the only store concern the inbox touches.
    rows: Arc<dyn store::Inbox>,
    router: mpsc::UnboundedSender<InboundEvent>,
    accepting: AtomicBool,
}

impl Inbox {
    pub(crate) fn new(rows: Arc<dyn store::Inbox>, router: mpsc::UnboundedSender<InboundEvent>) -> Self {
        Self { rows, router, accepting: AtomicBool::new(true) }
    }

    /// Refuse new events from now on (drain); adapters then answer "try later" and do not ack.
    pub(crate) fn stop_accepting(&self) {
        self.accepting.store(false, Ordering::Release);
    }

    fn route(&self, event: InboundEvent) {
        if self.router.send(event).is_err() {
            // The router is gone (shutting down); the row stays and is replayed on the next start.
            tracing::warn!("router stopped; the event stays in the inbox for the next start");
        }
    }

    /// Hand every accepted-but-unfinished event to the router again, oldest first.
    pub(crate) async fn replay_unfinished(&self) -> Result<usize, store::StoreError> {
        let rows = self.rows.inbox_unfinished().await?;
        let mut replayed = 0;
        for row in rows {
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
                    if self.router.send(event).is_ok() {
                        replayed += 1;
                    }
                }
                Err(e) => {
                    tracing::error!(event_id = %row.event_id, error = %e, "unreadable inbox row; marking it failed");
                    self.rows.inbox_mark_failed(&row.event_id, &format!("unreadable payload: {e}")).await?;
                }
            }
        }
        if replayed > 0 {
            tracing::info!(count = replayed, "replaying events accepted before the last stop");
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
