//! Where the mailbox was read up to, kept in two places: the gateway's fenced cursor
//! ([`hermes_adapter::Cursors`], shared by replicas when the store is) and `cursor.json` in the
//! state folder ([`crate::state`]). On start the shared cursor wins: a replica taking the
//! mailbox over continues where the last holder stopped, not from its own stale file. A move is
//! recorded in the shared cursor first and only then in the file, so a holder whose lease is
//! over ([`CursorWrite::Fenced`]) moves neither and stops reading. Without a shared store the
//! file is the cursor, as it always was.

use crate::state::{Cursor, StateError, StateStore};
use hermes_adapter::{CursorError, CursorWrite, Cursors};

/// The cursor's name in the gateway's store.
pub(crate) const CURSOR: &str = "mailbox";

/// Why a cursor could not be recorded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordError {
    /// The shared cursor: nothing moved.
    #[error("{0}")]
    Shared(#[from] CursorError),
    /// The shared cursor moved, the file did not.
    #[error("{0}")]
    File(#[from] StateError),
}

/// The cursor to resume from: the shared one when there is one, else the file's. A shared value
/// that is not a cursor is reported and passed over.
pub(crate) async fn resume(store: &StateStore, cursors: &Cursors) -> Result<Option<Cursor>, CursorError> {
    if let Some(text) = cursors.load(CURSOR).await? {
        match serde_json::from_str(&text) {
            Ok(cursor) => return Ok(Some(cursor)),
            Err(e) => tracing::warn!("the shared mailbox cursor is damaged ({e}); using this machine's"),
        }
    }
    Ok(store.cursor())
}

/// Move the cursor to `cursor`: the shared one first, then the file. `Fenced`: neither moved.
pub(crate) async fn record(store: &StateStore, cursors: &Cursors, cursor: Cursor) -> Result<CursorWrite, RecordError> {
    let json = serde_json::to_string(&cursor).unwrap_or_default();
    if cursors.save(CURSOR, &json).await? == CursorWrite::Fenced {
        return Ok(CursorWrite::Fenced);
    }
    store.save_cursor(cursor)?;
    Ok(CursorWrite::Saved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::MemoryCursors;

    #[tokio::test]
    async fn a_fenced_holder_moves_neither_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path());
        let shared = MemoryCursors::new();
        let cursors = Cursors::shared(shared.clone());
        let at_7 = Cursor { uid_validity: 1, last_uid: 7 };
        assert_eq!(record(&store, &cursors, at_7).await.unwrap(), CursorWrite::Saved);
        shared.fence();
        let at_9 = Cursor { uid_validity: 1, last_uid: 9 };
        assert_eq!(record(&store, &cursors, at_9).await.unwrap(), CursorWrite::Fenced);
        assert_eq!(store.cursor(), Some(at_7), "the file stays");
        assert_eq!(resume(&store, &cursors).await.unwrap(), Some(at_7), "the shared cursor stays");
    }

    #[tokio::test]
    async fn the_shared_cursor_wins_over_a_stale_file_on_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path());
        store.save_cursor(Cursor { uid_validity: 1, last_uid: 3 }).unwrap();
        let shared = MemoryCursors::new();
        let cursors = Cursors::shared(shared.clone());
        assert_eq!(resume(&store, &cursors).await.unwrap(), Some(Cursor { uid_validity: 1, last_uid: 3 }), "nothing shared yet");
        // Another replica read on to UID 40 meanwhile.
        shared.put(CURSOR, r#"{"uid_validity":1,"last_uid":40}"#);
        assert_eq!(resume(&store, &cursors).await.unwrap(), Some(Cursor { uid_validity: 1, last_uid: 40 }));
        shared.put(CURSOR, "'; not json");
        assert_eq!(resume(&store, &cursors).await.unwrap(), Some(Cursor { uid_validity: 1, last_uid: 3 }), "damaged: the file");
    }

    #[tokio::test]
    async fn on_one_machine_the_file_is_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path());
        let at_5 = Cursor { uid_validity: 2, last_uid: 5 };
        assert_eq!(record(&store, &Cursors::local(), at_5).await.unwrap(), CursorWrite::Saved);
        assert_eq!(resume(&StateStore::new(dir.path()), &Cursors::local()).await.unwrap(), Some(at_5));
    }
}
