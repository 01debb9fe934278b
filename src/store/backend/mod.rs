//! What the gateway asks of its store, as traits grouped by concern, and the data they carry.
//! Nothing here knows how rows are kept: a backend (SQLite today, see `store::sqlite`)
//! implements every concern trait and with that [`StoreBackend`]; the shared suite in
//! `store::suite` holds each backend to the same behaviour.
//!
//! A caller that needs one concern can hold just that (`Arc<dyn Outbox>`): an
//! `Arc<dyn StoreBackend>` coerces to any of them.

mod approvals;
mod claims;
mod inbox;
mod leases;
mod outbox;
mod routes;
mod session_log;
mod turns;
mod usage;
mod wakeups;

use crate::store::folders::SharedFolders;
pub use approvals::{Approvals, PendingApproval};
pub use claims::Claims;
pub use inbox::{Inbox, InboxRow, InboxState};
pub use leases::{Lease, Leases};
pub use outbox::{AttemptEnd, DeadLetter, LaneHead, NewOutboxRow, Outbox, OutboxRow, QueueSummary, Queued};
pub use routes::{Conversation, RouteEntry, Routes, SessionRow};
pub use session_log::{LoggedMessage, MessageRow, NewMessage, SearchHit, SearchScope, SessionLog, Undone};
pub use turns::{HistoryUpdate, KnownHistory, OpenedTurn, TurnContext, TurnOpening, Turns};
pub use usage::{CallUsage, UsageLedger, UsageTotals};
#[cfg(feature = "postgres")]
pub(in crate::store) use wakeups::{ACCEPTED_SEPARATOR, Ringer};
pub use wakeups::{Bell, Heard, Wakeups};

/// Every concern at once: what the gateway holds. Implemented for anything that implements
/// all of them, so a backend never implements it by hand.
pub trait StoreBackend:
    SessionLog + Routes + Inbox + Outbox + UsageLedger + Turns + Claims + Leases + Approvals + Wakeups + SharedFolders + Send + Sync
{
}

impl<T> StoreBackend for T where
    T: SessionLog
        + Routes
        + Inbox
        + Outbox
        + UsageLedger
        + Turns
        + Claims
        + Leases
        + Approvals
        + Wakeups
        + SharedFolders
        + Send
        + Sync
        + ?Sized
{
}
