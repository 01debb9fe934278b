//! The outbox: one row per outbound message part, keyed by its idempotency key, recording
//! whether it was sent, failed, or might have arrived. Reserving a key that already exists tells
//! the sender what happened before (e.g. before a crash), so nothing is sent twice.

use crate::store::StoreError;
use async_trait::async_trait;

/// What the outbox knows about a key the caller is about to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboxReservation {
    /// Never seen: reserved now; send it.
    New,
    /// Reserved earlier but never attempted: send it.
    Resume { attempts: i64 },
    /// Already delivered: do not send again.
    AlreadySent { platform_message_id: Option<String> },
    /// A send was under way when the process stopped (`attempts` so far): it may or may not have
    /// arrived. The sender may resend it once, marked as a possible repeat, rather than lose it.
    Interrupted { attempts: i64 },
    /// The platform may have received it (a timeout after the request left, or a send already
    /// resent once after an interruption): never sent again.
    InDoubt,
    /// It failed for good earlier.
    Failed { error: String },
}

#[derive(Debug, Clone)]
pub struct OutboxRow {
    pub idempotency_key: String,
    pub target: String,
    pub body: String,
    /// `pending`, `sending`, `sent`, `failed` or `ambiguous`.
    pub state: String,
    pub attempts: i64,
    pub platform_message_id: Option<String>,
    pub error: Option<String>,
}

/// Whether a reservation is to be sent now (see [`Outbox::outbox_claim`]). An alias so the
/// higher-ranked `fn(&_)` survives `async_trait`, which would tie its elided lifetime to the call.
pub type SendNow = fn(&OutboxReservation) -> bool;

#[async_trait]
pub trait Outbox: Send + Sync {
    /// Reserve `key` and say what the outbox knows about it (see [`OutboxReservation`]).
    async fn outbox_reserve(&self, key: &str, target: &str, body: &str) -> Result<OutboxReservation, StoreError> {
        self.outbox_claim(key, target, body, |_| false).await
    }

    /// [`Outbox::outbox_reserve`], and when `send_now` says the reservation is to be sent, its
    /// first attempt recorded as starting (`sending`) in the same write: one round trip before
    /// the send instead of two, and still durable before the request leaves.
    async fn outbox_claim(&self, key: &str, target: &str, body: &str, send_now: SendNow) -> Result<OutboxReservation, StoreError>;

    /// A send attempt is starting (one more attempt): from now on a crash leaves the message
    /// in doubt.
    async fn outbox_mark_sending(&self, key: &str) -> Result<(), StoreError>;

    async fn outbox_mark_sent(&self, key: &str, platform_message_id: Option<&str>) -> Result<(), StoreError>;

    async fn outbox_mark_failed(&self, key: &str, error: &str) -> Result<(), StoreError>;

    /// The request left but its outcome is unknown (e.g. a timeout after sending).
    async fn outbox_mark_ambiguous(&self, key: &str, detail: &str) -> Result<(), StoreError>;

    async fn outbox_get(&self, key: &str) -> Result<Option<OutboxRow>, StoreError>;
}
