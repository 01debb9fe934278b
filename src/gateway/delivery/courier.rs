//! The courier: takes every outbound part from the outbox to its platform, and keeps at it through
//! outages, restarts and crashes without doubling anything.
//!
//! Each chat is a lane: its parts go out in the order they were queued, one at a time, by one
//! worker task that lives while the lane has work; other chats' lanes carry on beside it. A part
//! is tried until it is delivered, refused for good, or its retry window ends:
//!
//! - A transient failure (5xx, timeout before the request left, connection refused) is retried
//!   with capped exponential backoff and jitter; a 429 after the platform's `retry_after`. Each
//!   attempt's start and outcome are written before anything else happens, so after a restart a
//!   part that got a definite failure is plainly retried.
//! - While its adapter is not connected (backing off, starting, paused), a lane waits without
//!   spending attempts.
//! - A part cut off between request and answer (found `sending` after a restart, or `ambiguous`)
//!   is looked up where the platform can tell ([`PlatformAdapter::find_sent`]); where it cannot,
//!   it is resent once with [`RESEND_MARK`], and if that is cut off too it becomes a dead letter
//!   rather than risk a third copy.
//! - A refusal that will not pass (bot blocked, chat gone, a message the platform never takes)
//!   or the end of the window makes a dead letter: listed by `/undelivered` and `hermes outbox`,
//!   resent or dropped by hand. At the window's end the chat is also told, by a notice that is
//!   itself a queued part.
//! - A part delivered more than a minute after it was queued says so ([`late_note`]).
//!
//! Callers ([`crate::gateway::delivery::outbound`]) queue parts and wait only for their first outcome
//! ([`Outcome`]), and only as long as they choose: delivered, or queued behind trouble (a retry
//! more than [`QUEUED_AFTER`] away, an adapter down, or the caller's patience ran out), or given
//! up.

use crate::gateway::delivery::reply::ReplyKey;
use crate::gateway::ops::health::HealthBoard;
use crate::observe::metrics;
use crate::store::{AttemptEnd, LaneHead, NewOutboxRow, Outbox, Queued};
use hermes_adapter::{Lookup, MarkdownDialect, OutboundMessage, PlatformAdapter, SendError, render};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};

/// Starts a part resent after its first send was cut off (the platform may already show it).
pub const RESEND_MARK: &str = "↻ (resent) ";
/// A caller stops waiting and hears [`Outcome::Queued`] once its lane waits longer than this.
const QUEUED_AFTER: Duration = Duration::from_secs(10);
/// The first retry of a transient failure, doubling up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The longest `retry_after` honoured as given; an absurd one is capped, not obeyed for years.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// How often a lane whose adapter is down looks again.
const ADAPTER_POLL: Duration = Duration::from_secs(1);
/// How often a platform being handed over looks again whether its sends have settled.
const SETTLED_LOOK_EVERY: Duration = Duration::from_millis(50);
/// What a chat is told when an answer could not be delivered within the window.
pub const UNDELIVERED_NOTICE: &str = "⚠️ An answer could not be delivered in time and was given up. Your request was processed; \
     ask again, or an admin can resend it (/undelivered).";

/// How long parts are tried, and how late is late.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// How long a part is tried before it is given up (`delivery.retry_window`).
    pub window: Duration,
    /// A part delivered later than this after it was queued carries a note saying how late.
    pub late_after: Duration,
}

impl RetryPolicy {
    pub fn with_window(window: Duration) -> Self {
        Self { window, ..Self::default() }
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { window: Duration::from_secs(24 * 3600), late_after: Duration::from_secs(60) }
    }
}

/// What a caller learns about a part it queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// On the platform (now, or before a restart), with its id there.
    Delivered { platform_message_id: Option<String> },
    /// Not yet delivered: waiting in its lane (for the platform, for an earlier part, or for a
    /// retry); the courier keeps at it.
    Queued,
    /// May have arrived, and will not be sent again without a person (a dead letter).
    InDoubt,
    /// Given up (refused for good, nobody waiting, or the window ended).
    GivenUp { reason: String },
}

