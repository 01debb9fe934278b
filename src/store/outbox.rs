//! The outbox: one row per outbound message part, keyed by its idempotency key, recording
//! whether it was sent, failed, or might have arrived. Reserving a key that already exists tells
//! the sender what happened before (e.g. before a crash), so nothing is sent twice.

use super::{CachedStatements, Store, StoreError, now_ms};
use rusqlite::{Connection, OptionalExtension, params};

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
    pub state: String,
    pub attempts: i64,
    pub platform_message_id: Option<String>,
    pub error: Option<String>,
}

impl Store {
    /// Reserve `key` and say what the outbox knows about it (see [`OutboxReservation`]).
    pub async fn outbox_reserve(&self, key: &str, target: &str, body: &str) -> Result<OutboxReservation, StoreError> {
        self.outbox_claim(key, target, body, |_| false).await
    }

    /// [`Store::outbox_reserve`], and when `send_now` says the reservation is to be sent, its first
    /// attempt recorded as starting (`sending`) in the same write: one round trip before the send
    /// instead of two, and still on disk before the request leaves.
    pub async fn outbox_claim(
        &self,
        key: &str,
        target: &str,
        body: &str,
        send_now: fn(&OutboxReservation) -> bool,
    ) -> Result<OutboxReservation, StoreError> {
        let (key, target, body) = (key.to_string(), target.to_string(), body.to_string());
        self.write(move |c| {
            let now = now_ms();
            let inserted = c.run(
                "INSERT OR IGNORE INTO outbox (idempotency_key, target, body, state, created_at, updated_at) VALUES (?1, ?2, ?3, 'pending', ?4, ?4)",
                params![key, target, body, now],
            )?;
            let reservation = if inserted == 1 {
                OutboxReservation::New
            } else {
                let (state, attempts, message_id, error): (String, i64, Option<String>, Option<String>) = c.one(
                    "SELECT state, attempts, platform_message_id, error FROM outbox WHERE idempotency_key = ?1",
                    [&key],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )?;
                match state.as_str() {
                    "sent" => OutboxReservation::AlreadySent { platform_message_id: message_id },
                    "pending" => OutboxReservation::Resume { attempts },
                    "failed" => OutboxReservation::Failed { error: error.unwrap_or_default() },
                    "sending" => OutboxReservation::Interrupted { attempts },
                    // "ambiguous": a timeout after the request left.
                    _ => OutboxReservation::InDoubt,
                }
            };
            if send_now(&reservation) {
                mark_sending(c, &key)?;
            }
            Ok(reservation)
        })
        .await
    }

    /// A send attempt is starting: from now on a crash leaves the message in doubt.
    pub async fn outbox_mark_sending(&self, key: &str) -> Result<(), StoreError> {
        let key = key.to_string();
        self.write(move |c| mark_sending(c, &key)).await
    }

    pub async fn outbox_mark_sent(&self, key: &str, platform_message_id: Option<&str>) -> Result<(), StoreError> {
        let (key, message_id) = (key.to_string(), platform_message_id.map(str::to_string));
        self.write(move |c| {
            c.run(
                "UPDATE outbox SET state = 'sent', platform_message_id = ?2, error = NULL, updated_at = ?3 WHERE idempotency_key = ?1",
                params![key, message_id, now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn outbox_mark_failed(&self, key: &str, error: &str) -> Result<(), StoreError> {
        self.outbox_set(key, "failed", error).await
    }

    /// The request left but its outcome is unknown (e.g. a timeout after sending).
    pub async fn outbox_mark_ambiguous(&self, key: &str, detail: &str) -> Result<(), StoreError> {
        self.outbox_set(key, "ambiguous", detail).await
    }

    async fn outbox_set(&self, key: &str, state: &'static str, error: &str) -> Result<(), StoreError> {
        let (key, error) = (key.to_string(), error.to_string());
        self.write(move |c| {
            c.run(
                "UPDATE outbox SET state = ?2, error = ?3, updated_at = ?4 WHERE idempotency_key = ?1",
                params![key, state, error, now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn outbox_get(&self, key: &str) -> Result<Option<OutboxRow>, StoreError> {
        let key = key.to_string();
        self.read(move |c| {
            Ok(c.one(
                "SELECT idempotency_key, target, body, state, attempts, platform_message_id, error FROM outbox WHERE idempotency_key = ?1",
                [key],
                |r| {
                    Ok(OutboxRow {
                        idempotency_key: r.get(0)?,
                        target: r.get(1)?,
                        body: r.get(2)?,
                        state: r.get(3)?,
                        attempts: r.get(4)?,
                        platform_message_id: r.get(5)?,
                        error: r.get(6)?,
                    })
                },
            )
            .optional()?)
        })
        .await
    }
}

fn mark_sending(c: &Connection, key: &str) -> Result<(), StoreError> {
    c.run(
        "UPDATE outbox SET state = 'sending', attempts = attempts + 1, updated_at = ?2 WHERE idempotency_key = ?1",
        params![key, now_ms()],
    )?;
    Ok(())
}
