//! The router: authorizes each inbound event, derives its session key and hands it to that
//! session's actor, creating actors on demand and retiring idle ones: after
//! `gateway.idle_session_secs`, or at once when more than `gateway.memory.live_sessions` are
//! alive (the least recently used first; a busy one finishes first). A refused DM on a platform
//! that pairs goes to [`crate::gateway::intake::pairing`] for its answer; every other refused event is dropped.

use crate::gateway::intake::auth::{AuthDecision, AuthPolicy};
use crate::gateway::intake::pairing;
use crate::gateway::intake::session_key::{KeyPolicy, session_key};
use crate::gateway::session::actor::{self, ActorExit, ActorHandles, Mailbox};
use crate::store::Inbox;
use hermes_adapter::InboundEvent;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

struct ActorEntry {
    mailbox: Mailbox,
    /// Events handed to this actor; compared with the actor's count when it reports idle, so an
    /// actor is only retired when nothing is in flight towards it.
    sent: u64,
    /// The router's clock at the last event handed over: the least recent retires first.
    last_used: u64,
    /// Asked to retire when idle, and not used since.
    retiring: bool,
}

/// The live actors by session key, bounded by `live_sessions`.
struct Actors {
    entries: HashMap<String, ActorEntry>,
    clock: u64,
    live_sessions: usize,
}

impl Actors {
    /// Past the bound, ask the least recently used actor not yet asked to retire when idle.
    fn ask_one_to_retire(&mut self) {
        let asked = self.entries.values().filter(|e| e.retiring).count();
        if self.entries.len().saturating_sub(asked) <= self.live_sessions {
            return;
        }
        if let Some(oldest) = self.entries.values_mut().filter(|e| !e.retiring).min_by_key(|e| e.last_used) {
            oldest.retiring = true;
            oldest.mailbox.retire_if_idle();
        }
    }
}

/// What the router decides with, and what it starts actors with.
pub(crate) struct Routing {
    pub auth: Arc<AuthPolicy>,
    pub key_policy: KeyPolicy,
    /// The inbox, where refused events are closed.
    pub inbox: Arc<dyn Inbox>,
    pub actors: Arc<ActorHandles>,
}

pub(crate) fn spawn(routing: Routing, inbox: mpsc::UnboundedReceiver<InboundEvent>) -> JoinHandle<()> {
    tokio::spawn(route_events(routing, inbox))
}

async fn route_events(routing: Routing, mut inbox: mpsc::UnboundedReceiver<InboundEvent>) {
    let live_sessions = routing.actors.behaviour.live_sessions;
    let mut actors = Actors { entries: HashMap::new(), clock: 0, live_sessions };
    let (idle_tx, mut idle_rx) = mpsc::unbounded_channel::<ActorExit>();
    loop {
        tokio::select! {
            event = inbox.recv() => {
                let Some(event) = event else { break };
                route_one(&routing, &mut actors, &idle_tx, event).await;
            }
            Some(idle) = idle_rx.recv() => {
                if actors.entries.get(&idle.session_key).is_some_and(|e| e.sent == idle.processed) {
                    // Dropping the sender lets the actor's receive loop end.
                    actors.entries.remove(&idle.session_key);
                }
            }
        }
        crate::observe::metrics::global().set_sessions_active(actors.entries.len());
    }
}

async fn route_one(routing: &Routing, actors: &mut Actors, idle_tx: &mpsc::UnboundedSender<ActorExit>, event: InboundEvent) {
    if let AuthDecision::Denied { direct } = routing.auth.decide(&event) {
        refuse(routing, event, direct).await;
        return;
    }
    let key = session_key(&event.source, routing.key_policy);
    let mut event = Some(event);
    // At most two tries: a retired actor's channel is closed, so the event comes back and a new
    // actor takes it.
    for _ in 0..2 {
        let Some(ev) = event.take() else { return };
        actors.clock += 1;
        let clock = actors.clock;
        let mut created = false;
        let entry = actors.entries.entry(key.clone()).or_insert_with(|| {
            created = true;
            let mailbox = actor::spawn(routing.actors.clone(), key.clone(), idle_tx.clone());
            ActorEntry { mailbox, sent: 0, last_used: clock, retiring: false }
        });
        match entry.mailbox.send(ev) {
            Ok(()) => {
                entry.sent += 1;
                entry.last_used = clock;
                entry.retiring = false;
                if created {
                    actors.ask_one_to_retire();
                }
                return;
            }
            Err(back) => {
                actors.entries.remove(&key);
                event = Some(*back);
            }
        }
    }
    tracing::error!(session_key = %key, "could not hand an event to its session; it stays in the inbox for the next start");
}