#[derive(Default)]
struct LaneState {
    wake: Arc<Notify>,
    /// Counts wake-ups, so a worker that found its lane empty can tell a part arrived since.
    kicks: u64,
    /// Why the lane is waiting (callers queued behind it learn [`Outcome::Queued`] at once).
    blocked: Option<String>,
    /// The last failure of this lane's sends, which parts that waited behind it share (for the
    /// late note of a part that was never tried itself).
    trouble: Option<String>,
}

#[derive(Default)]
struct Board {
    lanes: HashMap<String, LaneState>,
    /// Callers waiting for a part's first outcome: key → (lane, senders).
    waiters: HashMap<String, (String, Vec<oneshot::Sender<Outcome>>)>,
    /// Lanes stepping a part now (from the look at who serves it to its attempt recorded), by
    /// platform: a platform handed over to another replica waits for them to settle.
    stepping: HashMap<String, usize>,
}

pub struct Courier {
    adapters: HashMap<String, Arc<dyn PlatformAdapter>>,
    /// Where every part waits until it is delivered or given up.
    outbox: Arc<dyn Outbox>,
    health: Option<Arc<HealthBoard>>,
    policy: RetryPolicy,
    board: Mutex<Board>,
}

/// A lane's step of one part, counted on the board by platform while it lasts.
struct Stepping<'a> {
    courier: &'a Courier,
    platform: String,
}

impl<'a> Stepping<'a> {
    fn begin(courier: &'a Courier, platform: &str) -> Self {
        *courier.board().stepping.entry(platform.to_string()).or_default() += 1;
        Stepping { courier, platform: platform.to_string() }
    }
}

impl Drop for Stepping<'_> {
    fn drop(&mut self) {
        let mut board = self.courier.board();
        if let Some(n) = board.stepping.get_mut(&self.platform) {
            *n = n.saturating_sub(1);
        }
    }
}

/// The lane of a chat: its platform and chat id (threads of one chat share its order).
pub fn lane_of(platform: &str, chat_id: &str) -> String {
    format!("{platform}\u{1f}{chat_id}")
}

impl Courier {
    pub fn new(
        adapters: HashMap<String, Arc<dyn PlatformAdapter>>,
        outbox: Arc<dyn Outbox>,
        health: Option<Arc<HealthBoard>>,
        policy: RetryPolicy,
    ) -> Self {
        Self { adapters, outbox, health, policy, board: Mutex::default() }
    }

    pub fn policy(&self) -> RetryPolicy {
        self.policy
    }

    fn board(&self) -> MutexGuard<'_, Board> {
        // A panic while holding the lock cannot leave the maps half-updated in a way that
        // matters (each operation is one insert or remove), so a poisoned lock is used as is.
        self.board.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queue `rows` (in order, one write) and wait for each one's first outcome, at most
    /// `patience` in all (what is undecided by then is [`Outcome::Queued`]).
    pub async fn dispatch(self: &Arc<Self>, rows: Vec<NewOutboxRow>, patience: Duration) -> Vec<Outcome> {
        let give_up_waiting = tokio::time::Instant::now() + patience;
        let lanes: Vec<String> = rows.iter().map(|r| r.lane.clone()).collect();
        let keys: Vec<String> = rows.iter().map(|r| r.key.clone()).collect();
        let known = match self.outbox.outbox_enqueue(rows).await {
            Ok(known) => known,
            Err(e) => {
                // Nothing was queued; saying so beats pretending.
                tracing::error!(error = %e, "the outbox could not queue a message; it is not sent");
                return keys.iter().map(|_| Outcome::GivenUp { reason: format!("the outbox is unavailable: {e}") }).collect();
            }
        };
        let mut receivers = Vec::with_capacity(keys.len());
        {
            let mut board = self.board();
            for ((key, lane), known) in keys.iter().zip(&lanes).zip(known) {
                let receiver = match known {
                    Queued::Sent { platform_message_id } => Err(Outcome::Delivered { platform_message_id }),
                    Queued::GivenUp { reason } => Err(Outcome::GivenUp { reason }),
                    Queued::New | Queued::Waiting => {
                        let lane_state = board.lanes.get(lane.as_str());
                        // Nobody waits (a caller without patience, or a lane known to be stuck).
                        if patience.is_zero() || lane_state.is_some_and(|l| l.blocked.is_some()) {
                            Err(Outcome::Queued)
                        } else {
                            let (tx, rx) = oneshot::channel();
                            board.waiters.entry(key.clone()).or_insert_with(|| (lane.clone(), Vec::new())).1.push(tx);
                            Ok(rx)
                        }
                    }
                };
                receivers.push(receiver);
            }
        }
        let mut woken: Vec<&String> = lanes.iter().collect();
        woken.dedup();
        for lane in woken {
            self.wake(lane);
        }
        let mut outcomes = Vec::with_capacity(receivers.len());
        for receiver in receivers {
            outcomes.push(match receiver {
                Err(known) => known,
                // A dropped sender: the worker failed (the sweeper restarts it) or the runtime is
                // shutting down; either way the part is still queued.
                Ok(rx) => tokio::time::timeout_at(give_up_waiting, rx).await.ok().and_then(Result::ok).unwrap_or(Outcome::Queued),
            });
        }
        outcomes
    }

