//! The courier against a scripted adapter: what each failure kind does to a part, the order of a
//! chat's parts, lanes that do not wait for each other, what a restart leaves behind, the end of
//! the window and the notice, and the late note. (Each adapter's own wire is tested against its
//! fake or real peer in `tests/conformance`.)

use super::*;
use crate::store::{SqliteStore, Store};
use hermes_adapter::{AdapterContext, AdapterError, Capabilities, ChatTarget, Platform, SendReceipt};
use std::collections::VecDeque;

/// Long enough for every scripted retry in these tests.
const WAIT: Duration = Duration::from_secs(30);

/// A chat platform whose sends fail as scripted, per chat, and record what arrived.
struct Scripted {
    platform: Platform,
    caps: Capabilities,
    /// Per chat: the errors the next sends get (then success).
    script: Mutex<HashMap<String, VecDeque<SendError>>>,
    /// What the platform holds: (chat, text), in arrival order.
    arrived: Mutex<Vec<(String, String)>>,
    lookup: Mutex<Lookup>,
    /// Set for a platform that answers on the request: the requests waiting here.
    waiting: Mutex<Option<std::collections::HashSet<String>>>,
    /// Every send waits while a test holds this for writing (a send in flight).
    gate: tokio::sync::RwLock<()>,
}

impl Scripted {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            platform: Platform::new("chat"),
            caps: Capabilities { supports_async_delivery: true, ..Capabilities::http() },
            script: Mutex::default(),
            arrived: Mutex::default(),
            lookup: Mutex::new(Lookup::CannotTell),
            waiting: Mutex::new(None),
            gate: tokio::sync::RwLock::new(()),
        })
    }

    fn fail(&self, chat: &str, errors: impl IntoIterator<Item = SendError>) {
        self.script.lock().unwrap().entry(chat.to_string()).or_default().extend(errors);
    }

    fn arrived(&self, chat: &str) -> Vec<String> {
        self.arrived.lock().unwrap().iter().filter(|(c, _)| c == chat).map(|(_, t)| t.clone()).collect()
    }
}

#[async_trait::async_trait]
impl PlatformAdapter for Scripted {
    fn platform(&self) -> &Platform {
        &self.platform
    }
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    async fn run(&self, _ctx: AdapterContext) -> Result<(), AdapterError> {
        Ok(())
    }
    async fn send(&self, msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        let _in_flight = self.gate.read().await;
        let scripted = self.script.lock().unwrap().get_mut(&msg.target.chat_id).and_then(|q| q.pop_front());
        if let Some(error) = scripted {
            return Err(error);
        }
        let mut arrived = self.arrived.lock().unwrap();
        arrived.push((msg.target.chat_id.clone(), msg.text.clone()));
        Ok(SendReceipt { message_id: Some(format!("m{}", arrived.len())) })
    }
    async fn find_sent(&self, _msg: &OutboundMessage, _since: Duration) -> Result<Lookup, SendError> {
        Ok(self.lookup.lock().unwrap().clone())
    }
    fn answers_on_the_request(&self) -> Option<Duration> {
        self.waiting.lock().unwrap().as_ref().map(|_| Duration::from_secs(300))
    }
    fn delivers_here(&self, message: &OutboundMessage) -> bool {
        let waiting = self.waiting.lock().unwrap();
        waiting.as_ref().is_none_or(|waiting| message.reply_to.as_ref().is_some_and(|r| waiting.contains(r)))
    }
}

struct Rig {
    _dir: tempfile::TempDir,
    store: Store,
    chat: Arc<Scripted>,
    courier: Arc<Courier>,
}

/// A courier for `chat` over `store`, sending as `board` says this replica may.
fn courier_for(chat: &Arc<Scripted>, store: &Store, board: Option<Arc<crate::gateway::ops::health::HealthBoard>>) -> Arc<Courier> {
    let adapters: HashMap<String, Arc<dyn PlatformAdapter>> =
        HashMap::from([("chat".to_string(), chat.clone() as Arc<dyn PlatformAdapter>)]);
    Arc::new(Courier::new(adapters, store.clone(), board, RetryPolicy::default()))
}

