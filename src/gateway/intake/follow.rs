//! Following the shared inbox: with a store shared by replicas, events accepted by a standby
//! (webhook deliveries a load balancer sent there) land in the inbox without passing this
//! replica's router. The replica that leads rings on each one (`store::InboxWakeups`, LISTEN /
//! NOTIFY in PostgreSQL) and routes the rows it has not routed yet; a slow poll catches any
//! wake-up that was lost (the listening connection dropped, the store restarted).

use super::inbox::Inbox;
use crate::store::{Heard, InboxBell, InboxWakeups};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How often the inbox is read even when nothing rang: the safety net, not the way in.
pub(crate) const POLL_EVERY: Duration = Duration::from_secs(5);

/// Route rows as they are announced by the store's bell, and every `poll_every` in any case.
/// A bell that cannot be had (the store refused the listening connection) is asked for again at
/// each poll; until then the poll alone routes.
pub(crate) fn spawn(inbox: Arc<Inbox>, wakeups: Arc<dyn InboxWakeups>, poll_every: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut poll = tokio::time::interval(poll_every);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut bell: Option<InboxBell> = None;
        loop {
            let Some(ringing) = &bell else {
                poll.tick().await;
                bell = listen(wakeups.as_ref()).await;
                route_new(&inbox).await;
                continue;
            };
            let look = tokio::select! {
                heard = ringing.heard() => news_in(&inbox, &heard),
                _ = poll.tick() => true,
            };
            if look {
                route_new(&inbox).await;
            }
        }
    })
}

async fn listen(wakeups: &dyn InboxWakeups) -> Option<InboxBell> {
    match wakeups.inbox_listen().await {
        Ok(bell) => Some(bell),
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for events other replicas accept; reading the inbox every {}s instead", POLL_EVERY.as_secs());
            None
        }
    }
}

async fn route_new(inbox: &Inbox) {
    match inbox.route_unfinished().await {
        Ok(0) => {}
        Ok(routed) => tracing::debug!(count = routed, "routing events accepted by other replicas"),
        Err(e) => tracing::warn!(error = %e, "cannot read the shared inbox; trying again at the next wake-up or poll"),
    }
}

/// Whether what rang may hold an event this replica has not routed: its own accepts ring too,
/// and need no read of the inbox.
fn news_in(inbox: &Inbox, heard: &Heard) -> bool {
    heard.maybe_missed || heard.event_ids.iter().any(|id| !inbox.has_routed(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;
    use hermes_adapter::{AcceptOutcome, ChatType, InboundEvent, InboundSink, Platform, SessionSource};
    use tokio::sync::mpsc;

    fn event(id: &str) -> InboundEvent {
        let mut source = SessionSource::new(Platform::new("webhook"), "c1", ChatType::Dm);
        source.user_id = Some("u1".into());
        InboundEvent::text(id, source, "deploy finished")
    }

    fn routed_now(rx: &mut mpsc::UnboundedReceiver<InboundEvent>) -> Vec<String> {
        std::iter::from_fn(|| rx.try_recv().ok()).map(|e| e.event_id).collect()
    }

    /// Alone on its store, a gateway remembers no routed id: nothing would ever forget them, and
    /// months of messages would pile up in memory.
    #[tokio::test]
    async fn a_gateway_alone_on_its_store_keeps_no_routed_ids() {
        let dir = tempfile::tempdir().unwrap();
        let store: crate::store::Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let (tx, mut rx) = mpsc::unbounded_channel();
        let inbox = Inbox::new(store, tx);
        for i in 0..50 {
            assert_eq!(inbox.accept(event(&format!("e{i}"))).await.unwrap(), AcceptOutcome::Accepted);
        }
        assert_eq!(routed_now(&mut rx).len(), 50, "every event routed");
        assert!((0..50).all(|i| !inbox.has_routed(&format!("e{i}"))), "and none remembered");
    }

    #[tokio::test]
    async fn every_event_is_routed_once_whether_accepted_here_or_found_in_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store: crate::store::Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let (tx, mut rx) = mpsc::unbounded_channel();
        let inbox = Inbox::following(store.clone(), tx);

        assert_eq!(inbox.accept(event("here")).await.unwrap(), AcceptOutcome::Accepted);
        // Another replica's accept: only the store knows it.
        let payload = serde_json::to_string(&event("there")).unwrap();
        assert!(store.inbox_accept("there", "webhook", &payload).await.unwrap());
        assert_eq!(inbox.route_unfinished().await.unwrap(), 1, "only the row accepted elsewhere is new");
        assert_eq!(routed_now(&mut rx), vec!["here".to_string(), "there".to_string()]);
        assert_eq!(inbox.route_unfinished().await.unwrap(), 0, "read again, nothing goes twice");
        assert!(routed_now(&mut rx).is_empty());

        // A finished row is forgotten; an unfinished one stays remembered.
        store.inbox_mark_done("here").await.unwrap();
        assert_eq!(inbox.route_unfinished().await.unwrap(), 0);
        assert!(!inbox.has_routed("here") && inbox.has_routed("there"));
        assert!(routed_now(&mut rx).is_empty());
    }

    #[tokio::test]
    async fn a_standby_inbox_stores_and_routes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store: crate::store::Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let standby = Inbox::storing_only(store.clone());
        assert_eq!(standby.accept(event("e1")).await.unwrap(), AcceptOutcome::Accepted);
        assert_eq!(standby.accept(event("e1")).await.unwrap(), AcceptOutcome::Duplicate);
        assert!(!standby.has_routed("e1"));
        assert!(store.inbox_get("e1").await.unwrap().is_some(), "stored for the leader");
    }

    /// With PostgreSQL: a standby's accept reaches the leader's router by the wake-up alone (the
    /// poll is an hour away), once, and a redelivery to the standby never reaches it.
    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_event_accepted_on_a_standby_wakes_the_leader_which_routes_it_once() {
        let url = crate::store::postgres_tests::scratch_url().await;
        let open = || async {
            let options = crate::store::PostgresOptions { url: url.clone(), pool_size: 4 };
            let store: crate::store::Store = Arc::new(crate::store::PostgresStore::connect(&options).await.unwrap());
            store
        };
        let (leader_store, standby_store) = (open().await, open().await);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let leader = Arc::new(Inbox::following(leader_store.clone(), tx));
        let follower = spawn(leader.clone(), leader_store.clone(), Duration::from_secs(3600));
        let standby = Inbox::storing_only(standby_store);

        for id in ["first", "second"] {
            let started = tokio::time::Instant::now();
            assert_eq!(standby.accept(event(id)).await.unwrap(), AcceptOutcome::Accepted);
            let routed = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await.expect("woken, not left to the poll");
            assert_eq!(routed.map(|e| e.event_id).as_deref(), Some(id));
            println!("{id}: routed by the leader {:?} after the standby accepted it", started.elapsed());
            assert_eq!(standby.accept(event(id)).await.unwrap(), AcceptOutcome::Duplicate);
        }
        // The leader's own accept rings too, and still goes once.
        assert_eq!(leader.accept(event("third")).await.unwrap(), AcceptOutcome::Accepted);
        assert_eq!(rx.recv().await.map(|e| e.event_id).as_deref(), Some("third"));
        assert_eq!(standby.accept(event("fourth")).await.unwrap(), AcceptOutcome::Accepted);
        assert_eq!(rx.recv().await.map(|e| e.event_id).as_deref(), Some("fourth"), "no repeat in between");
        follower.abort();
    }
}
