//! Finding a message whose send was cut off before its answer, from any device of the bot's
//! account. A transaction id deduplicates a resend only from the device that made it (the
//! homeserver keys transaction ids by access token); with replicas sharing a store, the part is
//! taken over by another replica, logged in as another device. So every message carries its
//! transaction id in its content ([`MARK_KEY`]), and a lookup reads the room's newest events for
//! it: found, the part was delivered; not among the events since the attempt, it was not.

use crate::errors::classify;
use hermes_adapter::{Lookup, SendError, SendReceipt};
use matrix_sdk::Room;
use matrix_sdk::room::MessagesOptions;
use serde_json::Value;
use std::time::Duration;

/// The content key a message's transaction id is written under.
pub(crate) const MARK_KEY: &str = "org.hermes.txn";
/// How many of the room's newest events a lookup reads.
const LOOKBACK: u16 = 50;
/// How far the homeserver's clock may be behind ours: events this much older than the attempt
/// are still read.
const CLOCK_SLACK: Duration = Duration::from_secs(60);

/// Whether `room` holds the bot's (`me`) message marked `txn`, whose send began `since` ago.
pub(crate) async fn find(room: &Room, me: &str, txn: &str, since: Duration) -> Result<Lookup, SendError> {
    let mut options = MessagesOptions::backward();
    options.limit = LOOKBACK.into();
    let page = room.messages(options).await.map_err(|e| classify(&e))?;
    let attempted_ms = chrono::Utc::now().timestamp_millis() - (since + CLOCK_SLACK).as_millis() as i64;
    let events = page.chunk.iter().filter_map(|event| serde_json::from_str::<Value>(event.raw().json().get()).ok());
    // A short page reached the room's first event (or the first the bot may see); Synapse still
    // gives an `end` token there.
    let whole_room = page.end.is_none() || page.chunk.len() < usize::from(LOOKBACK);
    Ok(verdict(events, me, txn, attempted_ms, whole_room))
}

/// What the room's newest events (newest first) say of the bot's message marked `txn`, whose
/// send began after `attempted_ms` (the server's clock). `whole_room`: no older events exist.
fn verdict(events: impl Iterator<Item = Value>, me: &str, txn: &str, attempted_ms: i64, whole_room: bool) -> Lookup {
    let mark = format!("/content/{MARK_KEY}");
    // One of the bot's own messages it cannot read (encrypted for another device) may be it.
    let mut unreadable_of_mine = false;
    for event in events {
        let mine = event.get("sender").and_then(Value::as_str) == Some(me);
        if mine && event.pointer(&mark).and_then(Value::as_str) == Some(txn) {
            let message_id = event.get("event_id").and_then(Value::as_str).map(str::to_string);
            return Lookup::Found(SendReceipt { message_id });
        }
        unreadable_of_mine |= mine && event.get("type").and_then(Value::as_str) == Some("m.room.encrypted");
        if event.get("origin_server_ts").and_then(Value::as_i64).is_some_and(|ts| ts < attempted_ms) {
            return if unreadable_of_mine { Lookup::CannotTell } else { Lookup::NotThere };
        }
    }
    if whole_room && !unreadable_of_mine { Lookup::NotThere } else { Lookup::CannotTell }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ME: &str = "@bot:localhost";

    fn message(sender: &str, txn: Option<&str>, ts: i64) -> Value {
        let mut content = json!({"msgtype": "m.text", "body": "hi"});
        if let Some(txn) = txn {
            content[MARK_KEY] = json!(txn);
        }
        json!({"type": "m.room.message", "sender": sender, "event_id": format!("$e{ts}"), "origin_server_ts": ts, "content": content})
    }

    fn encrypted(sender: &str, ts: i64) -> Value {
        json!({"type": "m.room.encrypted", "sender": sender, "event_id": format!("$x{ts}"), "origin_server_ts": ts, "content": {}})
    }

    #[test]
    fn the_marked_message_is_found_whoever_sent_it_from_which_device() {
        let events = vec![message("@alice:localhost", None, 300), message(ME, Some("hermes-1"), 200), message(ME, Some("hermes-0"), 100)];
        let found = verdict(events.into_iter(), ME, "hermes-1", 150, false);
        assert_eq!(found, Lookup::Found(SendReceipt { message_id: Some("$e200".into()) }));
    }

    #[test]
    fn past_the_attempt_without_it_it_is_not_there() {
        let events = vec![message(ME, Some("hermes-0"), 300), message("@alice:localhost", None, 100)];
        assert_eq!(verdict(events.clone().into_iter(), ME, "hermes-1", 150, false), Lookup::NotThere);
        // Someone else marking their message with the bot's transaction id proves nothing.
        let forged = vec![message("@alice:localhost", Some("hermes-1"), 300), message(ME, None, 100)];
        assert_eq!(verdict(forged.into_iter(), ME, "hermes-1", 150, false), Lookup::NotThere);
    }

    #[test]
    fn an_unreadable_message_of_its_own_or_a_short_window_cannot_tell() {
        let events = vec![encrypted(ME, 300), message("@alice:localhost", None, 100)];
        assert_eq!(verdict(events.into_iter(), ME, "hermes-1", 150, false), Lookup::CannotTell);
        let all_newer = vec![message(ME, Some("hermes-0"), 300)];
        assert_eq!(verdict(all_newer.clone().into_iter(), ME, "hermes-1", 150, false), Lookup::CannotTell, "older events unread");
        assert_eq!(verdict(all_newer.into_iter(), ME, "hermes-1", 150, true), Lookup::NotThere, "the room has no older events");
    }
}
