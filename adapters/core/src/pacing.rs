//! Outbound pacing: a platform's published send limits kept on our side, so a busy gateway waits
//! a little instead of collecting 429s, while a short burst (a multi-part answer, a quick
//! exchange) still goes out at once.
//!
//! A [`Pacer`] holds keyed limits — one global, one per chat, each a GCRA token bucket with a rate
//! and a burst, and one per group for platforms that limit groups, a sliding [`Window`] — plus
//! "the platform told us to wait" blocks per chat and for everything (a 429's `retry_after`). A
//! send reserves the earliest slot every limit allows under one short lock and sleeps until it
//! outside the lock; a courtesy notice takes a slot only if one is free now. Keys whose limits
//! are full again and whose blocks have ended are forgotten, so memory follows the chats that
//! sent recently, not every chat ever seen.
//!
//! The `check_*` helpers validate the numbers of an adapter's `send_budget:` block.

use crate::registration::SettingError;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Keys tracked before the first sweep of idle ones; later sweeps wait until the map has doubled
/// since the last, so sweeping costs O(1) per send on average.
const SWEEP_FLOOR: usize = 1024;
/// Idle keys are swept at least this often too, so a quiet pacer does not keep a past crowd.
const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// The longest spacing a limit is kept to: a configured rate like `1e-300` a second would
/// otherwise overflow the clock (a panic) instead of meaning "hardly ever".
const MAX_SPACING: Duration = Duration::from_secs(24 * 3600);

/// The largest count a [`Window`] keeps.
pub const MAX_WINDOW_COUNT: usize = 100_000;

/// `seconds` as a duration of at most [`MAX_SPACING`].
fn spacing(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds).unwrap_or(MAX_SPACING).min(MAX_SPACING)
}

/// One limit: `per_second` sends on average, up to `burst` back to back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    per_second: f64,
    burst: f64,
}

impl Rate {
    /// `per_second` sends a second with bursts of `burst` (at least 1). `None` — no limit —
    /// when `per_second` is zero, negative or not finite (configs are checked before this with
    /// [`check_rate`], so only a deliberate 0 gets here).
    pub fn per_second(per_second: f64, burst: f64) -> Option<Rate> {
        (per_second > 0.0 && per_second.is_finite()).then_some(Rate { per_second, burst: burst.max(1.0) })
    }

    /// `per_minute` sends a minute with bursts of `burst`.
    pub fn per_minute(per_minute: f64, burst: f64) -> Option<Rate> {
        Rate::per_second(per_minute / 60.0, burst)
    }
}

/// A count limit: at most `count` sends in any `window` (a sliding window, not one that resets).
///
/// Why not a token bucket: a platform that publishes "N a minute" counts any minute, and a GCRA
/// bucket of rate N/min with burst B lets B go at once and then one every 60/N s, so the first
/// minute holds B + N - 1 sends (with B = N, about twice the limit). Only B = 1 keeps every minute
/// under N, and then even a two-part answer waits 60/N s between its parts. The window lets any
/// burst of up to N out at once and then waits exactly until the oldest of the last N leaves the
/// window: the most a platform's count allows, and never more.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    count: usize,
    window: Duration,
}

impl Window {
    /// At most `per_minute` sends in any minute. A whole number is kept as it is (20 → 20 in any
    /// 60 s); a fraction keeps its average with a whole count (20.5 → 20 in any 58.5 s, 0.5 → 1 in
    /// any 120 s). `None` — no limit — for zero, negative or not finite, as [`Rate::per_second`],
    /// and past [`MAX_WINDOW_COUNT`] (no platform publishes such a count; keeping that many send
    /// times per group would only cost memory).
    pub fn per_minute(per_minute: f64) -> Option<Window> {
        if !(per_minute > 0.0 && per_minute <= MAX_WINDOW_COUNT as f64) {
            return None;
        }
        // At least 1, and at most what a window of one minute can hold at this rate.
        let count = per_minute.floor().max(1.0);
        // `count` is a whole number from 1 to MAX_WINDOW_COUNT: the cast is exact.
        Some(Window { count: count as usize, window: spacing(60.0 * count / per_minute) })
    }