    /// Make sure `lane` has a worker, and wake it.
    pub fn wake(self: &Arc<Self>, lane: &str) {
        let mut board = self.board();
        if let Some(state) = board.lanes.get_mut(lane) {
            state.kicks += 1;
            state.wake.notify_one();
            return;
        }
        board.lanes.insert(lane.to_string(), LaneState::default());
        drop(board);
        let courier = self.clone();
        let lane = lane.to_string();
        tokio::spawn(async move {
            let worker = tokio::spawn(courier.clone().work(lane.clone()));
            if let Err(e) = worker.await {
                // A worker that panicked must not leave its callers waiting or its lane unworked:
                // they hear "queued", and the sweeper starts a new worker.
                tracing::error!(lane = %lane, error = %e, "an outbox lane's worker failed; the sweeper restarts it");
                let mut board = courier.board();
                board.lanes.remove(&lane);
                board.waiters.retain(|_, (l, _)| *l != lane);
            }
        });
    }

    /// Start a worker for every lane with parts on their way that nobody works (those a restart
    /// left, a part resent from the shell, one queued by another replica): what the
    /// [`super::sweeper`] runs.
    pub(crate) async fn sweep(self: &Arc<Self>) {
        match self.outbox.outbox_busy_lanes().await {
            Ok(lanes) => {
                for lane in lanes {
                    self.wake_idle(&lane);
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not look for queued messages"),
        }
    }

    /// Start a worker for `lane` unless one works it.
    pub(crate) fn wake_idle(self: &Arc<Self>, lane: &str) {
        if !self.board().lanes.contains_key(lane) {
            self.wake(lane);
        }
    }

    /// Wait until no lane of `platform` is stepping a part (`false`: one still is after
    /// `bound`). Asked once the platform is given back, when no new step of it starts: a send
    /// recorded as begun but not its end would read as cut off to the next holder.
    pub(crate) async fn settled(&self, platform: &str, bound: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            if self.board().stepping.get(platform).is_none_or(|n| *n == 0) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(SETTLED_LOOK_EVERY).await;
        }
    }

    /// Changes each time this replica takes a platform over (none alone on a store).
    pub(crate) fn platforms_taken(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.health.as_ref().map(|h| h.tenures().taken())
    }

    /// The lane's worker: deliver its head until the lane is empty.
    async fn work(self: Arc<Self>, lane: String) {
        let wake = self.board().lanes.get(&lane).map(|l| l.wake.clone()).unwrap_or_default();
        loop {
            let kicks = self.board().lanes.get(&lane).map_or(0, |l| l.kicks);
            let head = match self.outbox.outbox_lane_head(&lane).await {
                Ok(head) => head,
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the outbox; trying again shortly");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let Some(head) = head else {
                let mut board = self.board();
                let kicked = board.lanes.get(&lane).is_some_and(|l| l.kicks != kicks);
                if kicked {
                    continue;
                }
                board.lanes.remove(&lane);
                return;
            };
            let stepping = Stepping::begin(&self, &head.platform);
            if !self.serves_after_lapse(&head.platform).await {
                // Another replica holds the platform: its courier delivers the lane (woken by the
                // outbox's bell or its sweep), and this one neither sends, nor gives up, nor
                // dead-letters anything. (A tenure only late to be renewed is waited out: left
                // now, the lane would wait for the next sweep once it is confirmed.)
                self.lane_blocked(&lane, "served by another replica");
                self.board().lanes.remove(&lane);
                return;
            }
            if self.waits_elsewhere(&head) {
                // Its request is held open by another replica, whose courier delivers it.
                self.lane_blocked(&lane, "its request waits on another replica");
                self.board().lanes.remove(&lane);
                return;
            }
            let wait = self.step(&lane, head).await;
            drop(stepping);
            if let Some(wait) = wait {
                if wait >= QUEUED_AFTER {
                    self.lane_blocked(&lane, "waiting");
                }
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = wake.notified() => {}
                }
            }
        }
    }

