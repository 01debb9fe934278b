//! The send budget: Telegram's flood limits kept on our side (a global rate, a per-chat rate with
//! a short burst and at most so many messages to a group in any minute) so a busy gateway waits a
//! little instead of collecting 429s, and a `retry_after` from Telegram holds back every later
//! send to that chat, not just the one that was refused. The limits themselves are the shared
//! [`hermes_adapter::pacing::Pacer`].

use crate::settings::SendBudget;
use hermes_adapter::pacing::{Destination, Limits, Pacer, Rate, Window};
use std::time::Duration;
use tokio::time::Instant;

/// Sends allowed back to back in one chat before the per-chat rate applies: a three-part answer
/// goes out at once.
const CHAT_BURST: f64 = 3.0;

/// Added to the group limit's minute. Telegram counts a group's messages as they arrive, and an
/// arrival trails the instant we paced it by a varying network and scheduling delay: were the
/// 21st message paced exactly 60 s after the 1st, a 1st that arrived a little late and a 21st
/// that did not would land 20 messages + 1 inside one minute. A second covers that jitter for
/// the price of one second per 20 messages in a group that sends without pause.
const GROUP_ARRIVAL_MARGIN: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Budget {
    pacer: Pacer<i64>,
}

impl Budget {
    pub fn new(limits: SendBudget) -> Self {
        Self {
            pacer: Pacer::new(Limits {
                global: Rate::per_second(limits.global_per_second, limits.global_per_second),
                chat: Rate::per_second(limits.per_chat_per_second, CHAT_BURST),
                // Telegram: "your bot will not be able to send more than 20 messages per minute to
                // the same group" — any minute, so a count in a sliding window (see
                // `Window`: a bucket of 20 a minute with a burst lets about 40 through in the
                // first minute), and every part of a split answer is a message of its own.
                group: Window::per_minute(limits.group_per_minute).map(|w| w.widened(GROUP_ARRIVAL_MARGIN)),
            }),
        }
    }

    /// Wait until a message may go to `chat_id` (negative ids are groups and channels).
    pub async fn acquire(&self, chat_id: i64) {
        self.pacer.acquire(destination(&chat_id)).await;
    }

    /// Take the next slot for `chat_id` at or after `now` and return it (what `acquire` waits
    /// until).
    pub fn reserve(&self, chat_id: i64, now: Instant) -> Instant {
        self.pacer.reserve(destination(&chat_id), now)
    }

    /// Telegram answered 429 for `chat_id`: hold that chat back for `retry_after`.
    pub fn block(&self, chat_id: i64, retry_after: Duration) {
        self.pacer.block(&chat_id, retry_after);
    }
}

/// Groups and channels (negative ids) count against the group limit as well.
fn destination(chat_id: &i64) -> Destination<'_, i64> {
    if *chat_id < 0 { Destination::in_group(chat_id, chat_id) } else { Destination::chat(chat_id) }
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
    fn a_group_gets_twenty_messages_in_any_minute_and_no_more() {
        let budget = Budget::new(SendBudget { global_per_second: 0.0, per_chat_per_second: 0.0, group_per_minute: 20.0 });
        let now = Instant::now();
        let slots = offsets(&budget, -100, 41, now);
        assert!(slots[..20].iter().all(|&ms| ms == 0), "twenty go at once: {slots:?}");
        let minute_later = 60_000 + GROUP_ARRIVAL_MARGIN.as_millis();
        assert!(slots[20..40].iter().all(|&ms| ms == minute_later), "the next twenty a minute (and the margin) later: {slots:?}");
        assert_eq!(slots[40], 2 * minute_later);
        // A private chat is not a group.
        assert_eq!(offsets(&budget, 100, 41, now), vec![0; 41]);
    }

    #[test]
    fn with_the_default_limits_a_long_answer_to_a_group_never_puts_more_than_twenty_in_a_minute() {
        // A 45-part answer asked for at once: three parts go at once, then one a second (the
        // chat's limit), until twenty are out; the rest wait for the first minute to pass.
        let budget = Budget::new(SendBudget::default());
        let now = Instant::now();
        let slots: Vec<Duration> = (0..45).map(|_| budget.reserve(-1001, now).duration_since(now)).collect();
        assert!(slots.windows(2).all(|w| w[0] <= w[1]), "in order: {slots:?}");
        assert_eq!(most_in_any_window(&slots, Duration::from_secs(60)), 20, "{slots:?}");
        assert_eq!(&slots[..4], &[Duration::ZERO, Duration::ZERO, Duration::ZERO, Duration::from_secs(1)]);
        assert_eq!(slots[19], Duration::from_secs(17), "twenty parts in 17 s");
        assert_eq!(slots[20], Duration::from_secs(61), "the 21st a minute after the first, with the margin");
        // Jittered arrivals: each part up to 900 ms late, the earliest the most. Still 20 a minute.
        let arrivals: Vec<Duration> =
            slots.iter().enumerate().map(|(i, s)| *s + Duration::from_millis(900 - (i as u64 * 20).min(900))).collect();
        let mut sorted = arrivals.clone();
        sorted.sort();
        assert_eq!(most_in_any_window(&sorted, Duration::from_secs(60)), 20);
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

    #[test]
    fn with_the_default_limits_a_three_part_answer_and_replies_a_second_apart_never_wait() {
        let budget = Budget::new(SendBudget::default());
        let start = Instant::now();
        assert_eq!(offsets(&budget, 42, 3, start), vec![0, 0, 0], "a three-part answer goes out at once");
        // Two conversations side by side, one reply a second each: a private chat and a group.
        for second in 0..20 {
            let now = start + Duration::from_secs(second);
            for chat in [43, -1001] {
                assert_eq!(budget.reserve(chat, now), now, "chat {chat}, reply {second}");
            }
        }
    }

    /// The most sends of `times` (sorted) in any window of `window`.
    fn most_in_any_window(times: &[Duration], window: Duration) -> usize {
        times.iter().enumerate().map(|(i, from)| times[i..].iter().take_while(|t| **t < *from + window).count()).max().unwrap_or(0)
    }

    #[test]
    fn with_the_default_limits_a_burst_to_twenty_chats_stays_under_telegrams_limits() {
        // 200 messages to 20 private chats asked for at once, each chat's in order.
        let budget = Budget::new(SendBudget::default());
        let now = Instant::now();
        let slots: Vec<(i64, Duration)> =
            (0..10).flat_map(|_| 1..=20).map(|chat| (chat, budget.reserve(chat, now).duration_since(now))).collect();
        let mut all: Vec<Duration> = slots.iter().map(|(_, s)| *s).collect();
        all.sort();
        assert!(all[199] <= Duration::from_secs(8), "all 200 within 8 s: {:?}", all[199]);
        assert_eq!(all.iter().filter(|s| s.is_zero()).count(), 30, "the global burst goes at once");
        assert!(most_in_any_window(&all, Duration::from_secs(1)) <= 60, "a burst of 30 plus 30 a second at most");
        for chat in 1..=20 {
            let times: Vec<Duration> = slots.iter().filter(|(c, _)| *c == chat).map(|(_, s)| *s).collect();
            assert!(times.windows(2).all(|w| w[0] <= w[1]), "chat {chat} in order: {times:?}");
            assert!(most_in_any_window(&times, Duration::from_secs(1)) <= 3, "chat {chat}: a burst of 3, then 1 a second: {times:?}");
            assert!(most_in_any_window(&times, Duration::from_secs(5)) <= 7, "chat {chat}: {times:?}");
        }
    }
}
