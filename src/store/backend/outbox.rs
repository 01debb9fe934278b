//! The outbox: one row per outbound message part, keyed by its idempotency key. It is a durable
//! queue as well as a record: a part is written before it is sent, waits in its chat's lane (one
//! lane per platform and chat, in the order the parts were queued) until it is delivered, and
//! every attempt's outcome is written before the next one starts, so a restart knows which parts
//! are plainly still to send and which were cut off between request and response.
//!
//! States: `pending` (to send, at `next_attempt_at`), `sending` (a request is out; found so after
//! a restart, it was cut off), `ambiguous` (the request left and its answer was lost), `sent`,
//! `dead` (given up: a permanent refusal or the end of its retry window; listed, can be resent),
//! `dropped` (an admin gave up on it), and `failed` (an older hermes's word for dead).

use crate::store::StoreError;
use async_trait::async_trait;

/// One part to queue.
#[derive(Debug, Clone)]
pub struct NewOutboxRow {
    pub key: String,
    /// The chat's lane: parts of one lane go out in the order they were queued.
    pub lane: String,
    pub platform: String,
    /// The target as JSON (for listings).
    pub target: String,
    /// What an operator is shown: the text, or the file's path.
    pub body: String,
    /// The whole message as JSON, exactly as it is to be sent.
    pub message: String,
    /// Milliseconds since the epoch after which the part is given up.
    pub deadline_ms: i64,
    /// Whether the chat is told when this part is given up.
    pub notify_on_death: bool,
    /// The first part of a delivery: the one that says how late it is.
    pub lead: bool,
}

/// What the outbox already knew about a key being queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Queued {
    /// Never seen: queued now.
    New,
    /// Queued before and still on its way.
    Waiting,
    /// Delivered before (e.g. before a restart).
    Sent { platform_message_id: Option<String> },
    /// Given up before (dead-lettered, dropped, or failed in an older hermes).
    GivenUp { reason: String },
}

impl Queued {
    /// What a stored row's state (with its message id and error) says about its key, for a key
    /// queued again.
    pub(in crate::store) fn from_stored(state: &str, platform_message_id: Option<String>, error: Option<String>) -> Queued {
        match state {
            "sent" => Queued::Sent { platform_message_id },
            "pending" | "sending" | "ambiguous" => Queued::Waiting,
            _ => Queued::GivenUp { reason: error.unwrap_or_else(|| state.to_string()) },
        }
    }
}

/// A part on its way, as its lane's worker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneHead {
    pub id: i64,
    pub key: String,
    pub platform: String,
    /// The message JSON ([`NewOutboxRow::message`]).
    pub message: String,
    /// `pending`, `sending` or `ambiguous`.
    pub state: String,
    pub attempts: i64,
    /// What the last attempt ended with, if it failed.
    pub error: Option<String>,
    pub next_attempt_at: i64,
    pub created_at: i64,
    /// When its state last changed (for a part in doubt: when the cut-off attempt started).
    pub updated_at: i64,
    pub deadline: i64,
    pub notify_on_death: bool,
    pub lead: bool,
    /// It was already resent once, marked as a possible repeat.
    pub resent_marked: bool,
}

#[derive(Debug, Clone)]
pub struct OutboxRow {
    pub idempotency_key: String,
    pub target: String,
    pub body: String,
    pub state: String,
    pub attempts: i64,
    pub platform_message_id: Option<String>,
    pub error: Option<String>,
}

/// A part that was given up, for `/undelivered` and `hermes outbox list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub id: i64,
    pub key: String,
    pub platform: String,
    pub target: String,
    pub body: String,
    pub reason: String,
    pub attempts: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One platform's queue, for `/status`, `hermes gateway status` and `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueSummary {
    pub platform: String,
    /// Parts on their way (pending, sending, ambiguous).
    pub pending: u64,
    /// Dead letters.
    pub dead: u64,
    /// When the oldest part on its way was queued (ms since the epoch).
    pub oldest_pending_at: Option<i64>,
}

/// How an attempt ended, written before anything else happens to the part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptEnd {
    Sent {
        platform_message_id: Option<String>,
    },
    /// A definite failure that may pass: try again at `at` (ms since the epoch).
    RetryAt {
        at: i64,
        error: String,
    },
    /// The request may have reached the platform and its answer was lost: looked up (or resent
    /// once, marked) at `at`.
    Ambiguous {
        at: i64,
        detail: String,
    },
    /// Given up, with why.
    Dead {
        reason: String,
    },
    /// Nobody waits for it any more (an HTTP client went away): closed, not listed.
    Closed {
        reason: String,
    },
}

#[async_trait]
pub trait Outbox: Send + Sync {
    /// Queue `rows` in one write (in their order), and say for each what was known before.
    async fn outbox_enqueue(&self, rows: Vec<NewOutboxRow>) -> Result<Vec<Queued>, StoreError>;

    /// The oldest part of `lane` still on its way.
    async fn outbox_lane_head(&self, lane: &str) -> Result<Option<LaneHead>, StoreError>;

    /// Every lane with a part on its way (at start-up, and to notice a resend from the shell).
    async fn outbox_busy_lanes(&self) -> Result<Vec<String>, StoreError>;

    /// An attempt is starting: from now until its end is recorded, a crash leaves it in doubt.
    /// `marked`: this attempt is the one resend marked as a possible repeat.
    async fn outbox_begin_attempt(&self, key: &str, marked: bool) -> Result<(), StoreError>;

    async fn outbox_end_attempt(&self, key: &str, end: AttemptEnd) -> Result<(), StoreError>;

    async fn outbox_get(&self, key: &str) -> Result<Option<OutboxRow>, StoreError>;

    /// The dead letters, newest first.
    async fn outbox_dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError>;

    /// Put dead letter `id` back on its way with a new deadline; its lane, if it was dead.
    async fn outbox_requeue(&self, id: i64, deadline_ms: i64) -> Result<Option<String>, StoreError>;

    /// Give up dead letter `id` for good; false if there is no such dead letter.
    async fn outbox_drop(&self, id: i64) -> Result<bool, StoreError>;

    /// Per platform: parts on their way, dead letters, and the oldest part on its way.
    async fn outbox_summary(&self) -> Result<Vec<QueueSummary>, StoreError>;

    /// Forget finished rows (sent, dropped, closed) last changed more than `finished` ago, and
    /// dead letters nobody acted on for more than `dead`; how many went. A finished row is an
    /// idempotency record only while its message could still be replayed.
    async fn outbox_prune(&self, finished: std::time::Duration, dead: std::time::Duration) -> Result<usize, StoreError>;
}
