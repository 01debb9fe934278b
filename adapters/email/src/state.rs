//! What the adapter keeps on disk in its state folder (`HERMES_HOME/platforms/email`), so that a
//! restart neither re-reads the mailbox nor loses the threads of conversations:
//!
//! * `cursor.json`: the mailbox's UIDVALIDITY and the highest UID handled;
//! * `threads.json`: per sender and per received Message-ID, the subject, Message-ID and
//!   References a reply needs to thread (bounded; the oldest are forgotten first).
//!
//! Both are written atomically (a temporary file renamed over the old one) and readable only by
//! their owner (0600 in a 0700 folder).

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Received messages remembered for threading.
const MESSAGES_REMEMBERED: usize = 5_000;

/// Where the mailbox was read up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub uid_validity: u32,
    /// The highest UID handled (answered, skipped or ignored); only higher ones are fetched.
    pub last_uid: u32,
}

/// What a reply to one received mail needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// The received mail's Message-ID, with its angle brackets.
    pub message_id: String,
    pub subject: Option<String>,
    /// The received mail's References (then its Message-ID is appended for the reply).
    pub references: Vec<String>,
    /// Order of arrival, to forget the oldest first.
    pub seq: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Threads {
    /// Sender address → its last received mail.
    by_chat: HashMap<String, ThreadInfo>,
    /// Message-ID → that mail.
    by_message: HashMap<String, ThreadInfo>,
    next_seq: u64,
}

/// Why state could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct StateError {
    path: PathBuf,
    source: std::io::Error,
}

/// The state folder.
#[derive(Debug)]
pub struct StateStore {
    dir: PathBuf,
    threads: Mutex<Option<Threads>>,
}

impl StateStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into(), threads: Mutex::new(None) }
    }

    fn cursor_path(&self) -> PathBuf {
        self.dir.join("cursor.json")
    }

    fn threads_path(&self) -> PathBuf {
        self.dir.join("threads.json")
    }

    /// The stored cursor; `None` when there is none (first start) or it cannot be read (then
    /// the mailbox is treated as at first start: nothing old is answered).
    pub fn cursor(&self) -> Option<Cursor> {
        let path = self.cursor_path();
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!("could not read {}: {e}; starting from the mailbox's current end", path.display());
                return None;
            }
        };
        match serde_json::from_slice(&bytes) {
            Ok(cursor) => Some(cursor),
            Err(e) => {
                tracing::warn!("{} is damaged ({e}); starting from the mailbox's current end", path.display());
                None
            }
        }
    }

    pub fn save_cursor(&self, cursor: Cursor) -> Result<(), StateError> {
        let json = serde_json::to_vec(&cursor).unwrap_or_default();
        write_private(&self.cursor_path(), &json)
    }

    fn with_threads<T>(&self, f: impl FnOnce(&mut Threads) -> T) -> T {
        let mut slot = self.threads.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let threads = slot.get_or_insert_with(|| {
            std::fs::read(self.threads_path()).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
        });
        f(threads)
    }

    /// Remember a received mail of `chat` so replies thread under it, and persist.
    pub fn remember(&self, chat: &str, message_id: &str, subject: Option<&str>, references: Vec<String>) {
        let json = self.with_threads(|threads| {
            threads.next_seq += 1;
            let info =
                ThreadInfo { message_id: message_id.to_string(), subject: subject.map(str::to_string), references, seq: threads.next_seq };
            threads.by_chat.insert(chat.to_string(), info.clone());
            threads.by_message.insert(message_id.to_string(), info);
            if threads.by_message.len() > MESSAGES_REMEMBERED {
                let mut seqs: Vec<u64> = threads.by_message.values().map(|i| i.seq).collect();
                seqs.sort_unstable();
                let cut = seqs[threads.by_message.len() - MESSAGES_REMEMBERED];
                threads.by_message.retain(|_, i| i.seq >= cut);
                threads.by_chat.retain(|_, i| i.seq >= cut);
            }
            serde_json::to_vec(&*threads).unwrap_or_default()
        });
        if let Err(e) = write_private(&self.threads_path(), &json) {
            tracing::warn!("could not save the email threads ({e}); replies after a restart may not thread");
        }
    }

    /// The mail a reply answers: the one named by `reply_to` when known, else `chat`'s last.
    pub fn thread_for(&self, chat: &str, reply_to: Option<&str>) -> Option<ThreadInfo> {
        self.with_threads(|threads| reply_to.and_then(|id| threads.by_message.get(id)).or_else(|| threads.by_chat.get(chat)).cloned())
    }
}

/// Replace `path` atomically with a 0600 file holding `bytes` (the folder is made 0700).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let err = |source| StateError { path: path.to_path_buf(), source };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(err)?;
    let tmp = dir.join(format!(".{}.{}.tmp", path.file_name().and_then(|n| n.to_str()).unwrap_or("state"), std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_cursor_and_threads_survive_a_restart_privately() {
        let dir = tempfile::tempdir().unwrap();
        let state_dir = dir.path().join("platforms/email");
        let store = StateStore::new(&state_dir);
        assert_eq!(store.cursor(), None);
        store.save_cursor(Cursor { uid_validity: 7, last_uid: 42 }).unwrap();
        store.remember("alice@example.test", "<m1@example.test>", Some("Plans"), vec!["<m0@example.test>".into()]);
        store.remember("alice@example.test", "<m2@example.test>", Some("Re: Plans"), vec![]);
        let again = StateStore::new(&state_dir);
        assert_eq!(again.cursor(), Some(Cursor { uid_validity: 7, last_uid: 42 }));
        assert_eq!(again.thread_for("alice@example.test", None).unwrap().message_id, "<m2@example.test>");
        assert_eq!(again.thread_for("alice@example.test", Some("<m1@example.test>")).unwrap().subject.as_deref(), Some("Plans"));
        assert_eq!(again.thread_for("bob@example.test", Some("<unknown>")), None);
        for file in ["cursor.json", "threads.json"] {
            let mode = std::fs::metadata(state_dir.join(file)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{file}");
        }
        assert_eq!(std::fs::metadata(&state_dir).unwrap().permissions().mode() & 0o777, 0o700);
    }

    #[test]
    fn a_damaged_cursor_means_a_fresh_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cursor.json"), b"{not json").unwrap();
        assert_eq!(StateStore::new(dir.path()).cursor(), None);
    }
}
