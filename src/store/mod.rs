//! The store at `HERMES_HOME/state.db`: sessions, messages (with search), routing, the inbound
//! inbox, the outbound outbox, usage and claims. The operations are traits in `backend`
//! (grouped by concern); `sqlite` is the implementation and the only code that speaks SQL;
//! `suite` is the behaviour every backend must show, run against each of them.
//!
//! The gateway holds a [`Store`]: any backend behind an `Arc`, so call sites read
//! `store.route_get(..)` whatever the backend, and a clone is a pointer copy.

mod backend;
mod clock;
pub mod folders;
#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;

#[cfg(test)]
pub(crate) mod suite;
/// Scratch schemas on the test PostgreSQL, for tests outside the store.
#[cfg(all(test, feature = "postgres"))]
pub(crate) use postgres::tests as postgres_tests;

pub use backend::{
    Approvals, AttemptEnd, Bell, CallUsage, Claims, Conversation, DeadLetter, Heard, HistoryUpdate, Inbox, InboxRow, InboxState,
    KnownHistory, LaneHead, Lease, Leases, LoggedMessage, MessageRow, NewMessage, NewOutboxRow, OpenedTurn, Outbox, OutboxRow,
    PendingApproval, QueueSummary, Queued, RouteEntry, Routes, SearchHit, SearchScope, SessionLog, SessionRow, StoreBackend, TurnContext,
    TurnOpening, Turns, Undone, UsageLedger, UsageTotals, Wakeups,
};
#[cfg(feature = "postgres")]
pub use postgres::{CopiedTable, PostgresOptions, PostgresStore, copy_sqlite_into};
pub use sqlite::{SqliteLimits, SqliteStore, state_db};

use std::path::PathBuf;
use std::sync::Arc;

/// Where the store is: which backend, and its place.
#[derive(Debug, Clone)]
pub enum StoreLocation {
    /// A SQLite file on this machine (see [`state_db`]).
    Sqlite { path: PathBuf, limits: SqliteLimits },
    /// A PostgreSQL database shared by every replica.
    #[cfg(feature = "postgres")]
    Postgres(PostgresOptions),
}

impl StoreLocation {
    /// Open (creating or migrating when needed) the store here.
    pub async fn open(&self) -> Result<Store, StoreError> {
        Ok(match self {
            StoreLocation::Sqlite { path, limits } => Arc::new(SqliteStore::open_with(path, *limits).await?),
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(options) => Arc::new(PostgresStore::connect(options).await?),
        })
    }

    /// Where it is, for people: the file, or `user@host:port/database` (never a password).
    pub fn describe(&self) -> String {
        match self {
            StoreLocation::Sqlite { path, .. } => path.display().to_string(),
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(options) => postgres::describe_url(&options.url),
        }
    }
}

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
    /// A replica that lost a platform's tenure writes nothing a turn produced: the platform's
    /// new holder replays the turn.
    #[error("this replica lost a platform's lease; the write is left to the replica that holds it")]
    LeaseLost,
    #[cfg(feature = "postgres")]
    #[error("PostgreSQL store error: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    #[error("the PostgreSQL URL is invalid: {0} (expected postgres://USER:PASSWORD@HOST:PORT/DATABASE)")]
    BadDatabaseUrl(String),
    #[error("cannot reach the PostgreSQL store at {database}: {reason}")]
    Unreachable { database: String, reason: String },
    #[error(
        "the PostgreSQL store already has a different {table} row ({row}): a gateway has written to it since the last copy, and copying again would mix two histories; nothing was copied. Copy into an empty database, or keep the PostgreSQL store as it is"
    )]
    CopyConflict { table: &'static str, row: String },
    #[error("the PostgreSQL store at {database} was written by a newer hermes (schema {found}, this build knows {known}); upgrade hermes")]
    TooNewDatabase { database: String, found: i64, known: i64 },
}
