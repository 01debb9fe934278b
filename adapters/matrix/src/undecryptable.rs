//! Messages the bot could not decrypt are never dropped silently: the first one of each
//! (room, megolm session) gets a notice in the room saying so and what to do, plus a warning in
//! the log; later ones of the same session are logged only (one missing key, one notice). The
//! reported pairs are kept in `undecryptable.json`, so a restart does not repeat a notice.

use crate::state::{read_json, write_json};
use std::collections::BTreeSet;
use std::path::PathBuf;

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
}