    /// The same count over a window `margin` longer: the platform counts arrivals, which network
    /// and scheduling jitter move against the instants we paced by, so a window kept to the
    /// exact published length could see the N+1st arrive a few milliseconds inside it.
    pub fn widened(self, margin: Duration) -> Window {
        Window { window: self.window.saturating_add(margin), ..self }
    }

    /// The earliest instant at or after `now` one more send fits, given the slots already taken
    /// (oldest first). Slots are taken in order, so the new one also comes no earlier than the
    /// newest: then "the `count`-th newest is a full window before it" is the whole check.
    fn earliest(&self, taken: Option<&VecDeque<Instant>>, now: Instant) -> Instant {
        let Some(taken) = taken else { return now };
        let newest = taken.back().map_or(now, |at| (*at).max(now));
        match taken.len().checked_sub(self.count).and_then(|skip| taken.get(skip)) {
            Some(kth_newest) => newest.max(*kth_newest + self.window),
            None => newest,
        }
    }

    fn commit(&self, taken: &mut VecDeque<Instant>, at: Instant) {
        taken.push_back(at);
        // Only the newest `count` can decide a later slot.
        while taken.len() > self.count {
            taken.pop_front();
        }
    }
}

/// The limits of a [`Pacer`]; `None` switches one off.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Limits {
    /// Every send of the adapter.
    pub global: Option<Rate>,
    /// Sends to one chat (channel, room, conversation).
    pub chat: Option<Rate>,
    /// Sends to one group, for platforms with a separate group limit (Telegram's per minute).
    pub group: Option<Window>,
}

/// A GCRA bucket: a send conforms at `t` when `t >= tat - tolerance`; it then moves the
/// theoretical arrival time `tat` one interval past `max(tat, t)`.
#[derive(Debug)]
struct Bucket {
    interval: Duration,
    tolerance: Duration,
}

impl Bucket {
    fn new(rate: Rate) -> Bucket {
        let interval = spacing(1.0 / rate.per_second);
        // A burst too large to express is no limit on bursts (`earliest` then finds no instant
        // that far back).
        let tolerance = Duration::try_from_secs_f64(interval.as_secs_f64() * (rate.burst - 1.0)).unwrap_or(Duration::MAX);
        Bucket { interval, tolerance }
    }

    /// The earliest instant at or after `now` this bucket allows a send; an unknown key (`None`)
    /// is a full bucket.
    fn earliest(&self, tat: Option<Instant>, now: Instant) -> Instant {
        tat.and_then(|tat| tat.checked_sub(self.tolerance)).map_or(now, |at| at.max(now))
    }

    fn commit(&self, tat: &mut Instant, at: Instant) {
        *tat = (*tat).max(at) + self.interval;
    }
}

/// Where one send goes: the chat, and the group it counts against when the platform has a
/// group limit.
#[derive(Debug)]
pub struct Destination<'a, K> {
    /// The chat's key; `None` for requests that count only globally.
    pub chat: Option<&'a K>,
    /// The group's key, for sends that count against a group limit too.
    pub group: Option<&'a K>,
    /// A chat whose "wait" block this request honours without counting against its rate (an
    /// edit in a chat the platform told us to leave alone for a while).
    pub held_by: Option<&'a K>,
}

// By hand: a derive would ask `K: Copy`, and a destination only borrows its keys.
impl<K> Clone for Destination<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Destination<'_, K> {}

impl<'a, K> Destination<'a, K> {
    /// A send to `chat`.
    pub fn chat(chat: &'a K) -> Self {
        Destination { chat: Some(chat), group: None, held_by: None }
    }

    /// A send to `chat`, which counts against `group`'s limit too.
    pub fn in_group(chat: &'a K, group: &'a K) -> Self {
        Destination { chat: Some(chat), group: Some(group), held_by: None }
    }

    /// A request that counts only against the global limit (an edit, a typing notice).
    pub fn global() -> Self {
        Destination { chat: None, group: None, held_by: None }
    }

