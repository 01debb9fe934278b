//! Messages the bot could not decrypt are never dropped silently: the first one of each
//! (room, megolm session) gets a notice in the room saying so and what to do, plus a warning in
//! the log; later ones of the same session are logged only (one missing key, one notice). The
//! reported pairs are kept in `undecryptable.json`, so a restart does not repeat a notice.
//!
//! Nor are they given up: each is kept in [`Waiting`] (`undecryptable-waiting.json`) until the
//! key of its session arrives (a late `m.room_key`, a forwarded key, a backup), and is then read
//! again and answered like any message, once (the inbox deduplicates on the event id). Kept are at
//! most [`WAITING_MAX`] events for at most [`WAITING_FOR`]; a key later than that is a message
//! nobody is waiting for an answer to any more.

use crate::state::{read_json, write_json};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Undecryptable events kept waiting for their key, at most.
pub(crate) const WAITING_MAX: usize = 1_000;
/// How long one waits for its key.
pub(crate) const WAITING_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// Pairs remembered; past this the oldest half is forgotten (a very old session reported again
/// is a repeated notice, not a lost message).
const REMEMBERED: usize = 5_000;

pub(crate) struct Reported {
    path: PathBuf,
    seen: BTreeSet<(String, String)>,
}

impl Reported {
    pub(crate) fn load(path: PathBuf) -> Self {
        let seen = read_json::<Vec<(String, String)>>(&path).ok().flatten().unwrap_or_default().into_iter().collect();
        Self { path, seen }
    }

    /// Whether this (room, session) is new; it is remembered (and saved) either way.
    pub(crate) fn first_time(&mut self, room: &str, session: &str) -> bool {
        if !self.seen.insert((room.to_string(), session.to_string())) {
            return false;
        }
        if self.seen.len() > REMEMBERED {
            let keep: Vec<_> = self.seen.iter().skip(REMEMBERED / 2).cloned().collect();
            self.seen = keep.into_iter().collect();
        }
        let list: Vec<_> = self.seen.iter().cloned().collect();
        if let Err(e) = write_json(&self.path, &list) {
            tracing::warn!("could not save the reported undecryptable sessions ({e}); a restart may repeat a notice");
        }
        true
    }
}

/// One undecryptable event waiting for the key of its megolm session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub room_id: String,
    pub event_id: String,
    pub session_id: String,
    /// Seconds since the Unix epoch when it was first seen.
    pub since: u64,
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The events waiting for keys, persisted on every change.
pub(crate) struct Waiting {
    path: PathBuf,
    events: Vec<Pending>,
}

impl Waiting {
    /// The events saved at `path` (none when missing or unreadable: a corrupt file must not stop
    /// the bot; its events stay unanswered, and were reported when they arrived).
    pub(crate) fn load(path: PathBuf) -> Self {
        let events = read_json::<Vec<Pending>>(&path).ok().flatten().unwrap_or_default();
        let mut waiting = Self { path, events };
        waiting.forget_expired(now_secs());
        waiting
    }

    /// Keep `event_id` of `room_id` until the key of `session_id` arrives.
    pub(crate) fn keep(&mut self, room_id: &str, event_id: &str, session_id: &str) {
        if self.events.iter().any(|p| p.event_id == event_id) {
            return;
        }
        self.events.push(Pending {
            room_id: room_id.to_string(),
            event_id: event_id.to_string(),
            session_id: session_id.to_string(),
            since: now_secs(),
        });
        self.forget_expired(now_secs());
        self.save();
    }

    /// The waiting events whose session is one of `arrived` (room, session). They stay kept
    /// until [`Self::forget`]: an event is let go only once the inbox has it.
    pub(crate) fn ready(&self, arrived: &[(String, String)]) -> Vec<Pending> {
        self.events
            .iter()
            .filter(|p| arrived.iter().any(|(room, session)| room == &p.room_id && session == &p.session_id))
            .cloned()
            .collect()
    }

    /// Every waiting event (on start: keys may have come in the run that saw the event).
    pub(crate) fn all(&self) -> Vec<Pending> {
        self.events.clone()
    }

