//! A session's running turn and the messages queued or steered behind it: what the session's
//! actor tracks between events, and what `/stop`, `/queue`, `/steer`, `/new` and `/status` read
//! and change. At most [`QUEUE_CAP`] messages wait; a dropped one is closed in the inbox so it is
//! not replayed.

use crate::agent::SteeringInbox;
use crate::store::Inbox;
use hermes_adapter::InboundEvent;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

/// Most messages a session holds while busy.
pub(crate) const QUEUE_CAP: usize = 32;

/// The turn a session is running, as the session sees it.
pub(crate) struct RunningTurn {
    event_id: String,
    /// Where `/steer` and busy-mode `steer` put text for the running turn.
    steering: SteeringInbox,
    interrupt: CancellationToken,
    /// The agent was invoked (not just waiting for a concurrency slot).
    started: Arc<AtomicBool>,
}

impl RunningTurn {
    pub(crate) fn new(event_id: String, steering: SteeringInbox, interrupt: CancellationToken, started: Arc<AtomicBool>) -> Self {
        Self { event_id, steering, interrupt, started }
    }

    /// The texts steered into the turn; after it ended, the ones it did not take.
    pub(crate) fn steering(&self) -> &SteeringInbox {
        &self.steering
    }
}

/// A session's live state, as commands see it.
pub(crate) struct SessionState {
    /// Where dropped queued messages are closed.
    inbox: Arc<dyn Inbox>,
    running: Option<RunningTurn>,
    queue: VecDeque<InboundEvent>,
    /// Messages steered into the running turn, in order; the ones it did not take are queued
    /// when it ends.
    steered: Vec<InboundEvent>,
}

impl SessionState {
    /// An idle session with nothing queued.
    pub(crate) fn new(inbox: Arc<dyn Inbox>) -> Self {
        Self { inbox, running: None, queue: VecDeque::new(), steered: Vec::new() }
    }

    pub(crate) fn is_running(&self) -> bool {
        self.running.is_some()
    }

    pub(crate) fn turn_started(&self) -> bool {
        self.running.as_ref().is_some_and(|r| r.started.load(Ordering::Acquire))
    }

    /// Interrupt the running turn, if any; it reports back when it has stopped.
    pub(crate) fn interrupt(&mut self) {
        if let Some(r) = &self.running {
            r.interrupt.cancel();
        }
    }

    /// Inject `event`'s text into the running turn after its next tool call; false when no turn
    /// runs.
    pub(crate) fn steer(&mut self, event: InboundEvent) -> bool {
        let Some(running) = &self.running else { return false };
        running.steering.push(event.text.clone());
        self.steered.push(event);
        true
    }

    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Drop queued input; each dropped message is closed in the inbox so it is not replayed.
    pub(crate) async fn clear_queue(&mut self) -> usize {
        let dropped: Vec<InboundEvent> = self.queue.drain(..).collect();
        for ev in &dropped {
            if let Err(e) = self.inbox.inbox_mark_done(&ev.event_id).await {
                tracing::warn!(error = %e, "could not close a dropped queued message");
            }
        }
        dropped.len()
    }

    /// Queue for after the running turn; `Err(cap)` when full.
    pub(crate) fn enqueue_back(&mut self, event: InboundEvent) -> Result<usize, usize> {
        if self.queue.len() >= QUEUE_CAP {
            return Err(QUEUE_CAP);
        }
        self.queue.push_back(event);
        Ok(self.queue.len())
    }

    /// Queue to run first after the running turn; `Err(cap)` when full.
    pub(crate) fn enqueue_front(&mut self, event: InboundEvent) -> Result<usize, usize> {
        if self.queue.len() >= QUEUE_CAP {
            return Err(QUEUE_CAP);
        }
        self.queue.push_front(event);
        Ok(self.queue.len())
    }

    /// The next queued message, taken off the queue.
    pub(crate) fn pop_next(&mut self) -> Option<InboundEvent> {
        self.queue.pop_front()
    }

    /// `turn` is now the session's running turn.
    pub(crate) fn begin(&mut self, turn: RunningTurn) {
        self.running = Some(turn);
    }

    /// The running turn, taken, if it is the one for `event_id` (a stale report changes nothing).
    pub(crate) fn end(&mut self, event_id: &str) -> Option<RunningTurn> {
        if self.running.as_ref().is_some_and(|r| r.event_id == event_id) { self.running.take() } else { None }
    }

    /// The messages steered into the turn that just ended, in order.
    pub(crate) fn take_steered(&mut self) -> Vec<InboundEvent> {
        std::mem::take(&mut self.steered)
    }
}
