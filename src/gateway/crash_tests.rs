//! A turn that panics: the session must stay usable, the user must hear about it, and the event
//! must be parked instead of replayed; an event the gateway died under three times is parked too.

use crate::agent::providers::{ChatProvider, ChatRequest, ChatResponse, ProviderError};
use crate::agent::{ChatMessage, Role};
use crate::config::Config;
use crate::gateway::intake::inbox::Inbox;
use crate::gateway::session::actor;
use crate::gateway::tests::support::RecordingChat;
use crate::store::InboxState;
use async_trait::async_trait;
use hermes_adapter::{ChatType, InboundEvent, Platform, SessionSource};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// A model that panics on any message containing "boom" and answers "fine" otherwise.
struct FragileModel;

#[async_trait]
impl ChatProvider for FragileModel {
    async fn complete(&self, request: &ChatRequest, _deltas: Option<&mpsc::Sender<String>>) -> Result<ChatResponse, ProviderError> {
        let last = request.messages.iter().rev().find(|m: &&ChatMessage| m.role == Role::User).map(|m| m.content.clone());
        if last.unwrap_or_default().contains("boom") {
            panic!("the model client hit a bug (token sk-live-should-not-leak-123456)");
        }
        Ok(ChatResponse { text: "fine".into(), finish_reason: "stop".into(), ..Default::default() })
    }
}

fn event(id: &str, text: &str) -> InboundEvent {
    let mut source = SessionSource::new(Platform::new("chat"), "c1", ChatType::Dm);
    source.user_id = Some("u1".into());
    InboundEvent::text(id, source, text)
}

async fn wait_for(chat: &RecordingChat, what: impl Fn(&[String]) -> bool) -> Vec<String> {
    for _ in 0..200 {
        let sent = chat.sent.lock().unwrap().clone();
        if what(&sent) {
            return sent;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out; sent: {:?}", chat.sent.lock().unwrap());
}

#[tokio::test]
async fn a_panicking_turn_frees_the_session_tells_the_user_and_parks_the_event() {
    let chat = RecordingChat::new();
    let (_dir, gateway) = crate::gateway::tests::support::gateway(Config::default(), chat.clone(), Arc::new(FragileModel)).await;
    let (idle_tx, _idle_rx) = mpsc::unbounded_channel();
    let session = actor::spawn(gateway.actors.clone(), "chat:dm:c1".into(), idle_tx);
    // One at a time: a second message arriving mid-turn would interrupt the first before it panics.
    for (id, text, reply) in [("e1", "boom please", "Internal error (incident "), ("e2", "and now?", "fine")] {
        let e = event(id, text);
        gateway.store.inbox_accept(id, "chat", &serde_json::to_string(&e).unwrap()).await.unwrap();
        session.send(e).unwrap();
        wait_for(&chat, |s| s.iter().any(|m| m.contains(reply))).await;
    }
    let sent = chat.sent.lock().unwrap().clone();
    let notice = sent
        .iter()
        .find(|m| m.contains("Internal error (incident "))
        .unwrap_or_else(|| panic!("the user hears of the internal error: {sent:?}"));
    assert!(!notice.contains("sk-live"), "the panic message stays in the (redacted) log: {notice}");
    assert_eq!(sent.last().map(String::as_str), Some("fine"), "the next message in the same session is answered");
    let parked = gateway.store.inbox_get("e1").await.unwrap().unwrap();
    assert_eq!(parked.state, InboxState::Poisoned);
    assert!(parked.error.as_deref().is_some_and(|e| e.contains("panicked (incident")), "{:?}", parked.error);
    assert_eq!(gateway.store.inbox_poisoned(10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn an_event_the_gateway_died_under_three_times_is_parked_not_replayed() {
    let chat = RecordingChat::new();
    let (_dir, gateway) = crate::gateway::tests::support::gateway(Config::default(), chat, Arc::new(FragileModel)).await;
    let store = &gateway.store;
    for id in ["crashy", "unlucky"] {
        store.inbox_accept(id, "chat", &serde_json::to_string(&event(id, "hello")).unwrap()).await.unwrap();
    }
    // Each start of a turn counts; the gateway then died before finishing.
    for _ in 0..3 {
        store.inbox_mark_processing("crashy").await.unwrap();
    }
    store.inbox_mark_processing("unlucky").await.unwrap();
    let (router_tx, mut router_rx) = mpsc::unbounded_channel();
    let inbox = Inbox::new(store.clone(), router_tx);
    assert_eq!(inbox.replay_unfinished().await.unwrap(), 1);
    assert_eq!(router_rx.recv().await.map(|e| e.event_id).as_deref(), Some("unlucky"), "one crash is replayed");
    let parked = store.inbox_get("crashy").await.unwrap().unwrap();
    assert_eq!(parked.state, InboxState::Poisoned);
    assert_eq!(inbox.replay_unfinished().await.unwrap(), 1, "a parked event is never replayed again");
}
