//! The inbox: every inbound event, keyed by its platform event id, from acceptance until its
//! turn ended. Accepting an id that is already stored is how a platform's redelivery is dropped.

use crate::store::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxState {
    /// Stored, not yet picked up by a turn.
    Accepted,
    /// A turn is working on it.
    Processing,
    /// The turn ended (answered, refused or failed with a message to the user).
    Done,
    /// It can never be processed (e.g. an unreadable payload).
    Failed,
    /// Processing it crashed (a panic, or the gateway dying under it again and again): parked,
    /// never replayed, shown by `hermes gateway status`.
    Poisoned,
}

impl InboxState {
    /// The state as every backend stores it.
    pub(in crate::store) fn as_str(self) -> &'static str {
        match self {
            InboxState::Accepted => "accepted",
            InboxState::Processing => "processing",
            InboxState::Done => "done",
            InboxState::Failed => "failed",
            InboxState::Poisoned => "poisoned",
        }
    }

    /// A stored state back; an unknown word means the row is unreadable.
    pub(in crate::store) fn parse(stored: &str) -> Result<InboxState, StoreError> {
        Ok(match stored {
            "accepted" => InboxState::Accepted,
            "processing" => InboxState::Processing,
            "done" => InboxState::Done,
            "failed" => InboxState::Failed,
            "poisoned" => InboxState::Poisoned,
            other => return Err(StoreError::Corrupt(format!("unknown inbox state {other:?}"))),
        })
    }
}

#[derive(Debug, Clone)]
pub struct InboxRow {
    pub event_id: String,
    pub platform: String,
    pub payload: String,
    pub state: InboxState,
    /// How many times a turn started on it (more than one = replayed after a crash).
    pub attempts: i64,
    pub error: Option<String>,
    pub received_at: DateTime<Utc>,
}

#[async_trait]
pub trait Inbox: Send + Sync {
    /// Store an inbound event as accepted; `false` when its id was already stored (a
    /// redelivery), which keeps the first payload. Of concurrent accepts of one id, one wins.
    async fn inbox_accept(&self, event_id: &str, platform: &str, payload: &str) -> Result<bool, StoreError>;

    /// Store several inbound events `(event_id, platform, payload)` in one write; for each,
    /// `false` when its id was already stored. All or none: a failure stores none of them.
    async fn inbox_accept_all(&self, events: Vec<(String, String, String)>) -> Result<Vec<bool>, StoreError>;

    /// A turn started on the event: one more attempt. A finished event stays finished.
    async fn inbox_mark_processing(&self, event_id: &str) -> Result<(), StoreError>;

    /// Put the event in `state` with `error` (what the marks below do, each with its state).
    async fn inbox_set_state(&self, event_id: &str, state: InboxState, error: Option<&str>) -> Result<(), StoreError>;

    async fn inbox_mark_done(&self, event_id: &str) -> Result<(), StoreError> {
        self.inbox_set_state(event_id, InboxState::Done, None).await
    }

    async fn inbox_mark_failed(&self, event_id: &str, error: &str) -> Result<(), StoreError> {
        self.inbox_set_state(event_id, InboxState::Failed, Some(error)).await
    }

    /// Park an event whose processing crashed; `reason` says how (with the incident id).
    async fn inbox_mark_poisoned(&self, event_id: &str, reason: &str) -> Result<(), StoreError> {
        self.inbox_set_state(event_id, InboxState::Poisoned, Some(reason)).await
    }

    /// The most recently parked events, newest first.
    async fn inbox_poisoned(&self, limit: usize) -> Result<Vec<InboxRow>, StoreError>;

    /// Events accepted but not finished (accepted or processing), oldest first: what a restart
    /// must replay.
    async fn inbox_unfinished(&self) -> Result<Vec<InboxRow>, StoreError>;

    /// [`Self::inbox_unfinished`], of `platforms` only: what a replica serving them routes. A
    /// store replicas share filters where the rows are; the default reads them all.
    async fn inbox_unfinished_of(&self, platforms: &[String]) -> Result<Vec<InboxRow>, StoreError> {
        let mut rows = self.inbox_unfinished().await?;
        rows.retain(|row| platforms.contains(&row.platform));
        Ok(rows)
    }

    async fn inbox_get(&self, event_id: &str) -> Result<Option<InboxRow>, StoreError>;

    /// Forget finished (done or failed) events last updated `keep` ago or earlier; returns how
    /// many were removed. Until then a redelivery of the same event id is still recognised.
    async fn inbox_prune(&self, keep: Duration) -> Result<usize, StoreError>;
}
