//! Per-route fixed-window rate limit (the reference gateway's: N deliveries per minute).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Window {
    started: Instant,
    count: u32,
}

/// Counts deliveries per key in fixed windows. Keys are route names, a fixed set, so the map
/// never grows beyond the configured routes.
pub(crate) struct FixedWindow {
    /// 0 disables the limit.
    limit: u32,
    window: Duration,
    windows: Mutex<HashMap<String, Window>>,
}

impl FixedWindow {
    pub(crate) fn new(limit: u32, window: Duration) -> Self {
        Self { limit, window, windows: Mutex::new(HashMap::new()) }
    }

    /// Counts one delivery; `Err(wait)` when the window is full, with the time until it ends.
    pub(crate) fn check(&self, key: &str, now: Instant) -> Result<(), Duration> {
        if self.limit == 0 {
            return Ok(());
        }
        // Nothing in the critical section can panic, so a poisoned lock still holds valid counts.
        let mut windows = self.windows.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let window = windows.entry(key.to_string()).or_insert(Window { started: now, count: 0 });
        let elapsed = now.saturating_duration_since(window.started);
        if elapsed >= self.window {
            *window = Window { started: now, count: 0 };
        }
        if window.count >= self.limit {
            return Err(self.window.saturating_sub(elapsed));
        }
        window.count += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_then_resets() {
        let limiter = FixedWindow::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(limiter.check("a", t0).is_ok());
        assert!(limiter.check("a", t0).is_ok());
        assert_eq!(limiter.check("a", t0 + Duration::from_secs(20)), Err(Duration::from_secs(40)));
        assert!(limiter.check("b", t0).is_ok(), "routes are counted separately");
        assert!(limiter.check("a", t0 + Duration::from_secs(60)).is_ok());
    }

    #[test]
    fn zero_means_unlimited() {
        let limiter = FixedWindow::new(0, Duration::from_secs(60));
        let now = Instant::now();
        assert!((0..1000).all(|_| limiter.check("a", now).is_ok()));
    }
}