    /// One step for the lane's head: deliver it, give it up, or say how long to wait first.
    async fn step(&self, lane: &str, head: LaneHead) -> Option<Duration> {
        let now = now_ms();
        let (message, adapter) = self.unpack(lane, &head).await?;
        if now >= head.deadline {
            self.give_up_late(lane, &head).await;
            return None;
        }
        if let Some(wait) = self.not_yet(lane, &head, now) {
            return Some(wait);
        }
        let marked = match self.resolve_doubt(lane, &head, adapter.as_ref(), &message, now).await {
            Doubt::Send { marked } => marked,
            Doubt::Settled => return None,
            Doubt::LookAgainIn(wait) => return Some(wait),
        };
        let trouble = head.error.clone().or_else(|| self.board().lanes.get(lane).and_then(|l| l.trouble.clone()));
        let outcome = self.attempt(adapter.as_ref(), &head, message, marked, trouble.as_deref(), now).await;
        self.settle_attempt(lane, &head, outcome).await;
        None
    }

    /// The head's message and its platform's adapter; a head that has neither is given up.
    async fn unpack(&self, lane: &str, head: &LaneHead) -> Option<(OutboundMessage, Arc<dyn PlatformAdapter>)> {
        let message: OutboundMessage = match serde_json::from_str(&head.message) {
            Ok(m) => m,
            Err(e) => {
                self.give_up(lane, head, format!("its stored form is unreadable ({e})"), false).await;
                return None;
            }
        };
        let Some(adapter) = self.adapters.get(&head.platform).cloned() else {
            self.give_up(lane, head, format!("the platform `{}` is not enabled in this gateway", head.platform), false).await;
            return None;
        };
        Some((message, adapter))
    }

    /// The retry window ended: a dead letter, and the chat is told.
    async fn give_up_late(&self, lane: &str, head: &LaneHead) {
        let why = head.error.clone().unwrap_or_else(|| "its platform could not be reached".into());
        let window = Duration::from_millis((head.deadline - head.created_at).max(0) as u64);
        let reason = format!("not delivered within {} ({why})", human(window));
        self.give_up(lane, head, reason, true).await;
    }

    /// How long the head must wait before it may be tried, if it may not be tried now.
    fn not_yet(&self, lane: &str, head: &LaneHead, now: i64) -> Option<Duration> {
        // A retry's time, or a cut-off send's look-up time, has not come.
        if head.next_attempt_at > now {
            return Some(Duration::from_millis((head.next_attempt_at.min(head.deadline) - now).max(0) as u64));
        }
        if !self.can_send(&head.platform) {
            tracing::debug!(outbox_key = %head.key, platform = %head.platform, "the platform's adapter is not connected; the part waits");
            self.note_trouble(lane, "its adapter is not connected");
            self.lane_blocked(lane, "adapter down");
            return Some(ADAPTER_POLL);
        }
        None
    }

