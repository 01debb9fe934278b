//! Pending command approvals: one row per command the agent is waiting to have approved, kept
//! with its session so that a gateway which dies while one waits can, on its next start, tell
//! that chat the command was denied (nobody is waiting for the answer any more).

use crate::store::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use hermes_adapter::ChatTarget;

/// One command waiting for a person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingApproval {
    /// Short, unguessable id that buttons and `/approve <id>` name.
    pub id: String,
    pub session_key: String,
    /// The chat the prompt went to.
    pub target: ChatTarget,
    /// The command as shown to the user (secrets already redacted).
    pub command: String,
    pub created_at: DateTime<Utc>,
}

#[async_trait]
pub trait Approvals: Send + Sync {
    /// Record `pending` before its prompt is sent.
    async fn approval_open(&self, pending: &PendingApproval) -> Result<(), StoreError>;

    /// The approval was answered (or given up); `outcome` is what happened (`approved`, `denied`,
    /// `timed_out`, …). `false` when it was not open.
    async fn approval_close(&self, id: &str, outcome: &str) -> Result<bool, StoreError>;

    /// Close every approval still open with `outcome` (only those prompted on `platform`, when
    /// given) and return them, oldest first: called at start, or when a replica takes a platform
    /// over, when no turn can be waiting for any of them.
    async fn approval_close_orphans(&self, outcome: &str, platform: Option<&str>) -> Result<Vec<PendingApproval>, StoreError>;
}
