//! The store at `HERMES_HOME/state.db`: sessions, messages (with search), routing, the inbound
//! inbox, the outbound outbox, usage and claims. The operations are traits in `backend`
//! (grouped by concern); `sqlite` is the implementation and the only code that speaks SQL;
//! `suite` is the behaviour every backend must show, run against each of them.
//!
//! The gateway holds a [`Store`]: any backend behind an `Arc`, so call sites read
//! `store.route_get(..)` whatever the backend, and a clone is a pointer copy.

mod backend;
mod sqlite;

#[cfg(test)]
mod suite;

pub use backend::{
    Approvals, AttemptEnd, CallUsage, Claims, Conversation, DeadLetter, HistoryUpdate, Inbox, InboxRow, InboxState, KnownHistory, LaneHead,
    LoggedMessage, MessageRow, NewMessage, NewOutboxRow, OpenedTurn, Outbox, OutboxRow, PendingApproval, QueueSummary, Queued, RouteEntry,
    Routes, SearchHit, SearchScope, SessionLog, SessionRow, StoreBackend, TurnContext, TurnOpening, Turns, Undone, UsageLedger,
    UsageTotals,
};
pub use sqlite::{SqliteLimits, SqliteStore, state_db};

use std::path::PathBuf;
use std::sync::Arc;

/// The gateway's handle to its store. A type alias rather than a newtype: trait-object method
/// calls need no import, `clone` stays a pointer copy, and it coerces to a narrower
/// `Arc<dyn Outbox>` (and the like) where a caller needs only one concern.
pub type Store = Arc<dyn StoreBackend>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the session store at {path}: {source}")]
    Open { path: PathBuf, source: rusqlite::Error },
    #[error("the session store at {path} was written by a newer hermes (schema {found}, this build knows {known}); upgrade hermes")]
    TooNew { path: PathBuf, found: i64, known: i64 },
    #[error("session store error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("stored data is unreadable: {0}")]
    Corrupt(String),
    #[error("the write was not committed: {0}")]
    NotCommitted(String),
    #[error("the session store is closed")]
    Closed,
}