async fn rig(policy: RetryPolicy) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let store: Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
    let chat = Scripted::new();
    let adapters: HashMap<String, Arc<dyn PlatformAdapter>> =
        HashMap::from([("chat".to_string(), chat.clone() as Arc<dyn PlatformAdapter>)]);
    let courier = Arc::new(Courier::new(adapters, store.clone(), None, policy));
    Rig { _dir: dir, store, chat, courier }
}

fn row(chat: &str, key: &str, text: &str, lead: bool) -> NewOutboxRow {
    let target = ChatTarget { platform: Platform::new("chat"), chat_id: chat.into(), thread_id: None };
    let message = OutboundMessage {
        target: target.clone(),
        text: text.into(),
        reply_to: None,
        idempotency_key: key.into(),
        is_final: false,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file: None,
    };
    NewOutboxRow {
        key: key.into(),
        lane: lane_of("chat", chat),
        platform: "chat".into(),
        target: serde_json::to_string(&target).unwrap(),
        body: text.into(),
        message: serde_json::to_string(&message).unwrap(),
        deadline_ms: now_ms() + 3_600_000,
        notify_on_death: lead,
        lead,
    }
}

/// Wait until `key` is in `state` in the outbox.
async fn settled(store: &Store, key: &str, state: &str) -> bool {
    for _ in 0..200 {
        if store.outbox_get(key).await.unwrap().is_some_and(|r| r.state == state) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check()
}

#[tokio::test]
async fn a_transient_failure_is_retried_until_the_part_is_delivered_once() {
    let rig = rig(RetryPolicy::default()).await;
    rig.chat.fail("c1", [SendError::Transient("502".into()), SendError::RateLimited { retry_after: Duration::from_millis(200) }]);
    let outcomes = rig.courier.dispatch(vec![row("c1", "t1:0", "hello", true)], WAIT).await;
    assert!(matches!(outcomes[0], Outcome::Delivered { .. }), "{outcomes:?}");
    assert_eq!(rig.chat.arrived("c1"), ["hello"]);
    let stored = rig.store.outbox_get("t1:0").await.unwrap().unwrap();
    assert_eq!((stored.state.as_str(), stored.attempts), ("sent", 3), "each attempt is recorded");
    // Queued again (a replayed turn): already sent, not sent twice.
    let again = rig.courier.dispatch(vec![row("c1", "t1:0", "hello", true)], WAIT).await;
    assert!(matches!(again[0], Outcome::Delivered { .. }));
    assert_eq!(rig.chat.arrived("c1").len(), 1);
}

#[tokio::test]
async fn a_replica_whose_tenure_lapsed_sends_nothing_and_leaves_the_part_to_the_new_holder() {
    use crate::gateway::ops::health::HealthBoard;
    use crate::gateway::ops::lease::TenureClock;
    let dir = tempfile::tempdir().unwrap();
    let store: Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
    let chat = Scripted::new();
    let board = Arc::new(HealthBoard::new());
    // Renewed, then frozen past its bound (a SIGSTOP): the tenure is over on the local clock,
    // before any renewal could say so.
    let renewed = tokio::time::Instant::now();
    board.tenures().share(Box::new(|_| Box::pin(async {})));
    let clock = TenureClock::new(renewed, Duration::from_millis(100), tokio_util::sync::CancellationToken::new());
    board.tenures().take(chat.platform().as_str(), Arc::new(clock)).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let courier = courier_for(&chat, &store, Some(board));
    let outcomes = courier.dispatch(vec![row("c1", "t1:0", "hello", true)], Duration::from_millis(500)).await;
    assert!(matches!(outcomes[0], Outcome::Queued), "{outcomes:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(chat.arrived("c1").is_empty(), "nothing is sent by a replica that no longer serves the platform");
    let stored = store.outbox_get("t1:0").await.unwrap().unwrap();
    assert_eq!((stored.state.as_str(), stored.attempts), ("pending", 0), "the part waits, untouched, for the new holder");
}

/// A platform handed over to another replica waits for the send in flight here: released
/// before its end is recorded, the next holder would read it as cut off and resend it marked.
#[tokio::test]
async fn a_send_in_flight_is_waited_for_before_its_platform_is_handed_over() {
    let rig = rig(RetryPolicy::default()).await;
    let in_flight = rig.chat.gate.write().await;
    let outcomes = rig.courier.dispatch(vec![row("c1", "t1:0", "hello", true)], Duration::from_millis(200)).await;
    assert!(matches!(outcomes[0], Outcome::Queued), "{outcomes:?}");
    assert!(!rig.courier.settled("chat", Duration::from_millis(200)).await, "a send of it is in flight");
    assert!(rig.courier.settled("other", Duration::ZERO).await, "another platform's sends are not waited for");
    drop(in_flight);
    assert!(rig.courier.settled("chat", WAIT).await, "settled once its end is recorded");
    let stored = rig.store.outbox_get("t1:0").await.unwrap().unwrap();
    assert_eq!((stored.state.as_str(), rig.chat.arrived("c1").len()), ("sent", 1), "recorded as sent, once");
}

#[tokio::test]
async fn a_chat_keeps_its_order_and_a_blocked_chat_holds_up_nobody() {
    let rig = rig(RetryPolicy::default()).await;
    // c1's first part fails twice; its second part must wait behind it.
    rig.chat.fail("c1", [SendError::Transient("502".into()), SendError::Transient("502".into())]);
    rig.chat.fail("blocked", [SendError::Forbidden("bot was blocked by the user".into())]);
    let courier = rig.courier.clone();
    let first =
        tokio::spawn(async move { courier.dispatch(vec![row("c1", "a:0", "first", true), row("c1", "a:1", "second", false)], WAIT).await });
    let blocked = rig.courier.dispatch(vec![row("blocked", "b:0", "to a blocked chat", true)], WAIT).await;
    assert!(matches!(&blocked[0], Outcome::GivenUp { reason } if reason.contains("blocked")), "{blocked:?}");
    let other = rig.courier.dispatch(vec![row("c2", "c:0", "other chat", true)], WAIT).await;
    assert!(matches!(other[0], Outcome::Delivered { .. }));
    assert!(rig.chat.arrived("c1").is_empty(), "c2 did not wait for c1's retries");
    let first = first.await.unwrap();
    assert!(first.iter().all(|o| matches!(o, Outcome::Delivered { .. })), "{first:?}");
    assert_eq!(rig.chat.arrived("c1"), ["first", "second"], "in the order they were answered");

    // The blocked chat's part is a dead letter with its reason; resent by hand once unblocked.
    let dead = rig.store.outbox_dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert!(dead[0].reason.contains("bot was blocked"), "{dead:?}");
    let lane = rig.store.outbox_requeue(dead[0].id, now_ms() + 60_000).await.unwrap().unwrap();
    rig.courier.wake(&lane);
    assert!(eventually(|| rig.chat.arrived("blocked") == ["to a blocked chat"]).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(rig.chat.arrived("blocked").len(), 1, "delivered once");
}

#[tokio::test]
async fn a_send_cut_off_by_a_restart_is_resent_once_marked_and_a_second_cut_off_is_not_resent() {
    let rig = rig(RetryPolicy::default()).await;
    // What a kill -9 between request and answer leaves: the part `sending`.
    rig.store.outbox_enqueue(vec![row("c1", "k:0", "the answer", true)]).await.unwrap();
    rig.store.outbox_begin_attempt("k:0", false).await.unwrap();
    rig.store.outbox_enqueue(vec![row("c1", "k:1", "the rest", false)]).await.unwrap();
    let sweeper =
        tokio::spawn(crate::gateway::delivery::sweeper::run(rig.courier.clone(), None, crate::gateway::delivery::sweeper::SWEEP_EVERY));
    assert!(eventually(|| rig.chat.arrived("c1").len() == 2).await, "{:?}", rig.chat.arrived("c1"));
    assert_eq!(rig.chat.arrived("c1"), [format!("{RESEND_MARK}the answer"), "the rest".to_string()], "marked once, the rest plain");

    // Cut off again after the marked resend: a third copy is never risked.
    rig.store.outbox_enqueue(vec![row("c1", "j:0", "twice cut", true)]).await.unwrap();
    rig.store.outbox_begin_attempt("j:0", true).await.unwrap();
    rig.courier.wake(&lane_of("chat", "c1"));
    assert!(settled(&rig.store, "j:0", "dead").await);
    let letters = rig.store.outbox_dead_letters(10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert!(letters[0].reason.contains("may have arrived"), "{letters:?}");
    assert_eq!(rig.chat.arrived("c1").len(), 2, "not sent a third time");
    sweeper.abort();
}

#[tokio::test]
async fn a_cut_off_send_the_platform_can_find_is_not_sent_again() {
    let rig = rig(RetryPolicy::default()).await;
    *rig.chat.lookup.lock().unwrap() = Lookup::Found(SendReceipt { message_id: Some("found-1".into()) });
    rig.store.outbox_enqueue(vec![row("c1", "k:0", "the answer", true)]).await.unwrap();
    rig.store.outbox_begin_attempt("k:0", false).await.unwrap();
    rig.courier.wake(&lane_of("chat", "c1"));
    assert!(settled(&rig.store, "k:0", "sent").await);
    let stored = rig.store.outbox_get("k:0").await.unwrap().unwrap();
    assert_eq!((stored.state.as_str(), stored.platform_message_id.as_deref()), ("sent", Some("found-1")));
    assert!(rig.chat.arrived("c1").is_empty(), "found on the platform, not sent again");
    // A platform that deduplicates a resend gets it unmarked.
    *rig.chat.lookup.lock().unwrap() = Lookup::ResendIsDeduplicated;
    rig.store.outbox_enqueue(vec![row("c1", "n:0", "deduplicated", true)]).await.unwrap();
    rig.store.outbox_begin_attempt("n:0", false).await.unwrap();
    rig.courier.wake(&lane_of("chat", "c1"));
    assert!(eventually(|| rig.chat.arrived("c1") == ["deduplicated"]).await, "{:?}", rig.chat.arrived("c1"));
}

#[tokio::test]
async fn a_lost_answer_is_looked_up_after_a_backoff_and_sent_once_when_the_platform_lacks_it() {
    let rig = rig(RetryPolicy::default()).await;
    *rig.chat.lookup.lock().unwrap() = Lookup::NotThere;
    rig.chat.fail("c1", [SendError::Ambiguous("the answer was lost".into())]);
    let started = std::time::Instant::now();
    let outcomes = rig.courier.dispatch(vec![row("c1", "a:0", "the answer", true)], WAIT).await;
    assert!(matches!(outcomes[0], Outcome::Delivered { .. }), "{outcomes:?}");
    assert!(started.elapsed() >= Duration::from_millis(700), "not asked again at once: {:?}", started.elapsed());
    assert_eq!(rig.chat.arrived("c1"), ["the answer"], "the platform lacked it: sent again, unmarked");
}

#[tokio::test]
async fn at_the_end_of_the_window_a_part_is_given_up_listed_and_the_chat_told_once() {
    let rig = rig(RetryPolicy { window: Duration::from_secs(2), late_after: Duration::from_secs(3600) }).await;
    // Two failures: at 0 s and at about 1 s; the next try (about 3 s) is past the window. The
    // notice that follows has a window of its own and goes through.
    rig.chat.fail("c1", (0..2).map(|_| SendError::Transient("502 Bad Gateway".into())));
    let mut part = row("c1", "w:0", "the answer", true);
    part.deadline_ms = now_ms() + 2_000;
    let outcomes = rig.courier.dispatch(vec![part], WAIT).await;
    // 1 s + 2 s of backoff passes the 2 s window.
    assert!(matches!(&outcomes[0], Outcome::GivenUp { reason } if reason.contains("not delivered within 2 s")), "{outcomes:?}");
    let letters = rig.store.outbox_dead_letters(10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert!(letters[0].reason.contains("502 Bad Gateway"), "the last error is kept: {letters:?}");
    assert!(eventually(|| rig.chat.arrived("c1").len() == 1).await);
    assert_eq!(rig.chat.arrived("c1"), [UNDELIVERED_NOTICE]);
}

#[tokio::test]
async fn a_part_delivered_late_says_how_late_and_why() {
    let rig = rig(RetryPolicy { window: Duration::from_secs(3600), late_after: Duration::from_secs(1) }).await;
    rig.chat.fail("c1", [SendError::Transient("502".into()), SendError::Transient("502".into())]);
    let outcomes = rig.courier.dispatch(vec![row("c1", "l:0", "the answer", true), row("c1", "l:1", "more", false)], WAIT).await;
    assert!(outcomes.iter().all(|o| matches!(o, Outcome::Delivered { .. })), "{outcomes:?}");
    let arrived = rig.chat.arrived("c1");
    assert!(arrived[0].starts_with("⏱ Delivered ") && arrived[0].contains("late: Chat was unreachable."), "{arrived:?}");
    assert!(arrived[0].ends_with("\n\nthe answer"), "{arrived:?}");
    assert_eq!(arrived[1], "more", "only the first part carries the note");
}

#[test]
fn backoff_doubles_from_a_second_to_five_minutes_with_jitter() {
    for (attempt, base) in [(1, 1.0), (2, 2.0), (5, 16.0), (9, 256.0), (10, 300.0), (40, 300.0)] {
        let wait = backoff(attempt).as_secs_f64();
        assert!(wait >= base * 0.8 - 1e-9 && wait <= base * 1.2 + 1e-9, "attempt {attempt}: {wait}");
    }
}

#[test]
fn late_notes_read_as_a_person_would_say_them() {
    assert_eq!(late_note(Duration::from_secs(14 * 60), "telegram", Some("502")), "⏱ Delivered 14 min late: Telegram was unreachable.");
    assert_eq!(late_note(Duration::from_secs(75), "slack", None), "⏱ Delivered 75 s late: the gateway or the platform was down.");
    assert_eq!(
        late_note(Duration::from_secs(3 * 3600), "discord", Some("Discord was rate limiting the bot")),
        "⏱ Delivered 3 h late: Discord was rate limiting the bot."
    );
}

/// With PostgreSQL: a part another replica queues for a platform served here is sent at once,
/// woken by the store (the sweep is an hour away); one for a platform served elsewhere is left
/// untouched, for the replica serving it.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_another_replica_queues_is_sent_by_the_replica_serving_its_platform_without_waiting_for_a_sweep() {
    use crate::gateway::ops::health::HealthBoard;
    use crate::gateway::ops::lease::TenureClock;
    let url = crate::store::postgres_tests::scratch_url().await;
    let open = || async {
        let options = crate::store::PostgresOptions { url: url.clone(), pool_size: 4 };
        let store: Store = Arc::new(crate::store::PostgresStore::connect(&options).await.unwrap());
        store
    };
    let (here, there) = (open().await, open().await);
    let chat = Scripted::new();
    let adapters: HashMap<String, Arc<dyn PlatformAdapter>> =
        HashMap::from([("chat".to_string(), chat.clone() as Arc<dyn PlatformAdapter>)]);
    let board = Arc::new(HealthBoard::new());
    board.tenures().share(Box::new(|_| Box::pin(async {})));
    let clock = TenureClock::new(tokio::time::Instant::now(), Duration::from_secs(3600), tokio_util::sync::CancellationToken::new());
    board.tenures().take("chat", Arc::new(clock)).await;
    let courier = Arc::new(Courier::new(adapters, here.clone(), Some(board), RetryPolicy::default()));
    let bell: Arc<dyn crate::store::Wakeups> = here.clone();
    let sweeper = tokio::spawn(crate::gateway::delivery::sweeper::run(courier, Some(bell), Duration::from_secs(3600)));

    there.outbox_enqueue(vec![row("c1", "first:0", "first", true)]).await.unwrap();
    assert!(eventually(|| chat.arrived("c1") == ["first"]).await, "the sweep at start or the bell");
    // The start's sweep is over: only the bell can bring the next part.
    there.outbox_enqueue(vec![row("c1", "second:0", "second", true)]).await.unwrap();
    let mut elsewhere = row("c9", "other:0", "for a platform served elsewhere", true);
    (elsewhere.platform, elsewhere.lane) = ("other".into(), lane_of("other", "c9"));
    there.outbox_enqueue(vec![elsewhere]).await.unwrap();
    assert!(eventually(|| chat.arrived("c1") == ["first", "second"]).await, "woken by the store, not left to the sweep");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let untouched = here.outbox_get("other:0").await.unwrap().unwrap();
    assert_eq!((untouched.state.as_str(), untouched.attempts), ("pending", 0), "neither sent nor given up here");
    sweeper.abort();
}

/// With replicas, a platform that answers on the request (the API server) has each request's
/// parts delivered by the replica its client waits on: a part of another replica's request is
/// left untouched for that replica, without holding up a request waiting here in the same
/// conversation; once its request stopped waiting (past its deadline) it is given up here.
#[tokio::test]
async fn a_part_whose_request_waits_on_another_replica_is_left_to_it_and_holds_up_no_other_request() {
    use crate::gateway::delivery::outbound::queue_rows;
    use crate::gateway::ops::health::HealthBoard;
    let dir = tempfile::tempdir().unwrap();
    let store: Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
    let chat = Scripted::new();
    *chat.waiting.lock().unwrap() = Some(["here".to_string()].into());
    let board = Arc::new(HealthBoard::new());
    board.tenures().share(Box::new(|_| Box::pin(async {})));
    board.tenures().serve_where_accepted("chat");
    let courier = courier_for(&chat, &store, Some(board));
    let target = ChatTarget { platform: Platform::new("chat"), chat_id: "conversation".into(), thread_id: None };
    let answer = |request: &str| {
        let mut message =
            serde_json::from_str::<OutboundMessage>(&row("conversation", request, &format!("answer to {request}"), true).message).unwrap();
        message.reply_to = Some(request.to_string());
        message.idempotency_key = format!("{request}:0");
        message
    };
    let elsewhere = queue_rows(&target, vec![answer("elsewhere")], Duration::from_secs(60), false, true);
    let here = queue_rows(&target, vec![answer("here")], Duration::from_secs(60), false, true);
    assert_ne!(elsewhere[0].lane, here[0].lane, "each request is a lane of its own");
    let queued = courier.dispatch(elsewhere, Duration::from_millis(300)).await;
    assert!(matches!(queued[0], Outcome::Queued), "{queued:?}");
    let delivered = courier.dispatch(here, Duration::from_secs(5)).await;
    assert!(matches!(delivered[0], Outcome::Delivered { .. }), "the request waiting here is answered: {delivered:?}");
    assert_eq!(chat.arrived("conversation"), ["answer to here"]);
    let left = store.outbox_get("elsewhere:0").await.unwrap().unwrap();
    assert_eq!((left.state.as_str(), left.attempts), ("pending", 0), "left untouched for the replica its client waits on");

    // Its request stopped waiting long ago (its replica died): given up where found.
    let mut stale = queue_rows(&target, vec![answer("gone")], Duration::from_secs(60), false, true);
    stale[0].deadline_ms = now_ms() - 1;
    let given_up = courier.dispatch(stale, Duration::from_secs(5)).await;
    assert!(matches!(given_up[0], Outcome::GivenUp { .. }), "{given_up:?}");
    assert_eq!(chat.arrived("conversation"), ["answer to here"], "nothing sent for it");
}
