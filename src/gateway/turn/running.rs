//! Counting running turns, so a drain can wait for them to finish.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::Notify;

/// A running turn, counted until dropped.
pub(crate) struct RunningGuard<'a> {
    running: &'a RunningTurns,
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.running.end();
    }
}

#[derive(Debug, Default)]
pub(crate) struct RunningTurns {
    active: AtomicUsize,
    draining: AtomicBool,
    idle: Notify,
}

impl RunningTurns {
    /// A turn starts; it counts as running until the guard drops (also when the turn panics,
    /// or a drain would wait for it forever).
    pub(crate) fn begin(&self) -> RunningGuard<'_> {
        self.active.fetch_add(1, Ordering::AcqRel);
        RunningGuard { running: self }
    }
    fn end(&self) {
        if self.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }
    pub(crate) fn active(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }
    /// From now on no new turn starts; queued messages stay in the inbox.
    pub(crate) fn set_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }
    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }
    /// Resolves once no turn is running.
    pub(crate) async fn wait_idle(&self) {
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
