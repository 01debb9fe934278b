//! One webhook POST, from its secret token and body to the status Telegram is answered: 401 for
//! a missing or wrong token (nothing stored), 400 for a body that is no update, 200 once the
//! inbox stored it (or already had it), 503 when the inbox failed, so that Telegram redelivers.

use crate::adapter::TelegramAdapter;
use crate::inbound::{Gate, Identity};
use crate::poll;
use hermes_adapter::{AdapterContext, Secret};
use teloxide::types::Update;
use tokio::sync::oneshot;

/// A POST as the listener received it, and where its answer goes.
pub(crate) struct Delivery {
    /// `X-Telegram-Bot-Api-Secret-Token`, if sent.
    pub secret: Option<Vec<u8>>,
    pub body: Vec<u8>,
    pub reply: oneshot::Sender<Reply>,
}

/// What Telegram is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Stored (or stored before): Telegram may forget it.
    Stored,
    /// No or the wrong secret token.
    Unauthorized,
    /// The body is not a Bot API update.
    NotAnUpdate,
    /// The inbox failed: Telegram keeps the update and sends it again.
    Unavailable,
}

impl Reply {
    pub fn status(self) -> u16 {
        match self {
            Reply::Stored => 200,
            Reply::Unauthorized => 401,
            Reply::NotAnUpdate => 400,
            Reply::Unavailable => 503,
        }
    }
}

/// Handle one delivery and answer it; a listener that gave up waiting loses only the answer.
pub(super) async fn handle(
    adapter: &TelegramAdapter,
    ctx: &AdapterContext,
    me: &Identity,
    gate: &Gate,
    secret: &Secret,
    delivery: Delivery,
) {
    let reply = if secret_matches(secret.expose().as_bytes(), delivery.secret.as_deref()) {
        store(adapter, ctx, me, gate, &delivery.body).await
    } else {
        tracing::warn!("a webhook POST without the right secret token was refused");
        Reply::Unauthorized
    };
    let _ = delivery.reply.send(reply);
}

async fn store(adapter: &TelegramAdapter, ctx: &AdapterContext, me: &Identity, gate: &Gate, body: &[u8]) -> Reply {
    let update: Update = match serde_json::from_slice(body) {
        Ok(update) => update,
        Err(e) => {
            tracing::warn!("a webhook POST was not a Telegram update: {e}");
            return Reply::NotAnUpdate;
        }
    };
    match poll::store_batch(adapter, ctx, me, gate, std::slice::from_ref(&update)).await {
        Ok(_) => Reply::Stored,
        Err(e) => {
            tracing::warn!(update_id = update.id.0, "update not stored; Telegram will send it again: {e}");
            Reply::Unavailable
        }
    }
}

/// Compares every byte whatever the first difference, so the time taken does not tell a guesser
/// how much of the token was right (only whether its length was).
fn secret_matches(expected: &[u8], given: Option<&[u8]>) -> bool {
    let Some(given) = given else { return false };
    if expected.len() != given.len() {
        return false;
    }
    let difference = expected.iter().zip(given).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_matches() {
        assert!(secret_matches(b"0123456789abcdef", Some(b"0123456789abcdef")));
        assert!(!secret_matches(b"0123456789abcdef", Some(b"0123456789abcdeF")));
        assert!(!secret_matches(b"0123456789abcdef", Some(b"0123456789abcde")));
        assert!(!secret_matches(b"0123456789abcdef", None));
    }
}