    /// A request in `chat` that counts only against the global limit but, like a send, waits
    /// while a 429 holds that chat back (an edit where the platform limits edits apart from
    /// posts, but says "wait" per chat).
    pub fn global_in(chat: &'a K) -> Self {
        Destination { chat: None, group: None, held_by: Some(chat) }
    }
}

/// Keyed limits and wait blocks for one adapter's sends; see the module doc.
#[derive(Debug)]
pub struct Pacer<K> {
    global: Option<Bucket>,
    chat: Option<Bucket>,
    group: Option<Window>,
    state: Mutex<State<K>>,
}

#[derive(Debug)]
struct State<K> {
    global_tat: Option<Instant>,
    chat_tat: HashMap<K, Instant>,
    /// Per group, the slots of its newest sends (at most the window's count), oldest first.
    group_sent: HashMap<K, VecDeque<Instant>>,
    /// The platform said wait: nothing goes to this chat before then.
    chat_blocked: HashMap<K, Instant>,
    /// The platform said wait for everything (a global 429).
    global_blocked: Option<Instant>,
    /// Tracked keys above which idle ones are swept.
    sweep_above: usize,
    /// When idle keys were last swept.
    swept_at: Option<Instant>,
}

impl<K> Default for State<K> {
    fn default() -> Self {
        State {
            global_tat: None,
            chat_tat: HashMap::new(),
            group_sent: HashMap::new(),
            chat_blocked: HashMap::new(),
            global_blocked: None,
            sweep_above: SWEEP_FLOOR,
            swept_at: None,
        }
    }
}

impl<K> State<K> {
    fn tracked(&self) -> usize {
        self.chat_tat.len() + self.group_sent.len() + self.chat_blocked.len()
    }
}

impl<K: Hash + Eq + Clone> Pacer<K> {
    /// A pacer with these buckets.
    pub fn new(limits: Limits) -> Self {
        Pacer {
            global: limits.global.map(Bucket::new),
            chat: limits.chat.map(Bucket::new),
            group: limits.group,
            state: Mutex::new(State::default()),
        }
    }

    /// Wait until a send to `to` may go, and take its slot.
    pub async fn acquire(&self, to: Destination<'_, K>) {
        let now = Instant::now();
        let at = self.reserve(to, now);
        // Only sleep when there is a wait: tokio's timer rounds a deadline up to its next
        // millisecond tick, so even a sleep until "now" would hold every send up to a millisecond.
        if at > now {
            tokio::time::sleep_until(at).await;
        }
    }

    /// Take the earliest slot at or after `now` that every bucket of `to` and every block allows,
    /// and return it (what [`Pacer::acquire`] sleeps until). Each bucket is charged at that
    /// slot, so a send held back by one limit never lets the next one crowd another.
    pub fn reserve(&self, to: Destination<'_, K>, now: Instant) -> Instant {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let at = self.earliest(&state, to, now);
        self.commit(&mut state, to, at);
        self.sweep_idle(&mut state, now);
        at
    }

    /// Take a slot for `to` only if one is free at `now`, and say whether it was: for a courtesy
    /// notice that is worth neither a wait nor a place in line (a flood of them must not hold
    /// back the answers, nor the loop that sends them). Nothing is charged when it says no.
    pub fn try_reserve(&self, to: Destination<'_, K>, now: Instant) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let free = self.earliest(&state, to, now) <= now;
        if free {
            self.commit(&mut state, to, now);
            self.sweep_idle(&mut state, now);
        }
        free
    }

    /// The earliest instant at or after `now` that every limit of `to` and every block allows.
    fn earliest(&self, state: &State<K>, to: Destination<'_, K>, now: Instant) -> Instant {
        let mut at = now;
        if let Some(until) = state.global_blocked {
            at = at.max(until);
        }
        for chat in [to.chat, to.held_by].into_iter().flatten() {
            if let Some(until) = state.chat_blocked.get(chat) {
                at = at.max(*until);
            }
        }
        if let Some(bucket) = &self.global {
            at = at.max(bucket.earliest(state.global_tat, at));
        }
        if let (Some(bucket), Some(chat)) = (&self.chat, to.chat) {
            at = at.max(bucket.earliest(state.chat_tat.get(chat).copied(), at));
        }
        if let (Some(window), Some(group)) = (&self.group, to.group) {
            at = at.max(window.earliest(state.group_sent.get(group), at));
        }
        at
    }