    /// For a head whose last send was cut off: ask the platform whether it arrived, and decide
    /// whether to send it (marked or not), settle it, or look again later.
    async fn resolve_doubt(
        &self,
        lane: &str,
        head: &LaneHead,
        adapter: &dyn PlatformAdapter,
        message: &OutboundMessage,
        now: i64,
    ) -> Doubt {
        if head.state == "pending" {
            return Doubt::Send { marked: false };
        }
        let since = Duration::from_millis((now - head.updated_at).max(0) as u64);
        match adapter.find_sent(message, since).await {
            Ok(Lookup::Found(receipt)) => {
                tracing::info!(outbox_key = %head.key, "a cut-off send had arrived after all; not sending it again");
                self.delivered(lane, &head.key, receipt.message_id).await;
                Doubt::Settled
            }
            Ok(Lookup::NotThere) | Ok(Lookup::ResendIsDeduplicated) => Doubt::Send { marked: false },
            Ok(Lookup::CannotTell) if !head.resent_marked => Doubt::Send { marked: true },
            Ok(Lookup::CannotTell) => {
                let reason = "its send was cut off twice and it may have arrived; resend it only if the chat does not show it".to_string();
                self.record(&head.key, AttemptEnd::Dead { reason: reason.clone() }).await;
                self.settle_waiters(&head.key, Outcome::InDoubt);
                Doubt::Settled
            }
            Err(e) => {
                // Still in doubt: look again later rather than send blind.
                tracing::warn!(outbox_key = %head.key, error = %e, "could not look up a cut-off send; trying again later");
                Doubt::LookAgainIn(backoff(head.attempts.max(1) as u32))
            }
        }
    }

    /// Write an attempt's end and tell whoever waits on the part.
    async fn settle_attempt(&self, lane: &str, head: &LaneHead, outcome: Attempted) {
        match outcome {
            Attempted::Sent(id) => self.delivered(lane, &head.key, id).await,
            Attempted::Retry { at, error } => {
                self.note_trouble(lane, &error);
                self.record(&head.key, AttemptEnd::RetryAt { at, error }).await;
            }
            Attempted::Ambiguous(detail) => {
                tracing::warn!(outbox_key = %head.key, "send outcome unknown ({detail}); it will be looked up or resent once, marked");
                // Backed off like a failure: a platform answering 500s is not asked again at once.
                let at = now_ms() + backoff(head.attempts as u32 + 1).as_millis() as i64;
                self.note_trouble(lane, &detail);
                self.record(&head.key, AttemptEnd::Ambiguous { at, detail }).await;
            }
            Attempted::Refused(reason) => self.give_up(lane, head, reason, false).await,
            Attempted::Gone(reason) => {
                self.record(&head.key, AttemptEnd::Closed { reason: reason.clone() }).await;
                self.settle_waiters(&head.key, Outcome::GivenUp { reason });
            }
            Attempted::NotServing => self.lane_blocked(lane, "the platform is served by another replica now"),
        }
    }

