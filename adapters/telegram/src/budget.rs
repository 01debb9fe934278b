//! The send budget: Telegram's flood limits kept on our side (a global rate, a per-chat rate and
//! a per-group-per-minute rate) so a busy gateway waits a little instead of collecting 429s, and a
//! `retry_after` from Telegram holds back every later send to that chat, not just the one that
//! was refused.
//!
//! Each limit is a GCRA bucket: a send reserves the next slot and sleeps until it; reservations
//! are taken under one short lock and waited for outside it.

use crate::settings::SendBudget;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Sends allowed back to back in one chat before the per-chat rate applies.
const CHAT_BURST: f64 = 3.0;

#[derive(Debug)]
struct Bucket {
    interval: Duration,
    tolerance: Duration,
}

impl Bucket {
    fn new(per_second: f64, burst: f64) -> Option<Self> {
        (per_second > 0.0 && per_second.is_finite()).then(|| {
            let interval = Duration::from_secs_f64(1.0 / per_second);
            Self { interval, tolerance: interval.mul_f64((burst - 1.0).max(0.0)) }
        })
    }

    /// Reserve the next slot at or after `now`; returns when it may be used and updates `tat`.
    fn reserve(&self, tat: &mut Instant, now: Instant) -> Instant {
        let earliest = tat.checked_sub(self.tolerance).unwrap_or(now).max(now);
        *tat = (*tat).max(now) + self.interval;
        earliest
    }
}

#[derive(Debug)]
pub struct Budget {
    global: Option<Bucket>,
    chat: Option<Bucket>,
    group: Option<Bucket>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    global_tat: Option<Instant>,
    chat_tat: HashMap<i64, Instant>,
    group_tat: HashMap<i64, Instant>,
    /// Telegram said wait: nothing goes to this chat before then.
    blocked_until: HashMap<i64, Instant>,
}

impl Budget {
    pub fn new(limits: SendBudget) -> Self {
        Self {
            global: Bucket::new(limits.global_per_second, limits.global_per_second),
            chat: Bucket::new(limits.per_chat_per_second, CHAT_BURST),
            group: Bucket::new(limits.group_per_minute / 60.0, limits.group_per_minute),
            state: Mutex::new(State::default()),
        }
    }

    /// Wait until a message may go to `chat_id` (negative ids are groups and channels).
    pub async fn acquire(&self, chat_id: i64) {
        let now = Instant::now();
        let at = self.reserve(chat_id, now);
        // Only sleep when there is a wait: tokio's timer rounds a deadline up to its next
        // millisecond tick, so even a sleep until "now" would hold every send up to a millisecond.
        if at > now {
            tokio::time::sleep_until(at).await;
        }
    }

    fn reserve(&self, chat_id: i64, now: Instant) -> Instant {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = now;
        if let Some(until) = state.blocked_until.get(&chat_id).copied() {
            if until > now {
                at = until;
            } else {
                state.blocked_until.remove(&chat_id);
            }
        }
        if let Some(bucket) = &self.chat {
            let tat = state.chat_tat.entry(chat_id).or_insert(now);
            at = at.max(bucket.reserve(tat, at));
        }
        if chat_id < 0
            && let Some(bucket) = &self.group
        {
            let tat = state.group_tat.entry(chat_id).or_insert(now);
            at = at.max(bucket.reserve(tat, at));
        }
        if let Some(bucket) = &self.global {
            let tat = state.global_tat.get_or_insert(now);
            at = at.max(bucket.reserve(tat, at));
        }
        // Forget idle chats so the maps do not grow with every chat ever seen.
        if state.chat_tat.len() > 4096 {
            state.chat_tat.retain(|_, tat| *tat > now);
            state.group_tat.retain(|_, tat| *tat > now);
        }
        at
    }

    /// Telegram answered 429 for `chat_id`: hold that chat back for `retry_after`.
    pub fn block(&self, chat_id: i64, retry_after: Duration) {
        let until = Instant::now() + retry_after;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let slot = state.blocked_until.entry(chat_id).or_insert(until);
        *slot = (*slot).max(until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(budget: &Budget, chat: i64, n: usize, now: Instant) -> Vec<u128> {
        (0..n).map(|_| budget.reserve(chat, now).duration_since(now).as_millis()).collect()
    }

    #[test]
    fn a_chat_gets_a_short_burst_then_one_message_a_second() {
        let budget = Budget::new(SendBudget { global_per_second: 0.0, per_chat_per_second: 1.0, group_per_minute: 0.0 });
        let now = Instant::now();
        assert_eq!(offsets(&budget, 7, 5, now), vec![0, 0, 0, 1000, 2000]);
        // Another chat is not held back by the first.
        assert_eq!(offsets(&budget, 8, 1, now), vec![0]);
    }

    #[test]
    fn the_global_rate_spreads_many_chats() {
        let budget = Budget::new(SendBudget { global_per_second: 10.0, per_chat_per_second: 0.0, group_per_minute: 0.0 });
        let now = Instant::now();
        let slots: Vec<u128> = (0..12).map(|chat| budget.reserve(chat, now).duration_since(now).as_millis()).collect();
        assert_eq!(&slots[..10], &[0; 10]);
        assert_eq!(slots[10], 100);
        assert_eq!(slots[11], 200);
    }

    #[test]
    fn groups_have_a_per_minute_limit() {
        let budget = Budget::new(SendBudget { global_per_second: 0.0, per_chat_per_second: 0.0, group_per_minute: 20.0 });
        let now = Instant::now();
        let slots = offsets(&budget, -100, 21, now);
        assert!(slots[..20].iter().all(|&ms| ms == 0));
        assert_eq!(slots[20], 3000);
    }

    #[test]
    fn retry_after_blocks_the_chat() {
        let budget = Budget::new(SendBudget::unlimited());
        budget.block(5, Duration::from_secs(3));
        let now = Instant::now();
        let wait = budget.reserve(5, now).duration_since(now);
        assert!(wait > Duration::from_millis(2900), "{wait:?}");
        assert_eq!(budget.reserve(6, now), now);
    }

    #[test]
    fn unlimited_never_waits() {
        let budget = Budget::new(SendBudget::unlimited());
        let now = Instant::now();
        assert!(offsets(&budget, -1, 100, now).iter().all(|&ms| ms == 0));
    }
}
