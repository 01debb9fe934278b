//! Webhooks as the Bot API documents them (<https://core.telegram.org/bots/api#setwebhook>,
//! `#getwebhookinfo`, `#deletewebhook`, and "Getting updates"):
//!
//! * `setWebhook` takes a URL ("an empty string to remove webhook integration"), an optional
//!   `secret_token` of "1-256 characters. Only characters A-Z, a-z, 0-9, _ and - are allowed",
//!   `allowed_updates`, and `drop_pending_updates`.
//! * While a webhook is set, `getUpdates` is refused (409, in `api`).
//! * Each update is sent as "an HTTPS POST request to the specified URL, containing a
//!   JSON-serialized Update", with the header `X-Telegram-Bot-Api-Secret-Token` when a secret was
//!   set; "in case of an unsuccessful request, we will give up after a reasonable amount of
//!   attempts" — here: retried until answered 2xx, in order, one at a time.
//!
//! Unlike Telegram, the fake calls plain `http://` URLs (the bot listens on loopback in tests)
//! and retries quickly.

use super::state::{Shared, State, now_unix};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Between tries of an update that failed: Telegram waits longer; tests should not.
const RETRY_AFTER: Duration = Duration::from_millis(100);
/// How long a POST may take to be answered before it counts as failed.
const POST_TIMEOUT: Duration = Duration::from_secs(10);
const SECRET_HEADER: &str = "X-Telegram-Bot-Api-Secret-Token";

/// What `setWebhook` set besides the URL, and how delivering went.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hook {
    pub secret_token: Option<String>,
    /// The network between Telegram and the bot, as a test sets it: a webhook URL starting with
    /// the first string is reached at the second instead (what DNS and a load balancer
    /// terminating TLS do for a real bot's public HTTPS address).
    pub route: Option<(String, String)>,
    /// (unix time, message) of the most recent failed POST, as `getWebhookInfo` reports it.
    pub last_error: Option<(i64, String)>,
    /// Every POST made: (update_id, status; 0 when nothing answered).
    pub posts: Vec<(i64, u16)>,
}

/// `setWebhook`'s parameters.
pub(crate) struct Set {
    pub url: String,
    pub secret_token: Option<String>,
    pub allowed_updates: Option<Vec<String>>,
    pub drop_pending_updates: bool,
}

pub(crate) fn set(s: &mut State, set: Set) -> Result<(), &'static str> {
    if let Some(secret) = &set.secret_token {
        if secret.is_empty() || secret.len() > 256 {
            return Err("Bad Request: secret token must be 1-256 characters long");
        }
        if !secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return Err("Bad Request: secret token contains unallowed characters");
        }
    }
    let calls_http = set.url.starts_with("https://") || set.url.starts_with("http://");
    if !set.url.is_empty() && !calls_http {
        return Err("Bad Request: bad webhook: An HTTPS URL must be provided for webhook");
    }
    if set.drop_pending_updates {
        s.pending.clear();
    }
    if let Some(kinds) = set.allowed_updates {
        s.allowed_updates = Some(kinds);
    }
    s.webhook_url = set.url;
    s.webhook.secret_token = set.secret_token.filter(|_| !s.webhook_url.is_empty());
    s.webhook.last_error = None;
    Ok(())
}

pub(crate) fn delete(s: &mut State, drop_pending_updates: bool) {
    s.webhook_url.clear();
    s.webhook.secret_token = None;
    if drop_pending_updates {
        s.pending.clear();
    }
}

/// A `WebhookInfo` object.
pub(crate) fn info(s: &State) -> Value {
    let mut info = json!({
        "url": s.webhook_url,
        "has_custom_certificate": false,
        "pending_update_count": s.pending.len() + s.redeliveries.len(),
    });
    if let Some((date, message)) = &s.webhook.last_error {
        info["last_error_date"] = json!(date);
        info["last_error_message"] = json!(message);
    }
    if let Some(kinds) = &s.allowed_updates {
        info["allowed_updates"] = json!(kinds);
    }
    info
}

/// The next update to POST: where, with which secret, and whether it is a redelivery.
struct Next {
    url: String,
    secret: Option<String>,
    update: Value,
    redelivery: bool,
}

fn next(s: &mut State) -> Option<Next> {
    if s.webhook_url.is_empty() {
        return None;
    }
    s.drop_unwanted();
    let (update, redelivery) = match s.redeliveries.first() {
        Some(update) => (update.clone(), true),
        None => (s.pending.front()?.1.clone(), false),
    };
    Some(Next { url: reached_at(s), secret: s.webhook.secret_token.clone(), update, redelivery })
}

/// Where a POST to the webhook URL arrives (see [`Hook::route`]).
pub(crate) fn reached_at(s: &State) -> String {
    match &s.webhook.route {
        Some((public, reach)) if s.webhook_url.starts_with(public.as_str()) => format!("{reach}{}", &s.webhook_url[public.len()..]),
        _ => s.webhook_url.clone(),
    }
}

/// A delivered update is forgotten, as a confirmed offset forgets it when polling.
fn delivered(s: &mut State, next: &Next) {
    if next.redelivery {
        s.redeliveries.remove(0);
        return;
    }
    let id = next.update["update_id"].as_i64().unwrap_or_default();
    if s.pending.front().is_some_and(|(front, _)| *front == id) {
        s.pending.pop_front();
        s.confirmed_offset = s.confirmed_offset.max(id + 1);
    }
}

/// Runs for the fake's lifetime: POST each queued update while a webhook is set.
pub(crate) async fn deliver(shared: Arc<Shared>) {
    loop {
        let woken = shared.updates.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let Some(next) = shared.with(next) else {
            // Woken by an injection; the timer catches a webhook set after we looked.
            tokio::select! {
                _ = &mut woken => {}
                _ = tokio::time::sleep(RETRY_AFTER) => {}
                _ = shared.shutdown.wait() => return,
            }
            continue;
        };
        let status = post(&next.url, next.secret.as_deref(), &next.update).await;
        let id = next.update["update_id"].as_i64().unwrap_or_default();
        let ok = (200..300).contains(&status);
        shared.with(|s| {
            s.webhook.posts.push((id, status));
            if ok {
                delivered(s, &next);
            } else {
                let message =
                    if status == 0 { "Connection refused".to_string() } else { format!("Wrong response from the webhook: {status}") };
                s.webhook.last_error = Some((now_unix(), message));
            }
        });
        shared.changed.notify_waiters();
        if !ok {
            tokio::select! {
                _ = tokio::time::sleep(RETRY_AFTER) => {}
                _ = shared.shutdown.wait() => return,
            }
        }
    }
}

/// One POST of an update; the status answered, 0 when nothing answered in time.
pub(crate) async fn post(url: &str, secret: Option<&str>, update: &Value) -> u16 {
    let Ok(client) = reqwest::Client::builder().timeout(POST_TIMEOUT).build() else { return 0 };
    let mut request = client.post(url).header("content-type", "application/json").body(update.to_string());
    if let Some(secret) = secret {
        request = request.header(SECRET_HEADER, secret);
    }
    match request.send().await {
        Ok(response) => response.status().as_u16(),
        Err(_) => 0,
    }
}