    /// Send the head once (with the in-place fallbacks that cost no attempt: plain text for
    /// rejected markup, no note when the note made it too long).
    /// `trouble`: why the part is late, if it is (its own last failure, or its lane's).
    #[allow(clippy::too_many_arguments)] // one attempt's inputs, each a plain value
    async fn attempt(
        &self,
        adapter: &dyn PlatformAdapter,
        head: &LaneHead,
        mut message: OutboundMessage,
        marked: bool,
        trouble: Option<&str>,
        now: i64,
    ) -> Attempted {
        let dialect = adapter.capabilities().dialect;
        let body = message.text.clone();
        let prefix = self.prefix(head, marked, trouble, now, dialect);
        message.text = with_prefix(&prefix, &body);
        tracing::debug!(outbox_key = %head.key, attempt = head.attempts + 1, marked, "sending a queued part");
        if let Err(e) = self.outbox.outbox_begin_attempt(&head.key, marked).await {
            // Unrecorded, a send cut off by a crash would look never tried, and be sent again
            // plainly (by this gateway after a restart, or by another replica): not now.
            tracing::warn!(outbox_key = %head.key, error = %e, "could not record a send attempt; trying again later");
            return Attempted::Retry {
                at: now_ms() + FIRST_BACKOFF.as_millis() as i64,
                error: format!("the outbox could not record the attempt: {e}"),
            };
        }
        if !self.serves_after_lapse(adapter.platform().as_str()).await {
            // The platform's tenure ended while the attempt was recorded: a replica that no
            // longer serves it sends nothing, and the recorded attempt reads as cut off to
            // whoever takes the part over (looked up, or resent once, marked). A tenure only
            // late to be renewed is waited out instead: the part was not sent, and must not
            // read as cut off.
            return Attempted::NotServing;
        }
        let _sending = metrics::global().sending();
        let fallbacks = Fallbacks { body, prefixed: !prefix.is_empty(), dialect };
        send_with_fallbacks(adapter, head, message, fallbacks).await
    }

    /// What goes before the body: the resend mark and, for a late lead part, the late note.
    fn prefix(&self, head: &LaneHead, marked: bool, trouble: Option<&str>, now: i64, dialect: MarkdownDialect) -> String {
        let mut prefix = String::new();
        if marked {
            tracing::warn!(outbox_key = %head.key, "a send was cut off before its answer; resending it once, marked as a possible repeat");
            prefix.push_str(RESEND_MARK);
        }
        let waited = Duration::from_millis((now - head.created_at).max(0) as u64);
        if head.lead && waited >= self.policy.late_after {
            let note = late_note(waited, &head.platform, trouble);
            prefix.push_str(&render::render(&note, dialect));
            prefix.push_str("\n\n");
        }
        prefix
    }

    /// Whether `head` answers a request another replica holds open (a platform that answers on
    /// the request, with a store shared by replicas): that replica's courier delivers it. Once
    /// past its deadline (the request stopped waiting, or died with its replica) it is given up
    /// wherever it is found, like any part.
    fn waits_elsewhere(&self, head: &LaneHead) -> bool {
        let shared = self.health.as_ref().is_some_and(|health| health.tenures().is_shared());
        let Some(adapter) = self.adapters.get(&head.platform).filter(|a| shared && a.answers_on_the_request().is_some()) else {
            return false;
        };
        now_ms() < head.deadline
            && serde_json::from_str::<OutboundMessage>(&head.message).is_ok_and(|message| !adapter.delivers_here(&message))
    }

    /// Whether this replica serves `platform` (with a shared store, holds its lease), waiting
    /// out a tenure's late renewal (`Tenures::serves_after_lapse`).
    async fn serves_after_lapse(&self, platform: &str) -> bool {
        match &self.health {
            Some(health) => health.tenures().serves_after_lapse(platform).await,
            None => true,
        }
    }

    fn can_send(&self, platform: &str) -> bool {
        self.health.as_ref().is_none_or(|h| h.accepts_sends(platform))
    }

    async fn delivered(&self, lane: &str, key: &str, platform_message_id: Option<String>) {
        self.record(key, AttemptEnd::Sent { platform_message_id: platform_message_id.clone() }).await;
        if let Some(state) = self.board().lanes.get_mut(lane) {
            state.blocked = None;
        }
        self.settle_waiters(key, Outcome::Delivered { platform_message_id });
    }

    /// Make `head` a dead letter; at the end of its window, tell the chat by a queued notice.
    async fn give_up(&self, lane: &str, head: &LaneHead, reason: String, window_ended: bool) {
        tracing::error!(outbox_key = %head.key, reason = %reason, "message given up; listed by /undelivered and `hermes outbox list`");
        self.record(&head.key, AttemptEnd::Dead { reason: reason.clone() }).await;
        self.settle_waiters(&head.key, Outcome::GivenUp { reason });
        if window_ended && head.notify_on_death {
            self.queue_notice(lane, head).await;
        }
    }

