//! The state of a fake behind one lock, with the wake-up test-side waiters sleep on and the
//! server's shutdown signal; each fake keeps its own `State` in one.

use crate::serve::ShutdownSignal;
use std::sync::Mutex;
use tokio::sync::Notify;

pub(crate) struct Shared<S> {
    state: Mutex<S>,
    /// Wakes test-side waiters: the bot did something.
    pub changed: Notify,
    pub shutdown: ShutdownSignal,
}

impl<S> Shared<S> {
    pub(crate) fn new(state: S, shutdown: ShutdownSignal) -> Self {
        Self { state: Mutex::new(state), changed: Notify::new(), shutdown }
    }

    /// Runs `f` on the state; a panic in another holder does not poison it for the test.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state)
    }
}
