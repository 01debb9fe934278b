//! The `next_batch` token the sync resumes from, kept in two places: the gateway's fenced cursor
//! ([`hermes_adapter::Cursors`], shared by replicas when the store is) and `sync-token` in the
//! state folder ([`crate::state`]). On start the shared token wins: a replica taking the sync
//! over continues where the last holder stopped, not from its own stale file. A token is
//! recorded in the shared cursor first and only then in the file, so a holder whose lease is
//! over ([`CursorWrite::Fenced`]) moves neither and stops syncing. Without a shared store the
//! file is the cursor, as it always was.
//!
//! A shared token this replica's file does not hold was reached by another replica's sync: this
//! replica's matrix-sdk store lacks what came before it (the rooms' members, so a DM would look
//! like a room and go unanswered), and its first sync asks for the rooms' full state
//! ([`Resume::taken_over`]).

use crate::state::StateDir;
use hermes_adapter::{AdapterError, CursorWrite, Cursors};

/// The cursor's name in the gateway's store.
pub(crate) const CURSOR: &str = "next_batch";

/// Where the sync resumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resume {
    /// The shared token when there is one, else the file's; `None` on the very first start.
    pub token: Option<String>,
    /// The token is another replica's: this replica's store missed what it synced.
    pub taken_over: bool,
}

/// Where to resume: the shared token when there is one, else the file's.
pub(crate) async fn resume(state: &StateDir, cursors: &Cursors) -> Result<Resume, AdapterError> {
    let shared =
        cursors.load(CURSOR).await.map_err(|e| AdapterError::retryable("cursor", format!("could not read the sync token: {e}")))?;
    let own = state.sync_token().map_err(|e| AdapterError::retryable("state", format!("could not read the sync token: {e}")))?;
    Ok(match shared.filter(|token| !token.trim().is_empty()) {
        Some(token) => Resume { taken_over: own.as_ref() != Some(&token), token: Some(token) },
        None => Resume { token: own, taken_over: false },
    })
}

/// Record `token` once every event before it is in the inbox: the shared cursor first, then the
/// file. `Fenced`: neither moved.
pub(crate) async fn record(state: &StateDir, cursors: &Cursors, token: &str) -> Result<CursorWrite, AdapterError> {
    let write =
        cursors.save(CURSOR, token).await.map_err(|e| AdapterError::retryable("cursor", format!("could not save the sync token: {e}")))?;
    if write == CursorWrite::Fenced {
        return Ok(CursorWrite::Fenced);
    }
    state.save_sync_token(token).map_err(|e| AdapterError::retryable("state", format!("could not save the sync token: {e}")))?;
    Ok(CursorWrite::Saved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::MemoryCursors;

    fn state() -> (tempfile::TempDir, StateDir) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().join("matrix"));
        state.prepare().unwrap();
        (dir, state)
    }

    #[tokio::test]
    async fn a_fenced_holder_moves_neither_token() {
        let (_dir, state) = state();
        let shared = MemoryCursors::new();
        let cursors = Cursors::shared(shared.clone());
        assert_eq!(record(&state, &cursors, "s10_1").await.unwrap(), CursorWrite::Saved);
        shared.fence();
        assert_eq!(record(&state, &cursors, "s11_1").await.unwrap(), CursorWrite::Fenced);
        assert_eq!(state.sync_token().unwrap().as_deref(), Some("s10_1"), "the file stays");
        assert_eq!(resume(&state, &cursors).await.unwrap().token.as_deref(), Some("s10_1"), "the shared token stays");
    }

    #[tokio::test]
    async fn the_shared_token_wins_over_a_stale_file_on_start() {
        let (_dir, state) = state();
        state.save_sync_token("s3_1").unwrap();
        let shared = MemoryCursors::new();
        let cursors = Cursors::shared(shared.clone());
        let own = Resume { token: Some("s3_1".into()), taken_over: false };
        assert_eq!(resume(&state, &cursors).await.unwrap(), own, "nothing shared yet: the file");
        shared.put(CURSOR, "s40_7");
        let taken = Resume { token: Some("s40_7".into()), taken_over: true };
        assert_eq!(resume(&state, &cursors).await.unwrap(), taken, "another replica's token: its rooms' state is asked for");
        record(&state, &cursors, "s41_7").await.unwrap();
        let own = Resume { token: Some("s41_7".into()), taken_over: false };
        assert_eq!(resume(&state, &cursors).await.unwrap(), own, "this replica's own token: its store holds the rooms");
    }

    #[tokio::test]
    async fn a_huge_token_is_refused_and_nothing_moves() {
        let (_dir, state) = state();
        let cursors = Cursors::shared(MemoryCursors::new());
        record(&state, &cursors, "s1_1").await.unwrap();
        let error = record(&state, &cursors, &"s".repeat(100_000)).await.unwrap_err().to_string();
        assert!(error.contains("cursor `next_batch` refused: the value is 100000 bytes"), "{error}");
        assert_eq!(resume(&state, &cursors).await.unwrap().token.as_deref(), Some("s1_1"));
        assert_eq!(state.sync_token().unwrap().as_deref(), Some("s1_1"));
    }

    #[tokio::test]
    async fn on_one_machine_the_file_is_the_cursor() {
        let (_dir, state) = state();
        assert_eq!(record(&state, &Cursors::local(), "s5_2").await.unwrap(), CursorWrite::Saved);
        assert_eq!(resume(&state, &Cursors::local()).await.unwrap().token.as_deref(), Some("s5_2"));
    }
}
