//! A turn's writes, fenced by the lead: the turns and inbox handles a gateway's turns write
//! through. A replica that was frozen (SIGSTOP, a suspended VM) or cut off wakes with its tenure
//! over; until it notices and exits, a turn it had running would still append the answer to the
//! shared history and close the event's inbox row, so the history would hold the answer twice
//! (the new leader replays the turn) or, worse, the row would read done before the new leader
//! replayed it, and the answer its courier refused to send would be lost. Here each such write
//! is refused with [`StoreError::NotLeading`] once [`HealthBoard::leads`] says no, as the courier
//! refuses a send; the turn's other steps then fail as a store error would, and the row stays
//! unfinished for the leader. One machine (no tenure) always leads: nothing changes there.
//!
//! Reads and accepting events are left through: any replica may read, and accepting into the
//! shared inbox is what standbys do.

use crate::gateway::ops::health::HealthBoard;
use crate::store::{
    CallUsage, Inbox, InboxRow, InboxState, KnownHistory, NewMessage, OpenedTurn, Store, StoreError, TurnContext, TurnOpening, Turns,
};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// The store, with the writes of a turn allowed only while this replica leads.
pub(crate) struct LeaderWrites {
    store: Store,
    board: Arc<HealthBoard>,
}

impl LeaderWrites {
    pub(crate) fn new(store: Store, board: Arc<HealthBoard>) -> Arc<LeaderWrites> {
        Arc::new(LeaderWrites { store, board })
    }

    fn leads(&self) -> Result<(), StoreError> {
        if self.board.leads() { Ok(()) } else { Err(StoreError::NotLeading) }
    }
}

#[async_trait]
impl Turns for LeaderWrites {
    async fn turn_open(&self, opening: TurnOpening, known: Option<KnownHistory>) -> Result<OpenedTurn, StoreError> {
        self.leads()?;
        self.store.turn_open(opening, known).await
    }

    async fn turn_context(&self, session_id: &str, history_limit: usize) -> Result<TurnContext, StoreError> {
        self.store.turn_context(session_id, history_limit).await
    }

    async fn turn_record(&self, session_id: &str, messages: Vec<NewMessage>, calls: Vec<CallUsage>) -> Result<(), StoreError> {
        self.leads()?;
        self.store.turn_record(session_id, messages, calls).await
    }
}

#[async_trait]
impl Inbox for LeaderWrites {
    async fn inbox_accept(&self, event_id: &str, platform: &str, payload: &str) -> Result<bool, StoreError> {
        self.store.inbox_accept(event_id, platform, payload).await
    }

    async fn inbox_accept_all(&self, events: Vec<(String, String, String)>) -> Result<Vec<bool>, StoreError> {
        self.store.inbox_accept_all(events).await
    }

    async fn inbox_mark_processing(&self, event_id: &str) -> Result<(), StoreError> {
        self.leads()?;
        self.store.inbox_mark_processing(event_id).await
    }

    /// Every mark (done, failed, parked) comes through here.
    async fn inbox_set_state(&self, event_id: &str, state: InboxState, error: Option<&str>) -> Result<(), StoreError> {
        self.leads()?;
        self.store.inbox_set_state(event_id, state, error).await
    }

    async fn inbox_poisoned(&self, limit: usize) -> Result<Vec<InboxRow>, StoreError> {
        self.store.inbox_poisoned(limit).await
    }

    async fn inbox_unfinished(&self) -> Result<Vec<InboxRow>, StoreError> {
        self.store.inbox_unfinished().await
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

    /// A board whose tenure ends when the returned token is cancelled.
    fn leading_board() -> (Arc<HealthBoard>, CancellationToken) {
        let board = Arc::new(HealthBoard::new());
        let lost = CancellationToken::new();
        board.lead_under(Arc::new(TenureClock::new(Instant::now(), Duration::from_secs(600), lost.clone())));
        (board, lost)
    }

    #[tokio::test]
    async fn a_replica_past_its_tenure_neither_appends_history_nor_closes_the_event() {
        let dir = tempfile::tempdir().unwrap();
        let store: Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let (board, lost) = leading_board();
        let writes = LeaderWrites::new(store.clone(), board);
        assert!(writes.inbox_accept("ev-1", "telegram", "{}").await.unwrap());
        writes.inbox_mark_processing("ev-1").await.unwrap();
        let route = store.route_get_or_create("api_server:dm:u1", &source("u1"), "m").await.unwrap();
        let answer = |text: &str| message(&route.session_id, "assistant", text);
        writes.turn_record(&route.session_id, vec![answer("first")], Vec::new()).await.unwrap();

        lost.cancel();
        let refused = writes.turn_record(&route.session_id, vec![answer("again")], Vec::new()).await;
        assert!(matches!(refused, Err(StoreError::NotLeading)), "{refused:?}");
        assert!(matches!(writes.inbox_mark_done("ev-1").await, Err(StoreError::NotLeading)));
        assert!(matches!(writes.inbox_mark_poisoned("ev-1", "crashed").await, Err(StoreError::NotLeading)));

        let history = store.turn_context(&route.session_id, 50).await.unwrap().history;
        assert_eq!(history.iter().filter(|m| m.content == "again").count(), 0, "nothing appended past the tenure");
        let row = store.inbox_get("ev-1").await.unwrap().unwrap();
        assert_eq!(row.state, InboxState::Processing, "left unfinished for the leader to replay");
        assert!(writes.inbox_accept("ev-2", "telegram", "{}").await.unwrap(), "accepting stays open to every replica");
    }
}
