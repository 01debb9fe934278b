//! Published rate limits a fake can enforce with 429s, the way the real platform would: token
//! buckets (a rate and a burst) or sliding windows (at most `count` requests in any `window`),
//! for everything, per chat or per group. A refused request is not counted, as on the real
//! platforms; the answer carries how long to wait.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How one limit counts.
#[derive(Clone, Debug, PartialEq)]
pub enum Rule {
    /// `per_second` on average, `burst` back to back. A request up to `allowance` earlier than
    /// the bucket allows is still let through: the server judges arrival times, which network
    /// and scheduling jitter move against the send times a client paced by.
    Bucket { per_second: f64, burst: f64, allowance: Duration },
    /// At most `count` requests in any `window` (stricter than a window that resets).
    Window { count: usize, window: Duration },
}

/// What one limit is counted per.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Per {
    /// Every limited request together.
    Everything,
    /// Each chat (channel, conversation) on its own.
    Chat,
    /// Each group chat on its own (requests to private chats do not count).
    Group,
}

/// One enforced limit.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimit {
    pub per: Per,
    pub rule: Rule,
}

impl RateLimit {
    pub fn bucket(per: Per, per_second: f64, burst: f64, allowance: Duration) -> RateLimit {
        RateLimit { per, rule: Rule::Bucket { per_second, burst, allowance } }
    }

    pub fn window(per: Per, count: usize, window: Duration) -> RateLimit {
        RateLimit { per, rule: Rule::Window { count, window } }
    }
}

/// The limits in force and what they have counted.
#[derive(Debug, Default)]
pub(crate) struct Enforcer {
    limits: Vec<RateLimit>,
    /// (limit index, key) → the bucket's theoretical arrival time.
    tat: HashMap<(usize, String), Instant>,
    /// (limit index, key) → arrivals still inside the window.
    arrivals: HashMap<(usize, String), VecDeque<Instant>>,
    /// Requests refused with a 429 so far.
    pub(crate) refused: usize,
}

impl Enforcer {
    /// Enforce `limits` from now on, counting from zero.
    pub(crate) fn set(&mut self, limits: Vec<RateLimit>) {
        *self = Enforcer { limits, ..Enforcer::default() };
    }

    /// Count a request to `chat` arriving at `now`, or refuse it with how long to wait.
    pub(crate) fn admit(&mut self, chat: &str, is_group: bool, now: Instant) -> Result<(), Duration> {
        let keys: Vec<(usize, String)> = self
            .limits
            .iter()
            .enumerate()
            .filter_map(|(i, limit)| match limit.per {
                Per::Everything => Some((i, String::new())),
                Per::Chat => Some((i, chat.to_string())),
                Per::Group => is_group.then(|| (i, chat.to_string())),
            })
            .collect();
        let wait = keys.iter().map(|key| self.wait(key, now)).max().unwrap_or_default();
        if !wait.is_zero() {
            self.refused += 1;
            return Err(wait);
        }
        for key in keys {
            match self.limits[key.0].rule {
                Rule::Bucket { per_second, .. } => {
                    let tat = self.tat.entry(key).or_insert(now);
                    *tat = (*tat).max(now) + Duration::from_secs_f64(1.0 / per_second);
                }
                Rule::Window { .. } => self.arrivals.entry(key).or_default().push_back(now),
            }
        }
        Ok(())
    }

    fn wait(&mut self, key: &(usize, String), now: Instant) -> Duration {
        match self.limits[key.0].rule {
            Rule::Bucket { per_second, burst, allowance } => {
                let interval = Duration::from_secs_f64(1.0 / per_second);
                let tolerance = interval.mul_f64((burst - 1.0).max(0.0)) + allowance;
                let earliest = self.tat.get(key).and_then(|tat| tat.checked_sub(tolerance)).unwrap_or(now);
                earliest.saturating_duration_since(now)
            }
            Rule::Window { count, window } => {
                let arrivals = self.arrivals.entry(key.clone()).or_default();
                while arrivals.front().is_some_and(|at| now.duration_since(*at) >= window) {
                    arrivals.pop_front();
                }
                match arrivals.front() {
                    Some(first) if arrivals.len() >= count => (*first + window).saturating_duration_since(now),
                    _ => Duration::ZERO,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refuses_until_the_rate_refills() {
        let mut enforcer = Enforcer::default();
        enforcer.set(vec![RateLimit::bucket(Per::Chat, 1.0, 3.0, Duration::ZERO)]);
        let now = Instant::now();
        for _ in 0..3 {
            assert_eq!(enforcer.admit("a", false, now), Ok(()));
        }
        assert_eq!(enforcer.admit("a", false, now), Err(Duration::from_secs(1)));
        assert_eq!(enforcer.admit("b", false, now), Ok(()), "another chat has its own bucket");
        assert_eq!(enforcer.admit("a", false, now + Duration::from_secs(1)), Ok(()));
        assert_eq!(enforcer.refused, 1);
    }

    #[test]
    fn a_window_counts_every_request_of_the_last_window() {
        let mut enforcer = Enforcer::default();
        enforcer
            .set(vec![RateLimit::window(Per::Chat, 5, Duration::from_secs(5)), RateLimit::window(Per::Group, 1, Duration::from_secs(60))]);
        let now = Instant::now();
        for second in 0..5 {
            assert_eq!(enforcer.admit("c", false, now + Duration::from_secs(second)), Ok(()));
        }
        assert_eq!(enforcer.admit("c", false, now + Duration::from_millis(4999)), Err(Duration::from_millis(1)));
        assert_eq!(enforcer.admit("c", false, now + Duration::from_secs(5)), Ok(()));
        assert_eq!(enforcer.admit("g", true, now), Ok(()));
        assert!(enforcer.admit("g", true, now + Duration::from_secs(1)).is_err(), "the group limit applies to groups");
    }

    #[test]
    fn twenty_a_minute_to_a_group_means_any_minute() {
        // Telegram's "not more than 20 messages per minute to the same group", as the fake counts
        // it. A bucket of 20 a minute with a burst of 20 (what the gateway paced by before) with
        // one a second per chat sends parts at 0, 0, 0, 1, 2, … s: the 21st, at 18 s, is refused.
        let mut enforcer = Enforcer::default();
        enforcer.set(vec![RateLimit::window(Per::Group, 20, Duration::from_secs(60))]);
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let bucket_schedule = [0, 0, 0].into_iter().chain(1..=18);
        let refused: Vec<u64> = bucket_schedule.filter(|&s| enforcer.admit("-100", true, at(s)).is_err()).collect();
        assert_eq!(refused, vec![18]);
        // The 21st goes through once the first has left the minute.
        assert_eq!(enforcer.admit("-100", true, at(60)), Ok(()));
        // Private chats are not groups.
        assert!((0..30).all(|_| enforcer.admit("100", false, at(1)).is_ok()));
    }
}
