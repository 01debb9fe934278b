//! Wake-ups in SQLite: the file belongs to one gateway process, which routes what it accepts and
//! sends what it queues itself, so nothing else can add a row behind its back: the bells never
//! ring.

use super::SqliteStore;
use crate::store::{Bell, StoreError, Wakeups};
use async_trait::async_trait;

#[async_trait]
impl Wakeups for SqliteStore {
    async fn inbox_listen(&self) -> Result<Bell, StoreError> {
        Ok(silent())
    }

    async fn outbox_listen(&self) -> Result<Bell, StoreError> {
        Ok(silent())
    }
}

/// A bell whose ringer is dropped at once: nobody will ever ring it.
fn silent() -> Bell {
    let (bell, _ringer) = Bell::pair();
    bell
}
