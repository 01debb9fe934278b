//! Following the shared inbox: with a store shared by replicas, events accepted by another
//! replica (webhook deliveries a load balancer sent there, a connection read there) land in the
//! inbox without passing this replica's router. Every replica rings on each one
//! (`store::Wakeups`, LISTEN / NOTIFY in PostgreSQL) and routes the rows of the platforms it
//! serves that it has not routed yet; so does taking a platform over (what its last holder left
//! unfinished is replayed here); a slow poll catches any wake-up that was lost (the listening
//! connection dropped, the store restarted).

use super::inbox::Inbox;
use crate::store::{Bell, Heard, Wakeups};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often the inbox is read even when nothing rang: the safety net, not the way in.
pub(crate) const POLL_EVERY: Duration = Duration::from_secs(5);

/// Route rows as they are announced by the store's bell, when `taken` says a platform was taken
/// over, and every `poll_every` in any case. A bell that cannot be had (the store refused the
/// listening connection) is asked for again at each poll; until then the poll alone routes.
pub(crate) fn spawn(inbox: Arc<Inbox>, wakeups: Arc<dyn Wakeups>, poll_every: Duration, mut taken: watch::Receiver<u64>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut poll = tokio::time::interval(poll_every);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut bell: Option<Bell> = None;
        loop {
            let Some(ringing) = &bell else {
                tokio::select! {
                    _ = poll.tick() => {}
                    _ = taken.changed() => {}
                }
                bell = listen(wakeups.as_ref()).await;
                route_new(&inbox).await;
                continue;
            };
            let look = tokio::select! {
                heard = ringing.heard() => news_in(&inbox, &heard),
                changed = taken.changed() => changed.is_ok(),
                _ = poll.tick() => true,
            };
            if look {
                route_new(&inbox).await;
            }
        }
    })
}