    /// Charge every limit of `to` with a send at `at`.
    fn commit(&self, state: &mut State<K>, to: Destination<'_, K>, at: Instant) {
        if let Some(bucket) = &self.global {
            bucket.commit(state.global_tat.get_or_insert(at), at);
        }
        if let (Some(bucket), Some(chat)) = (&self.chat, to.chat) {
            bucket.commit(state.chat_tat.entry(chat.clone()).or_insert(at), at);
        }
        if let (Some(window), Some(group)) = (&self.group, to.group) {
            window.commit(state.group_sent.entry(group.clone()).or_default(), at);
        }
    }

    /// The platform answered "too many requests" for `chat`: nothing more goes there for
    /// `retry_after` (sends already waiting for a slot wait for this too when they next reserve).
    pub fn block(&self, chat: &K, retry_after: Duration) {
        self.block_until(Some(chat), until_after(retry_after));
    }

    /// The platform answered "too many requests" for everything (a global 429): nothing goes
    /// anywhere for `retry_after`.
    pub fn block_all(&self, retry_after: Duration) {
        self.block_until(None, until_after(retry_after));
    }

    /// Hold back `chat` (or everything, for `None`) until `until`; a longer block already in
    /// place stays.
    pub fn block_until(&self, chat: Option<&K>, until: Instant) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let slot = match chat {
            Some(chat) => state.chat_blocked.entry(chat.clone()).or_insert(until),
            None => state.global_blocked.get_or_insert(until),
        };
        *slot = (*slot).max(until);
    }

    /// How many chat and group keys the pacer remembers (for tests of its memory bound).
    pub fn tracked_keys(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).tracked()
    }

    /// Forget keys whose bucket is full again and whose block has ended: an idle key behaves
    /// exactly like one never seen, so forgetting it changes no reservation.
    fn sweep_idle(&self, state: &mut State<K>, now: Instant) {
        let swept_at = *state.swept_at.get_or_insert(now);
        if state.tracked() <= state.sweep_above && now < swept_at + SWEEP_EVERY {
            return;
        }
        state.chat_tat.retain(|_, tat| *tat > now);
        // A group whose newest send has left the window allows a full count again.
        let window = self.group.map_or(Duration::ZERO, |w| w.window);
        state.group_sent.retain(|_, sent| sent.back().is_some_and(|last| *last + window > now));
        state.chat_blocked.retain(|_, until| *until > now);
        if state.global_blocked.is_some_and(|until| until <= now) {
            state.global_blocked = None;
        }
        state.sweep_above = (state.tracked() * 2).max(SWEEP_FLOOR);
        state.swept_at = Some(now);
    }
}

/// A rate of a `send_budget:` block: a finite number, 0 or more (0 switches the limit off).
pub fn check_rate(path: &str, value: f64) -> Result<(), SettingError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(SettingError::key(path, format!("{value} is not a rate: use a number of messages, 0 or more (0 = no limit)")))
    }
}

/// A burst of a `send_budget:` block: how many messages may go back to back, at least 1.
pub fn check_burst(path: &str, value: f64) -> Result<(), SettingError> {
    if value.is_finite() && value >= 1.0 {
        Ok(())
    } else {
        Err(SettingError::key(path, format!("{value} is not a burst: use the number of messages sent back to back, 1 or more")))
    }
}

/// The longest a platform's "retry after" may hold sends back. The value comes from the server's
/// answer: a broken or hostile one (`retry_after: 1e12`) must neither overflow the clock (a panic)
/// nor mute a chat for years; past an hour the adapter's own retries and errors take over.
pub const MAX_BLOCK: Duration = Duration::from_secs(3600);