    async fn queue_notice(&self, lane: &str, head: &LaneHead) {
        let Ok(original) = serde_json::from_str::<OutboundMessage>(&head.message) else { return };
        let Some(adapter) = self.adapters.get(&head.platform) else { return };
        // Parts of one chat given up in the same minute (one outage) share one notice.
        let key = ReplyKey::Undelivered { lane: lane.to_string(), minute: head.deadline / 60_000 }.to_string();
        let message = OutboundMessage {
            target: original.target.clone(),
            text: render::render(UNDELIVERED_NOTICE, adapter.capabilities().dialect),
            reply_to: None,
            idempotency_key: key.clone(),
            is_final: false,
            usage: None,
            finish_reason: None,
            buttons: Vec::new(),
            file: None,
        };
        let Ok(json) = serde_json::to_string(&message) else { return };
        let row = NewOutboxRow {
            key,
            lane: lane.to_string(),
            platform: head.platform.clone(),
            target: serde_json::to_string(&message.target).unwrap_or_default(),
            body: UNDELIVERED_NOTICE.to_string(),
            message: json,
            deadline_ms: now_ms() + self.policy.window.as_millis() as i64,
            notify_on_death: false,
            lead: false,
        };
        if let Err(e) = self.outbox.outbox_enqueue(vec![row]).await {
            tracing::error!(error = %e, "could not queue the could-not-deliver notice");
        }
    }

    async fn record(&self, key: &str, end: AttemptEnd) {
        if let Err(e) = self.outbox.outbox_end_attempt(key, end).await {
            // The part stays `sending`: after a restart it is looked up or resent once, marked.
            tracing::error!(outbox_key = %key, error = %e, "could not record how a send ended");
        }
    }

    fn note_trouble(&self, lane: &str, why: &str) {
        if let Some(state) = self.board().lanes.get_mut(lane) {
            state.trouble = Some(why.to_string());
        }
    }

    fn lane_blocked(&self, lane: &str, why: &str) {
        let mut board = self.board();
        if let Some(state) = board.lanes.get_mut(lane) {
            state.blocked = Some(why.to_string());
        }
        let queued: Vec<String> = board.waiters.iter().filter(|(_, (l, _))| l == lane).map(|(k, _)| k.clone()).collect();
        for key in queued {
            if let Some((_, senders)) = board.waiters.remove(&key) {
                for tx in senders {
                    let _ = tx.send(Outcome::Queued);
                }
            }
        }
    }

    fn settle_waiters(&self, key: &str, outcome: Outcome) {
        if let Some((_, senders)) = self.board().waiters.remove(key) {
            for tx in senders {
                let _ = tx.send(outcome.clone());
            }
        }
    }
}

enum Attempted {
    Sent(Option<String>),
    Retry {
        at: i64,
        error: String,
    },
    Ambiguous(String),
    Refused(String),
    Gone(String),
    /// Not sent: this replica no longer serves the platform (another may handle the part now).
    /// Nothing more is written about it from here.
    NotServing,
}

/// Where a cut-off send stands once the platform was asked about it.
enum Doubt {
    /// Send it (`marked`: with [`RESEND_MARK`], the platform cannot tell whether it arrived).
    Send { marked: bool },
    /// Delivered or dead-lettered already; nothing more this step.
    Settled,
    /// The look-up failed; try it again after this long.
    LookAgainIn(Duration),
}

/// What an attempt falls back to, in place, when the platform refuses its first form.
struct Fallbacks {
    /// The part's own text, without the mark or the note.
    body: String,
    /// Whether a mark or a note went before the body.
    prefixed: bool,
    dialect: MarkdownDialect,
}

