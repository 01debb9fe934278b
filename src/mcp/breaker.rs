//! The per-server circuit breaker: after `threshold` consecutive TRANSPORT failures of calls (not
//! tool errors, not timeouts) calls are answered at once for `cooldown`, then one may try again.

use std::time::{Duration, Instant};

#[derive(Debug)]
pub(crate) struct Breaker {
    threshold: u32,
    cooldown: Duration,
    failures: u32,
    open_until: Option<Instant>,
}

impl Breaker {
    pub(crate) fn new(threshold: u32, cooldown: Duration) -> Self {
        Self { threshold: threshold.max(1), cooldown, failures: 0, open_until: None }
    }

    /// `Some(seconds left)` while open; once the cooldown has passed the breaker is half-open:
    /// calls go through, and the next failure opens it again.
    pub(crate) fn open_for(&self, now: Instant) -> Option<Duration> {
        self.open_until.filter(|until| *until > now).map(|until| until - now)
    }

    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    pub(crate) fn record_success(&mut self) {
        self.failures = 0;
        self.open_until = None;
    }

    pub(crate) fn record_failure(&mut self, now: Instant) {
        self.failures = self.failures.saturating_add(1);
        if self.failures >= self.threshold {
            self.open_until = Some(now + self.cooldown);
        }
    }
}