fn until_after(retry_after: Duration) -> Instant {
    let now = Instant::now();
    now + retry_after.min(MAX_BLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn per_second(rate: f64, burst: f64) -> Option<Rate> {
        Rate::per_second(rate, burst)
    }

    /// Milliseconds after `now` of `n` reservations for `to`, all asked for at `now`.
    fn offsets(pacer: &Pacer<i64>, to: Destination<'_, i64>, n: usize, now: Instant) -> Vec<u128> {
        (0..n).map(|_| pacer.reserve(to, now).duration_since(now).as_millis()).collect()
    }

    #[test]
    fn a_chat_gets_its_burst_at_once_then_the_rate() {
        let pacer = Pacer::new(Limits { chat: per_second(1.0, 3.0), ..Limits::default() });
        let now = Instant::now();
        assert_eq!(offsets(&pacer, Destination::chat(&7), 5, now), vec![0, 0, 0, 1000, 2000]);
        // Another chat is not held back by the first.
        assert_eq!(offsets(&pacer, Destination::chat(&8), 1, now), vec![0]);
    }

    #[test]
    fn sends_spaced_at_the_rate_never_wait_and_the_burst_refills() {
        let pacer = Pacer::new(Limits { chat: per_second(1.0, 3.0), ..Limits::default() });
        let start = Instant::now();
        for second in 0..10 {
            let now = start + Duration::from_secs(second);
            assert_eq!(pacer.reserve(Destination::chat(&1), now), now, "reply {second}");
        }
        // After a quiet spell the full burst is back.
        let later = start + Duration::from_secs(20);
        assert_eq!(offsets(&pacer, Destination::chat(&1), 4, later), vec![0, 0, 0, 1000]);
    }

    #[test]
    fn the_global_rate_spreads_many_chats() {
        let pacer = Pacer::new(Limits { global: per_second(10.0, 10.0), chat: per_second(1.0, 3.0), ..Limits::default() });
        let now = Instant::now();
        let slots: Vec<u128> = (0..12).map(|chat| pacer.reserve(Destination::chat(&chat), now).duration_since(now).as_millis()).collect();
        assert_eq!(&slots[..10], &[0; 10]);
        assert_eq!(&slots[10..], &[100, 200]);
    }

    #[test]
    fn a_send_held_back_by_one_limit_charges_the_others_at_the_slot_it_got() {
        // The group's limit pushes chat 1's second message to 10 s; the chat's bucket must count
        // it there, so the chat's next message comes a chat interval after it, not at 1 s (which
        // would overtake it).
        let pacer = Pacer::new(Limits {
            chat: per_second(1.0, 1.0),
            group: Some(Window { count: 1, window: Duration::from_secs(10) }),
            ..Limits::default()
        });
        let now = Instant::now();
        assert_eq!(offsets(&pacer, Destination::in_group(&1, &9), 2, now), vec![0, 10_000]);
        assert_eq!(offsets(&pacer, Destination::chat(&1), 1, now), vec![11_000]);
    }

    #[test]
    fn a_group_gets_its_whole_count_at_once_then_waits_for_the_window() {
        let pacer = Pacer::new(Limits { group: Window::per_minute(20.0), ..Limits::default() });
        let now = Instant::now();
        let slots = offsets(&pacer, Destination::in_group(&-100, &-100), 41, now);
        assert!(slots[..20].iter().all(|&ms| ms == 0), "{slots:?}");
        // Not 3 s later, as a bucket refilling at 20 a minute would allow: the 21st would be the
        // 21st inside the first minute.
        assert!(slots[20..40].iter().all(|&ms| ms == 60_000), "{slots:?}");
        assert_eq!(slots[40], 120_000);
        // A private chat counts against no group.
        assert_eq!(offsets(&pacer, Destination::chat(&5), 30, now), vec![0; 30]);
    }

    #[test]
    fn a_group_sending_steadily_waits_only_for_the_oldest_of_its_last_count() {
        let pacer = Pacer::new(Limits { group: Window::per_minute(20.0), ..Limits::default() });
        let start = Instant::now();
        let group = Destination::in_group(&-7, &-7);
        // One every 2 s: the 21st asked for at 40 s waits until the first leaves the window.
        let slots: Vec<u128> =
            (0..22).map(|i| pacer.reserve(group, start + Duration::from_secs(2 * i)).duration_since(start).as_millis()).collect();
        assert_eq!(&slots[..20], (0..20).map(|i| 2000 * i).collect::<Vec<_>>().as_slice());
        assert_eq!(&slots[20..], &[60_000, 62_000]);
    }

    #[test]
    fn window_counts_and_spans_follow_the_per_minute_figure() {
        assert_eq!(Window::per_minute(20.0), Some(Window { count: 20, window: Duration::from_secs(60) }));
        assert_eq!(Window::per_minute(0.5), Some(Window { count: 1, window: Duration::from_secs(120) }));
        assert_eq!(Window::per_minute(30.0).map(|w| w.widened(Duration::from_secs(1)).window), Some(Duration::from_secs(61)));
        for off in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(Window::per_minute(off), None, "{off}");
        }
        // Absurd figures mean "hardly ever" or "no limit", never a panic.
        let rare = Window::per_minute(1e-300).unwrap();
        assert_eq!((rare.count, rare.window), (1, MAX_SPACING));
        assert_eq!(Window::per_minute(1e300), None);
        assert!(Rate::per_second(1e-300, 1e300).map(Bucket::new).is_some());
    }

    #[test]
    fn try_reserve_takes_only_a_free_slot_and_charges_nothing_otherwise() {
        let pacer = Pacer::new(Limits { global: per_second(1.0, 2.0), ..Limits::default() });
        let now = Instant::now();
        let notice = Destination::global_in(&4);
        assert!(pacer.try_reserve(notice, now) && pacer.try_reserve(notice, now), "the burst is free");
        assert!(!pacer.try_reserve(notice, now), "then nothing is free");
        assert!(!pacer.try_reserve(notice, now + Duration::from_millis(999)));
        // The refusals took nothing: a second later exactly one slot has refilled.
        let later = now + Duration::from_secs(1);
        assert_eq!(pacer.reserve(Destination::chat(&5), later), later);
        assert!(!pacer.try_reserve(notice, later));
        // A 429 block on the chat is honoured too.
        pacer.block_until(Some(&4), later + Duration::from_secs(10));
        assert!(!pacer.try_reserve(notice, later + Duration::from_secs(5)));
        assert!(pacer.try_reserve(Destination::global_in(&6), later + Duration::from_secs(5)), "another chat is not blocked");
    }

    #[test]
    fn retry_after_blocks_that_chat_only() {
        let pacer = Pacer::new(Limits { chat: per_second(1.0, 3.0), ..Limits::default() });
        let now = Instant::now();
        pacer.block_until(Some(&5), now + Duration::from_secs(3));
        assert_eq!(pacer.reserve(Destination::chat(&5), now), now + Duration::from_secs(3));
        // The burst is spent from the end of the block on, not before it.
        assert_eq!(pacer.reserve(Destination::chat(&5), now), now + Duration::from_secs(3));
        assert_eq!(pacer.reserve(Destination::chat(&6), now), now);
        // A shorter block does not shorten a longer one.
        pacer.block_until(Some(&5), now + Duration::from_secs(1));
        assert!(pacer.reserve(Destination::chat(&5), now) >= now + Duration::from_secs(3));
    }

    #[test]
    fn a_global_block_holds_back_every_chat_and_global_requests() {
        let pacer: Pacer<i64> = Pacer::new(Limits::default());
        let now = Instant::now();
        pacer.block_until(None, now + Duration::from_secs(2));
        for chat in 0..5 {
            assert_eq!(pacer.reserve(Destination::chat(&chat), now), now + Duration::from_secs(2));
        }
        assert_eq!(pacer.reserve(Destination::global(), now), now + Duration::from_secs(2));
        let after = now + Duration::from_secs(2) + MS;
        assert_eq!(pacer.reserve(Destination::chat(&1), after), after);
    }

    #[test]
    fn block_measures_retry_after_from_now() {
        let pacer = Pacer::new(Limits::default());
        pacer.block(&5, Duration::from_secs(3));
        let now = Instant::now();
        assert!(pacer.reserve(Destination::chat(&5), now) > now + Duration::from_millis(2900));
        pacer.block_all(Duration::from_secs(3));
        assert!(pacer.reserve(Destination::chat(&6), now) > now + Duration::from_millis(2900));
    }

    #[test]
    fn idle_keys_are_forgotten() {
        let pacer = Pacer::new(Limits { chat: per_second(1.0, 3.0), group: Window::per_minute(20.0), ..Limits::default() });
        let start = Instant::now();
        for chat in 0..5000_i64 {
            pacer.reserve(Destination::in_group(&chat, &chat), start);
            pacer.block_until(Some(&chat), start + MS);
        }
        assert!(pacer.tracked_keys() >= 10_000, "busy keys are all kept: {}", pacer.tracked_keys());
        // Later every bucket is full again and every block over: the next send sweeps them.
        let later = start + SWEEP_EVERY;
        for chat in 0..10_i64 {
            pacer.reserve(Destination::chat(&(100_000 + chat)), later);
        }
        assert!(pacer.tracked_keys() <= 20, "idle keys forgotten: {} kept", pacer.tracked_keys());
        // A forgotten chat gets its full burst, as a new one would.
        assert_eq!(offsets(&pacer, Destination::chat(&1), 4, later), vec![0, 0, 0, 1000]);
    }

    #[test]
    fn a_zero_limit_never_waits() {
        let pacer = Pacer::new(Limits { global: per_second(0.0, 30.0), chat: per_second(0.0, 3.0), group: Window::per_minute(0.0) });
        assert!(pacer.global.is_none() && pacer.chat.is_none() && pacer.group.is_none());
        let now = Instant::now();
        assert!(offsets(&pacer, Destination::in_group(&-1, &-1), 1000, now).iter().all(|&ms| ms == 0));
        assert_eq!(pacer.tracked_keys(), 0, "nothing is remembered without limits");
    }

    #[tokio::test]
    async fn a_send_waiting_for_its_slot_does_not_hold_back_other_chats() {
        let pacer = std::sync::Arc::new(Pacer::new(Limits { chat: per_second(1.0, 1.0), ..Limits::default() }));
        pacer.block(&1, Duration::from_secs(3600));
        let waiting = tokio::spawn({
            let pacer = pacer.clone();
            async move { pacer.acquire(Destination::chat(&1)).await }
        });
        tokio::task::yield_now().await;
        // The wait happens outside the lock: another chat's send goes through meanwhile (the
        // timeout only guards against a hang; chat 1 waits an hour).
        let other = tokio::time::timeout(Duration::from_secs(60), pacer.acquire(Destination::chat(&2))).await;
        assert!(other.is_ok(), "chat 2 was held back by chat 1's wait");
        assert!(!waiting.is_finished(), "chat 1 still waits for its block to end");
        waiting.abort();
    }

    #[test]
    fn budget_values_are_checked_with_their_key() {
        assert!(check_rate("send_budget.per_second", 0.0).is_ok());
        assert!(check_rate("send_budget.per_second", 2.5).is_ok());
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let err = check_rate("send_budget.per_second", bad).unwrap_err();
            assert!(matches!(&err, SettingError::Key { path, .. } if path == "send_budget.per_second"), "{err}");
        }
        assert!(check_burst("send_budget.burst", 1.0).is_ok());
        assert!(check_burst("send_budget.burst", 0.0).is_err());
        assert!(check_burst("send_budget.burst", f64::NAN).is_err());
    }

    #[test]
    fn an_absurd_retry_after_is_capped_instead_of_overflowing_the_clock() {
        let pacer: Pacer<i64> = Pacer::new(Limits::default());
        pacer.block(&1, Duration::from_secs(u64::MAX));
        pacer.block_all(Duration::MAX);
        let now = Instant::now();
        let wait = pacer.reserve(Destination::chat(&1), now).duration_since(now);
        assert!(wait <= MAX_BLOCK && wait > MAX_BLOCK - Duration::from_secs(5), "{wait:?}");
    }

    /// Property tests of the group window: whatever the pattern of sends, other limits and
    /// "wait" blocks, no group ever gets more than its count in any window, and with the window
    /// alone no send waits longer than the count requires.
    mod window_properties {
        use super::*;
        use proptest::prelude::*;
        use proptest::test_runner::{Config, RngSeed};

        /// One send asked for: ms after the previous request, its group, which of the group's two
        /// chats, and a 429 block on that chat (ms) to apply first.
        type Ask = (u64, i64, i64, Option<u64>);

        fn asks() -> impl Strategy<Value = Vec<Ask>> {
            let gap = prop_oneof![3 => Just(0_u64), 2 => 0_u64..3_000, 1 => 0_u64..90_000];
            let block = prop_oneof![9 => Just(None), 1 => (1_u64..10_000).prop_map(Some)];
            proptest::collection::vec((gap, 0_i64..3, 0_i64..2, block), 1..120)
        }

        fn window() -> impl Strategy<Value = Window> {
            (1_usize..25, 1_u64..90_000).prop_map(|(count, ms)| Window { count, window: Duration::from_millis(ms) })
        }

        /// Reserve every ask; per group, the request instants and slots in the order asked.
        fn run(pacer: &Pacer<i64>, asks: &[Ask], start: Instant) -> HashMap<i64, Vec<(Instant, Instant)>> {
            let mut now = start;
            let mut by_group: HashMap<i64, Vec<(Instant, Instant)>> = HashMap::new();
            for &(gap, group, chat, block) in asks {
                now += Duration::from_millis(gap);
                let chat = group * 10 + chat;
                if let Some(ms) = block {
                    pacer.block_until(Some(&chat), now + Duration::from_millis(ms));
                }
                let slot = pacer.reserve(Destination::in_group(&chat, &group), now);
                assert!(slot >= now, "a slot before its request");
                by_group.entry(group).or_default().push((now, slot));
            }
            by_group
        }

        proptest! {
            #![proptest_config(Config {
                cases: 2_000,
                failure_persistence: None,
                rng_seed: RngSeed::Fixed(0x5041_4345),
                ..Config::default()
            })]

            #[test]
            fn no_window_ever_holds_more_than_the_count(
                asks in asks(),
                window in window(),
                chat in proptest::option::of((0.1_f64..5.0, 1.0_f64..6.0)),
                global in proptest::option::of((0.5_f64..50.0, 1.0_f64..40.0)),
            ) {
                let pacer = Pacer::new(Limits {
                    global: global.and_then(|(rate, burst)| Rate::per_second(rate, burst)),
                    chat: chat.and_then(|(rate, burst)| Rate::per_second(rate, burst)),
                    group: Some(window),
                });
                for (group, sends) in run(&pacer, &asks, Instant::now()) {
                    let slots: Vec<Instant> = sends.iter().map(|(_, slot)| *slot).collect();
                    prop_assert!(slots.windows(2).all(|w| w[0] <= w[1]), "group {} out of order", group);
                    // Sorted slots: every `count + 1` consecutive ones span at least a window, so
                    // no half-open window of that length holds more than `count`.
                    for run in slots.windows(window.count + 1) {
                        let span = run[window.count] - run[0];
                        prop_assert!(span >= window.window, "group {}: {} sends within {:?}", group, run.len(), window.window);
                    }
                }
            }

            #[test]
            fn with_the_window_alone_a_send_waits_only_while_the_window_is_full(asks in asks(), window in window()) {
                let asks: Vec<Ask> = asks.into_iter().map(|(gap, group, chat, _)| (gap, group, chat, None)).collect();
                let pacer = Pacer::new(Limits { group: Some(window), ..Limits::default() });
                for (group, sends) in run(&pacer, &asks, Instant::now()) {
                    for (i, &(asked, slot)) in sends.iter().enumerate() {
                        let earlier = &sends[..i];
                        // Held back only behind an earlier send of the group still waiting for
                        // its own slot, or because the window just before the slot was full.
                        let full = earlier.iter().filter(|(_, s)| *s + window.window >= slot && *s < slot).count() >= window.count;
                        let behind = earlier.iter().any(|(_, s)| *s == slot);
                        prop_assert!(slot == asked || full || behind, "group {}: send {} waited {:?} for nothing", group, i, slot - asked);
                    }
                }
            }
        }
    }
}
