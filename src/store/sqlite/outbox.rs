//! The outbox in SQLite: `INSERT OR IGNORE` on the idempotency key reserves it; when the key
//! is already there, its row's state says what happened before.

use super::{CachedStatements, SqliteStore, now_ms};
use crate::store::{Outbox, OutboxReservation, OutboxRow, SendNow, StoreError};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

#[async_trait]
impl Outbox for SqliteStore {
    async fn outbox_claim(&self, key: &str, target: &str, body: &str, send_now: SendNow) -> Result<OutboxReservation, StoreError> {
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

    async fn outbox_mark_sending(&self, key: &str) -> Result<(), StoreError> {
        let key = key.to_string();
        self.write(move |c| mark_sending(c, &key)).await
    }

    async fn outbox_mark_sent(&self, key: &str, platform_message_id: Option<&str>) -> Result<(), StoreError> {
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

    async fn outbox_mark_failed(&self, key: &str, error: &str) -> Result<(), StoreError> {
        self.outbox_set(key, "failed", error).await
    }

    async fn outbox_mark_ambiguous(&self, key: &str, detail: &str) -> Result<(), StoreError> {
        self.outbox_set(key, "ambiguous", detail).await
    }

    async fn outbox_get(&self, key: &str) -> Result<Option<OutboxRow>, StoreError> {
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

impl SqliteStore {
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
}

fn mark_sending(c: &Connection, key: &str) -> Result<(), StoreError> {
    c.run(
        "UPDATE outbox SET state = 'sending', attempts = attempts + 1, updated_at = ?2 WHERE idempotency_key = ?1",
        params![key, now_ms()],
    )?;
    Ok(())
}
