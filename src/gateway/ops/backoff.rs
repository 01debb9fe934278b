//! Exponential backoff with jitter for reconnecting adapters.

use std::time::Duration;

/// Delays grow `base · 2^attempt`, are jittered by ±20 % and never exceed `cap`. The attempt
/// counter is reset by the supervisor only after sustained progress, so a connection that flaps
/// (connects, fails at once) keeps backing off.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
}

impl Backoff {
    pub(crate) fn new(base: Duration, cap: Duration) -> Self {
        Self { base, cap: cap.max(base), attempt: 0 }
    }

    /// The next delay; `jitter` is a uniform sample in `[0, 1)`.
    pub(crate) fn next_delay(&mut self, jitter: f64) -> Duration {
        let factor = 2f64.powi(self.attempt.min(30) as i32);
        let raw = self.base.as_secs_f64() * factor;
        let jittered = raw * (0.8 + 0.4 * jitter.clamp(0.0, 1.0));
        self.attempt = self.attempt.saturating_add(1);
        Duration::from_secs_f64(jittered.min(self.cap.as_secs_f64()))
    }

    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }

    pub(crate) fn attempt(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_and_caps() {
        let mut b = Backoff::new(Duration::from_secs(2), Duration::from_secs(300));
        let delays: Vec<u64> = (0..10).map(|_| b.next_delay(0.5).as_secs()).collect();
        assert_eq!(delays, vec![2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
    }

    #[test]
    fn jitter_stays_within_twenty_percent_and_under_cap() {
        let mut low = Backoff::new(Duration::from_secs(10), Duration::from_secs(300));
        let mut high = low.clone();
        assert_eq!(low.next_delay(0.0), Duration::from_secs(8));
        assert_eq!(high.next_delay(0.999_999).as_secs(), 11);
        let mut capped = Backoff::new(Duration::from_secs(200), Duration::from_secs(300));
        capped.next_delay(0.0);
        assert!(capped.next_delay(1.0) <= Duration::from_secs(300));
    }

    #[test]
    fn reset_starts_over() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        for _ in 0..5 {
            b.next_delay(0.5);
        }
        b.reset();
        assert_eq!(b.next_delay(0.5), Duration::from_secs(1));
    }
}