    /// The events now read and in the inbox are waited for no more.
    pub(crate) fn forget(&mut self, event_ids: &[String]) {
        let before = self.events.len();
        self.events.retain(|p| !event_ids.contains(&p.event_id));
        if self.events.len() != before {
            self.save();
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Drop the events older than [`WAITING_FOR`], then the oldest past [`WAITING_MAX`].
    fn forget_expired(&mut self, now: u64) {
        let before = self.events.len();
        self.events.retain(|p| now.saturating_sub(p.since) < WAITING_FOR.as_secs());
        let excess = self.events.len().saturating_sub(WAITING_MAX);
        self.events.drain(..excess);
        if self.events.len() < before {
            tracing::warn!(
                forgotten = before - self.events.len(),
                "undecryptable Matrix messages whose key never came are no longer waited for"
            );
        }
    }

    fn save(&self) {
        if let Err(e) = write_json(&self.path, &self.events) {
            tracing::warn!("could not save the undecryptable messages waiting for keys ({e}); after a restart they are not retried");
        }
    }
}

/// The notice: who wrote, that the bot's device lacks the key, and what the sender can do.
pub(crate) fn notice(sender: &str, device: &str) -> String {
    format!(
        "⚠️ I could not decrypt a message from {sender}: my device {device} did not receive its key. \
         Please verify my device (or allow sending keys to unverified devices) and send the message again."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_session_is_reported_once_even_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("undecryptable.json");
        let mut reported = Reported::load(path.clone());
        assert!(reported.first_time("!r:x", "s1"));
        assert!(!reported.first_time("!r:x", "s1"));
        assert!(reported.first_time("!other:x", "s1"));
        let mut again = Reported::load(path);
        assert!(!again.first_time("!r:x", "s1"));
        assert!(again.first_time("!r:x", "s2"));
    }

    #[test]
    fn a_waiting_message_is_handed_back_once_when_its_key_arrives_even_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("waiting.json");
        let mut waiting = Waiting::load(path.clone());
        waiting.keep("!r:x", "$1", "s1");
        waiting.keep("!r:x", "$1", "s1");
        waiting.keep("!r:x", "$2", "s2");
        waiting.keep("!other:x", "$3", "s1");
        assert_eq!(waiting.len(), 3, "the same event is kept once");
        let mut again = Waiting::load(path.clone());
        let ready = again.ready(&[("!r:x".into(), "s1".into())]);
        assert_eq!(ready.iter().map(|p| p.event_id.as_str()).collect::<Vec<_>>(), ["$1"], "only that room's session");
        assert_eq!(Waiting::load(path.clone()).len(), 3, "kept until the inbox has it");
        again.forget(&["$1".to_string()]);
        assert!(again.ready(&[("!r:x".into(), "s1".into())]).is_empty(), "handed back once");
        let rest = Waiting::load(path).all();
        assert_eq!(rest.iter().map(|p| p.event_id.as_str()).collect::<Vec<_>>(), ["$2", "$3"]);
    }

    #[test]
    fn a_corrupt_or_oversized_waiting_file_does_not_stop_the_bot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("waiting.json");
        std::fs::write(&path, b"{not json").unwrap();
        let mut waiting = Waiting::load(path.clone());
        assert!(waiting.is_empty(), "a corrupt file is read as nothing waiting");
        waiting.keep("!r:x", "$1", "s");
        assert_eq!(Waiting::load(path.clone()).len(), 1, "and is replaced by the next save");
        let many: Vec<Pending> = (0..WAITING_MAX * 3)
            .map(|n| Pending { room_id: "!r:x".into(), event_id: format!("${n}"), session_id: "s".into(), since: now_secs() })
            .collect();
        std::fs::write(&path, serde_json::to_vec(&many).unwrap()).unwrap();
        assert_eq!(Waiting::load(path).len(), WAITING_MAX, "a file written to flood the bot is cut to the bound");
    }

    #[test]
    fn waiting_is_bounded_in_number_and_age() {
        let dir = tempfile::tempdir().unwrap();
        let mut waiting = Waiting::load(dir.path().join("waiting.json"));
        for n in 0..WAITING_MAX + 5 {
            waiting.keep("!r:x", &format!("${n}"), "s");
        }
        assert_eq!(waiting.len(), WAITING_MAX);
        assert_eq!(waiting.all()[0].event_id, "$5", "the oldest went first");
        let mut waiting = Waiting::load(dir.path().join("old.json"));
        waiting.keep("!r:x", "$old", "s");
        waiting.events[0].since -= WAITING_FOR.as_secs();
        waiting.forget_expired(now_secs());
        assert_eq!(waiting.len(), 0, "a day later nobody waits for that answer");
    }
}