async fn listen(wakeups: &dyn Wakeups) -> Option<Bell> {
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

/// Whether what rang may hold an event this replica should route and has not: events of
/// platforms served elsewhere, and its own accepts (they ring too), need no read of the inbox.
fn news_in(inbox: &Inbox, heard: &Heard) -> bool {
    heard.maybe_missed
        || heard.accepted().any(|accepted| match accepted {
            Some((platform, event_id)) => inbox.follows(platform) && !inbox.has_routed(event_id),
            None => true,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::ops::lease::TenureClock;
    use crate::gateway::ops::lease::tenures::Tenures;
    use crate::store::SqliteStore;
    use hermes_adapter::{AcceptOutcome, ChatType, InboundEvent, InboundSink, Platform, SessionSource};
    use tokio::sync::mpsc;

    fn event(id: &str) -> InboundEvent {
        let mut source = SessionSource::new(Platform::new("webhook"), "c1", ChatType::Dm);
        source.user_id = Some("u1".into());
        InboundEvent::text(id, source, "deploy finished")
    }

    /// A replica's tenures, serving `platforms` (for as long as the test runs).
    async fn serving(platforms: &[&str]) -> Arc<Tenures> {
        let tenures = Arc::new(Tenures::default());
        tenures.share(Box::new(|_| Box::pin(async {})));
        for platform in platforms {
            let clock = TenureClock::new(tokio::time::Instant::now(), Duration::from_secs(3600), Default::default());
            tenures.take(platform, Arc::new(clock)).await;
        }
        tenures
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
        let inbox = Inbox::shared(store.clone(), tx, serving(&["webhook"]).await);

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
    async fn a_platform_served_elsewhere_is_stored_here_and_routed_once_it_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let store: crate::store::Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let tenures = serving(&["telegram"]).await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let inbox = Inbox::shared(store.clone(), tx, tenures.clone());
        assert_eq!(inbox.accept(event("e1")).await.unwrap(), AcceptOutcome::Accepted);
        assert_eq!(inbox.accept(event("e1")).await.unwrap(), AcceptOutcome::Duplicate);
        assert!(routed_now(&mut rx).is_empty() && !inbox.has_routed("e1"), "webhook is another replica's to route");
        assert!(store.inbox_get("e1").await.unwrap().is_some(), "stored for the replica serving it");
        assert_eq!(inbox.route_unfinished().await.unwrap(), 0, "nor does reading the inbox route it");

        // The holder died: this replica takes webhook over and replays what waits.
        let taken = tenures.taken();
        tenures
            .take("webhook", Arc::new(TenureClock::new(tokio::time::Instant::now(), Duration::from_secs(3600), Default::default())))
            .await;
        assert!(taken.has_changed().unwrap());
        assert_eq!(inbox.route_unfinished().await.unwrap(), 1);
        assert_eq!(routed_now(&mut rx), vec!["e1".to_string()]);
    }

    /// Reading the inbox forgets an id only when its platform was read: a platform whose tenure
    /// is late to be renewed is not read meanwhile, and its running turns must not be routed
    /// again once it is.
    #[tokio::test(start_paused = true)]
    async fn an_event_of_a_platform_not_read_now_stays_remembered_and_is_never_routed_twice() {
        let dir = tempfile::tempdir().unwrap();
        let store: crate::store::Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let tenures = Arc::new(Tenures::default());
        tenures.share(Box::new(|_| Box::pin(async {})));
        let clock = Arc::new(TenureClock::new(tokio::time::Instant::now(), Duration::from_secs(10), Default::default()));
        tenures.take("webhook", clock.clone()).await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let inbox = Inbox::shared(store.clone(), tx, tenures.clone());
        assert_eq!(inbox.accept(event("running")).await.unwrap(), AcceptOutcome::Accepted);
        assert_eq!(routed_now(&mut rx), vec!["running".to_string()]);

        // The renewal is late: webhook's rows are not read, and the running turn's id stays.
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(!tenures.serves("webhook"));
        assert_eq!(inbox.route_unfinished().await.unwrap(), 0);
        assert!(inbox.has_routed("running"), "remembered while its platform was not read");

        // Renewed: the row is still unfinished (the turn runs), and it is not routed again.
        clock.renewed(tokio::time::Instant::now());
        assert!(tenures.serves("webhook"));
        assert_eq!(inbox.route_unfinished().await.unwrap(), 0);
        assert!(routed_now(&mut rx).is_empty(), "routed once");
    }

    /// The drain of the inbox itself, for the hand-over below.
    struct InboxDrain(Arc<Inbox>);

    #[async_trait::async_trait]
    impl crate::gateway::ops::lease::tenures::Drain for InboxDrain {
        async fn turns_finished(&self, platform: &str, bound: Duration) -> bool {
            self.0.drained_of(platform, bound).await.unwrap()
        }

        async fn sends_settled(&self, _platform: &str, _bound: Duration) -> bool {
            true
        }
    }

    /// Handing a platform over to another replica: from the moment it starts, a new event is
    /// stored and not routed here (the next holder replays it), and the platform is given back
    /// only once the turn already routed here has finished; a turn running past the bound keeps
    /// it here, followed again, and what waited meanwhile is routed then, once.
    #[tokio::test]
    async fn a_platform_handed_over_routes_nothing_new_and_goes_once_its_turns_here_finish() {
        let dir = tempfile::tempdir().unwrap();
        let store: crate::store::Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let tenures = serving(&["webhook"]).await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let inbox = Arc::new(Inbox::shared(store.clone(), tx, tenures.clone()));
        tenures.drain_with(Arc::new(InboxDrain(inbox.clone())));
        assert_eq!(inbox.accept(event("running")).await.unwrap(), AcceptOutcome::Accepted);
        assert_eq!(routed_now(&mut rx), vec!["running".to_string()]);

        // The turn runs past the bound: not handed over, and what came meanwhile is routed after.
        let handing = tokio::spawn({
            let tenures = tenures.clone();
            async move { tenures.hand_over("webhook", Duration::from_millis(600)).await.is_some() }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!tenures.follows("webhook") && tenures.serves("webhook"), "being handed over: not followed, still served");
        assert_eq!(inbox.accept(event("meanwhile")).await.unwrap(), AcceptOutcome::Accepted);
        assert!(routed_now(&mut rx).is_empty() && !inbox.has_routed("meanwhile"), "stored for whoever holds it next");
        assert!(!handing.await.unwrap(), "the running turn keeps the platform here");
        assert!(tenures.follows("webhook"), "followed again");
        assert_eq!(inbox.route_unfinished().await.unwrap(), 1);
        assert_eq!(routed_now(&mut rx), vec!["meanwhile".to_string()], "routed once, now");

        // A hand-over dropped half way (the connection ended first) leaves it followed.
        let handing = tokio::spawn({
            let tenures = tenures.clone();
            async move { tenures.hand_over("webhook", Duration::from_secs(30)).await.is_some() }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!tenures.follows("webhook"));
        handing.abort();
        assert!(handing.await.is_err());
        assert!(tenures.follows("webhook"), "dropped half way: followed again");

        // Both turns finish while it is being handed over: given back, nothing routed twice.
        let handing = tokio::spawn({
            let tenures = tenures.clone();
            async move { tenures.hand_over("webhook", Duration::from_secs(30)).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!handing.is_finished(), "waits for the turns routed here");
        store.inbox_mark_done("running").await.unwrap();
        store.inbox_mark_done("meanwhile").await.unwrap();
        let unfollowed = tokio::time::timeout(Duration::from_secs(5), handing).await.unwrap().unwrap();
        assert!(unfollowed.is_some(), "handed over");
        assert!(!tenures.serves("webhook") && !inbox.has_routed("running"), "nothing of it is sent any more, its ids forgotten");
        // The lease is released, the platform given back.
        tenures.give_back("webhook");
        drop(unfollowed);
        assert!(!tenures.serves("webhook") && !tenures.follows("webhook"));
        assert_eq!(inbox.accept(event("after")).await.unwrap(), AcceptOutcome::Accepted);
        assert!(routed_now(&mut rx).is_empty(), "the next holder's to route");
    }

    /// A ring for a platform served elsewhere reads nothing; one for a platform served here reads
    /// the inbox unless the event was routed here already; one naming nothing always reads.
    #[tokio::test]
    async fn only_a_ring_for_a_platform_served_here_and_not_yet_routed_reads_the_inbox() {
        let dir = tempfile::tempdir().unwrap();
        let store: crate::store::Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let (tx, _rx) = mpsc::unbounded_channel();
        let inbox = Inbox::shared(store, tx, serving(&["webhook"]).await);
        assert_eq!(inbox.accept(event("mine")).await.unwrap(), AcceptOutcome::Accepted);
        let rang = |ids: &[&str]| Heard { ids: ids.iter().map(|id| id.to_string()).collect(), maybe_missed: false };
        assert!(!news_in(&inbox, &rang(&["telegram\tupdate-1", "discord\tmsg-2"])), "served elsewhere");
        assert!(!news_in(&inbox, &rang(&["webhook\tmine"])), "accepted and routed here");
        assert!(news_in(&inbox, &rang(&["telegram\tupdate-1", "webhook\ttheirs"])), "accepted by another replica");
        assert!(news_in(&inbox, &rang(&["unnamed"])), "a ring naming no platform");
        assert!(news_in(&inbox, &Heard { ids: vec![], maybe_missed: true }), "rings may have been missed");
    }

    /// With PostgreSQL: an accept by a replica that does not serve the platform reaches the
    /// serving replica's router by the wake-up alone (the poll is an hour away), once, and a
    /// redelivery to the other never reaches it.
    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_event_accepted_elsewhere_wakes_the_replica_serving_it_which_routes_it_once() {
        let url = crate::store::postgres_tests::scratch_url().await;
        let open = || async {
            let options = crate::store::PostgresOptions { url: url.clone(), pool_size: 4 };
            let store: crate::store::Store = Arc::new(crate::store::PostgresStore::connect(&options).await.unwrap());
            store
        };
        let (serving_store, other_store) = (open().await, open().await);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let serving_webhook = serving(&["webhook"]).await;
        let webhook_holder = Arc::new(Inbox::shared(serving_store.clone(), tx, serving_webhook.clone()));
        let follower = spawn(webhook_holder.clone(), serving_store.clone(), Duration::from_secs(3600), serving_webhook.taken());
        let (other_tx, mut other_rx) = mpsc::unbounded_channel();
        let other = Inbox::shared(other_store, other_tx, serving(&["telegram"]).await);

        for id in ["first", "second"] {
            let started = tokio::time::Instant::now();
            assert_eq!(other.accept(event(id)).await.unwrap(), AcceptOutcome::Accepted);
            let routed = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await.expect("woken, not left to the poll");
            assert_eq!(routed.map(|e| e.event_id).as_deref(), Some(id));
            println!("{id}: routed by the serving replica {:?} after the other accepted it", started.elapsed());
            assert_eq!(other.accept(event(id)).await.unwrap(), AcceptOutcome::Duplicate);
        }
        // The serving replica's own accept rings too, and still goes once.
        assert_eq!(webhook_holder.accept(event("third")).await.unwrap(), AcceptOutcome::Accepted);
        assert_eq!(rx.recv().await.map(|e| e.event_id).as_deref(), Some("third"));
        assert_eq!(other.accept(event("fourth")).await.unwrap(), AcceptOutcome::Accepted);
        assert_eq!(rx.recv().await.map(|e| e.event_id).as_deref(), Some("fourth"), "no repeat in between");
        assert!(routed_now(&mut other_rx).is_empty(), "the other replica routed none of it");
        follower.abort();
    }
}
