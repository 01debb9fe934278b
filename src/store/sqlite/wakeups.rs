//! Inbox wake-ups in SQLite: the file belongs to one gateway process, which routes what it
//! accepts itself, so nothing else can accept an event behind its back: the bell never rings.

use super::SqliteStore;
use crate::store::{InboxBell, InboxWakeups, StoreError};
use async_trait::async_trait;

#[async_trait]
impl InboxWakeups for SqliteStore {
    async fn inbox_listen(&self) -> Result<InboxBell, StoreError> {
        // The ringer is dropped at once: nobody will ever ring.
        let (bell, _ringer) = InboxBell::pair();
        Ok(bell)
    }
}
