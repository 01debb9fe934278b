//! A turn's writes, fenced by this replica's tenures: the turns and inbox handles a gateway's
//! turns write through. A replica that was frozen (SIGSTOP, a suspended VM) or cut off wakes with
//! its tenure over; until it notices and exits, a turn it had running would still append the
//! answer to the shared history and close the event's inbox row, so the history would hold the
//! answer twice (the new holder replays the turn) or, worse, the row would read done before the
//! new holder replayed it, and the answer its courier refused to send would be lost. Here each
//! such write is refused with [`StoreError::LeaseLost`] once a tenure is lost, as the courier
//! refuses a send; the turn then ends without a word, and the row stays unfinished for the new
//! holder. A write meeting a renewal that is only late waits for it
//! ([`Tenures::intact_after_lapse`]). One machine (no tenure) is always intact: nothing changes
//! there.
//!
//! Reads and accepting events are left through: any replica may read, and accepting into the
//! shared inbox is what every replica does for the platforms it does not serve.

use super::tenures::Tenures;
use crate::store::{
    CallUsage, Inbox, InboxRow, InboxState, KnownHistory, NewMessage, OpenedTurn, Store, StoreError, TurnContext, TurnOpening, Turns,
};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// The store, with the writes of a turn allowed only while this replica's tenures are intact.
pub(crate) struct FencedWrites {
    store: Store,
    tenures: Arc<Tenures>,
}

impl FencedWrites {
    pub(crate) fn new(store: Store, tenures: Arc<Tenures>) -> Arc<FencedWrites> {
        Arc::new(FencedWrites { store, tenures })
    }

    /// Waits out a late renewal (see [`Tenures::intact_after_lapse`]): refused only once a
    /// tenure is lost, when the gateway stops too.
    async fn intact(&self) -> Result<(), StoreError> {
        if self.tenures.intact_after_lapse().await { Ok(()) } else { Err(StoreError::LeaseLost) }
    }
}

#[async_trait]
impl Turns for FencedWrites {
    async fn turn_open(&self, opening: TurnOpening, known: Option<KnownHistory>) -> Result<OpenedTurn, StoreError> {
        self.intact().await?;
        self.store.turn_open(opening, known).await
    }

    async fn turn_context(&self, session_id: &str, history_limit: usize) -> Result<TurnContext, StoreError> {
        self.store.turn_context(session_id, history_limit).await
    }

    async fn turn_record(&self, session_id: &str, messages: Vec<NewMessage>, calls: Vec<CallUsage>) -> Result<(), StoreError> {
        self.intact().await?;
        self.store.turn_record(session_id, messages, calls).await
    }
}

#[async_trait]
impl Inbox for FencedWrites {
    async fn inbox_accept(&self, event_id: &str, platform: &str, payload: &str) -> Result<bool, StoreError> {
        self.store.inbox_accept(event_id, platform, payload).await
    }

    async fn inbox_accept_all(&self, events: Vec<(String, String, String)>) -> Result<Vec<bool>, StoreError> {
        self.store.inbox_accept_all(events).await
    }

    async fn inbox_mark_processing(&self, event_id: &str) -> Result<(), StoreError> {
        self.intact().await?;
        self.store.inbox_mark_processing(event_id).await
    }

    /// Every mark (done, failed, parked) comes through here.
    async fn inbox_set_state(&self, event_id: &str, state: InboxState, error: Option<&str>) -> Result<(), StoreError> {
        self.intact().await?;
        self.store.inbox_set_state(event_id, state, error).await
    }

    async fn inbox_poisoned(&self, limit: usize) -> Result<Vec<InboxRow>, StoreError> {
        self.store.inbox_poisoned(limit).await
    }

    async fn inbox_unfinished(&self) -> Result<Vec<InboxRow>, StoreError> {
        self.store.inbox_unfinished().await
    }

    async fn inbox_unfinished_of(&self, platforms: &[String]) -> Result<Vec<InboxRow>, StoreError> {
        self.store.inbox_unfinished_of(platforms).await
    }

    async fn inbox_get(&self, event_id: &str) -> Result<Option<InboxRow>, StoreError> {
        self.store.inbox_get(event_id).await
    }

    async fn inbox_prune(&self, keep: Duration) -> Result<usize, StoreError> {
        self.store.inbox_prune(keep).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::ops::lease::TenureClock;
    use crate::store::SqliteStore;
    use crate::store::suite::{message, source};
    use tokio::time::Instant;
    use tokio_util::sync::CancellationToken;

    /// Tenures holding telegram until the returned token is cancelled.
    async fn holding_telegram() -> (Arc<Tenures>, CancellationToken) {
        let tenures = Arc::new(Tenures::default());
        tenures.share(Box::new(|_| Box::pin(async {})));
        let lost = CancellationToken::new();
        tenures.take("telegram", Arc::new(TenureClock::new(Instant::now(), Duration::from_secs(600), lost.clone()))).await;
        (tenures, lost)
    }

    #[tokio::test]
    async fn a_replica_past_its_tenure_neither_appends_history_nor_closes_the_event() {
        let dir = tempfile::tempdir().unwrap();
        let store: Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let (tenures, lost) = holding_telegram().await;
        let writes = FencedWrites::new(store.clone(), tenures);
        assert!(writes.inbox_accept("ev-1", "telegram", "{}").await.unwrap());
        writes.inbox_mark_processing("ev-1").await.unwrap();
        let route = store.route_get_or_create("api_server:dm:u1", &source("u1"), "m").await.unwrap();
        let answer = |text: &str| message(&route.session_id, "assistant", text);
        writes.turn_record(&route.session_id, vec![answer("first")], Vec::new()).await.unwrap();

        lost.cancel();
        let refused = writes.turn_record(&route.session_id, vec![answer("again")], Vec::new()).await;
        assert!(matches!(refused, Err(StoreError::LeaseLost)), "{refused:?}");
        assert!(matches!(writes.inbox_mark_done("ev-1").await, Err(StoreError::LeaseLost)));
        assert!(matches!(writes.inbox_mark_poisoned("ev-1", "crashed").await, Err(StoreError::LeaseLost)));

        let history = store.turn_context(&route.session_id, 50).await.unwrap().history;
        assert_eq!(history.iter().filter(|m| m.content == "again").count(), 0, "nothing appended past the tenure");
        let row = store.inbox_get("ev-1").await.unwrap().unwrap();
        assert_eq!(row.state, InboxState::Processing, "left unfinished for the new holder to replay");
        assert!(writes.inbox_accept("ev-2", "telegram", "{}").await.unwrap(), "accepting stays open to every replica");
    }
}