/// Send until delivered or a failure that no in-place fallback fixes.
async fn send_with_fallbacks(
    adapter: &dyn PlatformAdapter,
    head: &LaneHead,
    mut message: OutboundMessage,
    fallbacks: Fallbacks,
) -> Attempted {
    let mut plain_fallback_used = false;
    loop {
        let error = match adapter.send(&message).await {
            Ok(receipt) => {
                metrics::global().message_sent(message.target.platform.as_str(), &message.target.chat_id);
                return Attempted::Sent(receipt.message_id);
            }
            Err(e) => {
                metrics::global().send_failed(message.target.platform.as_str(), &e);
                e
            }
        };
        match error {
            SendError::TooLong if fallbacks.prefixed && message.text != fallbacks.body => {
                // The mark or the note pushed a part that was at the limit over it.
                message.text = fallbacks.body.clone();
            }
            SendError::BadFormat(_) if !plain_fallback_used => {
                plain_fallback_used = true;
                message.text = render::to_plain_text(&message.text, fallbacks.dialect);
            }
            other => return failed(head, other),
        }
    }
}

/// A send failure no fallback fixes, as the attempt's end.
fn failed(head: &LaneHead, error: SendError) -> Attempted {
    match error {
        SendError::RateLimited { retry_after } => {
            let wait = retry_after.min(MAX_RETRY_AFTER);
            tracing::info!(outbox_key = %head.key, wait_ms = wait.as_millis() as u64, "rate limited by the platform; waiting");
            Attempted::Retry {
                at: now_ms() + wait.as_millis() as i64,
                error: format!("{} was rate limiting the bot", label(&head.platform)),
            }
        }
        SendError::Transient(detail) => {
            let wait = backoff(head.attempts as u32 + 1);
            tracing::warn!(outbox_key = %head.key, attempt = head.attempts + 1, wait_ms = wait.as_millis() as u64, error = %detail, "send failed; retrying");
            Attempted::Retry { at: now_ms() + wait.as_millis() as i64, error: detail }
        }
        SendError::Ambiguous(detail) => Attempted::Ambiguous(detail),
        SendError::Gone(detail) => Attempted::Gone(format!("recipient gone: {detail}")),
        other => Attempted::Refused(other.to_string()),
    }
}

/// `prefix` before `body`; a file's empty caption gets the prefix without its trailing gap.
fn with_prefix(prefix: &str, body: &str) -> String {
    if body.is_empty() { prefix.trim_end().to_string() } else { format!("{prefix}{body}") }
}

/// The wait before attempt `attempt + 1` after `attempt` transient failures: 1 s doubling to
/// 5 min, with ±20 % jitter so lanes that failed together do not retry together.
pub fn backoff(attempt: u32) -> Duration {
    let base = FIRST_BACKOFF.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1))).min(MAX_BACKOFF);
    base.mul_f64(0.8 + 0.4 * rand::random::<f64>())
}

/// "⏱ Delivered 14 min late: Telegram was unreachable." — how late, and the last reason known.
pub fn late_note(waited: Duration, platform: &str, last_error: Option<&str>) -> String {
    let why = match last_error {
        Some(e) if e.contains("rate limiting") => e.to_string(),
        Some(_) => format!("{} was unreachable", label(platform)),
        None => "the gateway or the platform was down".to_string(),
    };
    format!("⏱ Delivered {} late: {why}.", human(waited))
}

/// A platform's name as people write it.
fn label(platform: &str) -> String {
    let mut chars = platform.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// A duration as a person says it: "45 s", "14 min", "3 h", "2 d".
pub fn human(d: Duration) -> String {
    // Rounded to the nearest second: a window of 1,999 ms is "2 s".
    let secs = ((d.as_millis() + 500) / 1000).min(u128::from(u64::MAX)) as u64;
    match secs {
        0..=89 => format!("{secs} s"),
        90..=5399 => format!("{} min", (secs + 30) / 60),
        5400..=172_799 => format!("{} h", (secs + 1800) / 3600),
        _ => format!("{} d", (secs + 43_200) / 86_400),
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
#[path = "courier_tests.rs"]
mod tests;
