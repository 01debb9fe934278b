//! Counting running turns, so a drain can wait for them to finish.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct TurnTracker {
    active: AtomicUsize,
    draining: AtomicBool,
    idle: Notify,
}

impl TurnTracker {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn begin(&self) {
        self.active.fetch_add(1, Ordering::AcqRel);
    }
    pub fn end(&self) {
        if self.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }
    /// From now on no new turn starts; queued messages stay in the inbox.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }
    /// Resolves once no turn is running.
    pub async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.active() == 0 {
                return;
            }
            notified.await;
        }
    }
}