/// A refused event never reaches an actor. A stranger's DM on a platform that pairs is answered
/// in a task of its own (the router does not wait on the store's lock or on a send); anything
/// else is dropped silently, with the user id logged so the owner can add it to an allowlist.
async fn refuse(routing: &Routing, event: InboundEvent, direct: bool) {
    if let Some(pairing) = routing.auth.pairing().filter(|p| p.answers(&event.source)) {
        let deliverer = routing.actors.turns.deliverer.clone();
        tokio::spawn(pairing::answer_stranger(pairing.clone(), deliverer, routing.inbox.clone(), event));
        return;
    }
    tracing::info!(
        platform = %event.source.platform,
        user_id = event.source.user_id.as_deref().unwrap_or("-"),
        chat_id = %event.source.chat_id,
        direct,
        "message from an unauthorized user ignored (add the id to {}_ALLOWED_USERS to allow it)",
        event.source.platform.as_str().to_ascii_uppercase()
    );
    if let Err(e) = routing.inbox.inbox_mark_done(&event.event_id).await {
        tracing::warn!(error = %e, "could not close an unauthorized inbox row");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::providers::{ChatProvider, ChatRequest, ChatResponse, ProviderError};
    use crate::config::Config;
    use crate::gateway::tests::support::{RecordingChat, gateway};
    use hermes_adapter::{ChatType, Platform, SessionSource};
    use std::time::Duration;
    use tokio::sync::Semaphore;

    /// Answers "fine" once the test lets it (one permit per answer), counting its answers.
    struct GatedModel {
        gate: Semaphore,
        answered: std::sync::atomic::AtomicUsize,
    }

    impl GatedModel {
        fn closed() -> Arc<GatedModel> {
            Arc::new(GatedModel { gate: Semaphore::new(0), answered: Default::default() })
        }
    }

    #[async_trait::async_trait]
    impl ChatProvider for GatedModel {
        async fn complete(&self, _: &ChatRequest, _: Option<&mpsc::Sender<String>>) -> Result<ChatResponse, ProviderError> {
            self.gate.acquire().await.expect("the gate stays open").forget();
            self.answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(ChatResponse { text: "fine".into(), finish_reason: "stop".into(), ..Default::default() })
        }
    }

    /// Three live actors (k1 least recently used) over a bound of two, and the idle reports.
    async fn three_actors_over_two(
        model: Arc<GatedModel>,
    ) -> (tempfile::TempDir, crate::gateway::tests::support::Wiring, Arc<RecordingChat>, Actors, mpsc::UnboundedReceiver<ActorExit>) {
        let chat = RecordingChat::new();
        let mut config = Config::default();
        config.gateway.allow_all_users = true;
        let (dir, wiring) = gateway(config, chat.clone(), model).await;
        let (idle_tx, idle_rx) = mpsc::unbounded_channel();
        let mut actors = Actors { entries: HashMap::new(), clock: 3, live_sessions: 2 };
        for (n, key) in ["k1", "k2", "k3"].into_iter().enumerate() {
            let mailbox = actor::spawn(wiring.actors.clone(), key.to_string(), idle_tx.clone());
            actors.entries.insert(key.to_string(), ActorEntry { mailbox, sent: 0, last_used: n as u64 + 1, retiring: false });
        }
        (dir, wiring, chat, actors, idle_rx)
    }

    async fn next_exit(idle: &mut mpsc::UnboundedReceiver<ActorExit>) -> ActorExit {
        // A guard against a hang, not a measure: idle actors otherwise report after 15 minutes.
        tokio::time::timeout(Duration::from_secs(30), idle.recv()).await.expect("an actor reported idle").expect("the channel is open")
    }

    #[tokio::test]
    async fn past_the_bound_the_least_recently_used_idle_actor_retires_at_once() {
        let (_dir, _wiring, _chat, mut actors, mut idle) = three_actors_over_two(GatedModel::closed()).await;
        actors.ask_one_to_retire();
        let exit = next_exit(&mut idle).await;
        assert_eq!((exit.session_key.as_str(), exit.processed), ("k1", 0), "the least recently used actor was asked");
        let asked: Vec<&str> = actors.entries.iter().filter(|(_, e)| e.retiring).map(|(k, _)| k.as_str()).collect();
        assert_eq!(asked, ["k1"]);
        actors.ask_one_to_retire();
        assert_eq!(actors.entries.values().filter(|e| e.retiring).count(), 1, "two not retiring fit the bound: nobody else is asked");
    }

    #[tokio::test]
    async fn a_busy_actor_asked_to_retire_finishes_its_turn_first() {
        let model = GatedModel::closed();
        let (_dir, wiring, _chat, mut actors, mut idle) = three_actors_over_two(model.clone()).await;
        let mut source = SessionSource::new(Platform::new("chat"), "c1", ChatType::Dm);
        source.user_id = Some("u1".into());
        let event = InboundEvent::text("e1", source, "hello");
        wiring.store.inbox_accept("e1", "chat", &serde_json::to_string(&event).expect("json")).await.expect("accepted");
        let k1 = actors.entries.get_mut("k1").expect("k1");
        k1.mailbox.send(event).expect("k1 is alive");
        k1.sent += 1;
        actors.ask_one_to_retire();
        // The test runtime has one thread: yielding lets the actor take both mails meanwhile.
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        assert!(idle.try_recv().is_err(), "a busy actor does not retire");
        // The turn waits on the model; let it answer only now.
        model.gate.add_permits(1);
        let exit = next_exit(&mut idle).await;
        assert_eq!((exit.session_key.as_str(), exit.processed), ("k1", 1));
        assert_eq!(model.answered.load(std::sync::atomic::Ordering::SeqCst), 1, "the actor retired only after its turn had its answer");
    }
}
