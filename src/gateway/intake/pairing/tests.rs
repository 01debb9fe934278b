use super::store::{CodeRequest, PairingStore};
use super::*;
use crate::agent::providers::{ChatProvider, ChatRequest, ChatResponse, ProviderError};
use crate::config::Config;
use crate::gateway::intake::auth::{AuthDecision, AuthPolicy};
use crate::gateway::tests::support::{self, RecordingChat};
use crate::store::InboxState;
use hermes_adapter::Platform;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

fn source(platform: &str, user: Option<&str>, ty: ChatType) -> SessionSource {
    let mut s = SessionSource::new(Platform::new(platform), "c1", ty);
    s.user_id = user.map(str::to_string);
    s
}

fn code_in(text: &str) -> String {
    let start = text.find("pairing code: `").map(|i| i + "pairing code: `".len()).unwrap_or_else(|| panic!("no code in {text:?}"));
    text[start..start + store::CODE_LEN].to_string()
}

#[test]
fn approvals_and_revocations_made_elsewhere_apply_to_the_next_message() {
    let dir = tempfile::tempdir().unwrap();
    let pairing = Pairing::new(PairingStore::new(dir.path().to_path_buf()), ["telegram".to_string()]);
    // The CLI: another value, as another process would have.
    let cli = PairingStore::new(dir.path().to_path_buf());
    assert!(!pairing.is_approved("telegram", "6001"));
    let now = store::now();
    for (user, name) in [("6001", "A"), ("6002", "B")] {
        let CodeRequest::Issued(code) = cli.request_code("telegram", user, name, now).unwrap() else { panic!("no code") };
        cli.approve("telegram", &code, now).unwrap();
        assert!(pairing.is_approved("telegram", user), "{user} approved without a restart");
    }
    assert!(!pairing.is_approved("discord", "6001"), "approved on Telegram only");
    assert!(cli.revoke("telegram", "6001").unwrap());
    assert!(!pairing.is_approved("telegram", "6001"), "revoked without a restart");
    assert!(pairing.is_approved("telegram", "6002"));
    // Two writes in a row of the same size are still told apart.
    assert!(cli.revoke("telegram", "6002").unwrap());
    let CodeRequest::Issued(code) = cli.request_code("telegram", "6003", "B", now).unwrap() else { panic!("no code") };
    cli.approve("telegram", &code, now).unwrap();
    assert!(!pairing.is_approved("telegram", "6002"));
    assert!(pairing.is_approved("telegram", "6003"));
}

#[test]
fn only_a_persons_dm_with_an_id_on_a_pairing_platform_is_answered() {
    let pairing = Pairing::new(PairingStore::new("/nonexistent".into()), ["telegram".to_string()]);
    assert!(pairing.answers(&source("telegram", Some("1"), ChatType::Dm)));
    assert!(!pairing.answers(&source("telegram", Some("1"), ChatType::Group)), "groups stay silent");
    assert!(!pairing.answers(&source("telegram", None, ChatType::Dm)), "no id, nothing to approve");
    assert!(!pairing.answers(&source("discord", Some("1"), ChatType::Dm)), "a platform with an allowlist stays silent");
    let mut bot = source("telegram", Some("1"), ChatType::Dm);
    bot.is_bot = true;
    assert!(!pairing.answers(&bot));
}

#[test]
fn a_platform_pairs_only_where_the_configuration_names_nobody() {
    let auth = AuthPolicy::new(vec![], false).with_platform("telegram", vec![], false).with_platform("discord", vec!["1".into()], false);
    assert!(!auth.names_users_on("telegram") && auth.names_users_on("discord"));
    assert!(AuthPolicy::new(vec!["9".into()], false).names_users_on("telegram"), "the global list names users everywhere");
    assert!(AuthPolicy::new(vec![], true).names_users_on("telegram"));
    assert!(AuthPolicy::new(vec![], false).with_platform("telegram", vec![], true).names_users_on("telegram"));
}

/// Counts the turns it is asked for and answers "fine".
#[derive(Default)]
struct CountingModel(AtomicUsize);

#[async_trait::async_trait]
impl ChatProvider for CountingModel {
    async fn complete(&self, _request: &ChatRequest, _deltas: Option<&mpsc::Sender<String>>) -> Result<ChatResponse, ProviderError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ChatResponse { text: "fine".into(), finish_reason: "stop".into(), ..Default::default() })
    }
}

async fn wait_for(chat: &RecordingChat, what: impl Fn(&[String]) -> bool) -> Vec<String> {
    for _ in 0..250 {
        let sent = chat.sent.lock().unwrap().clone();
        if what(&sent) {
            return sent;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out; sent: {:?}", chat.sent.lock().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_gives_a_stranger_a_code_and_lets_them_in_once_approved() {
    let chat = RecordingChat::new();
    let model = Arc::new(CountingModel::default());
    let (dir, wiring) = support::gateway(Config::default(), chat.clone(), model.clone()).await;
    let store = PairingStore::new(dir.path().join("platforms/pairing"));
    let pairing = Arc::new(Pairing::new(store.clone(), ["chat".to_string()]));
    let mut routing = wiring.routing();
    routing.auth = Arc::new(AuthPolicy::new(vec![], false).with_platform("chat", vec![], false).with_pairing(pairing));
    let (tx, rx) = mpsc::unbounded_channel();
    let _router = crate::gateway::session::router::spawn(routing, rx);
    let send = |id: &str, text: &str| {
        let event = InboundEvent::text(id, source("chat", Some("6001"), ChatType::Dm), text);
        let (store, tx) = (wiring.store.clone(), tx.clone());
        async move {
            store.inbox_accept(&event.event_id, "chat", &serde_json::to_string(&event).unwrap()).await.unwrap();
            tx.send(event).unwrap();
        }
    };
    let done = |id: &'static str| {
        let store = wiring.store.clone();
        async move {
            for _ in 0..250 {
                if store.inbox_get(id).await.unwrap().is_some_and(|r| r.state == InboxState::Done) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("inbox row {id} was never closed");
        }
    };

    send("e1", "hello, who are you?").await;
    let sent = wait_for(&chat, |s| !s.is_empty()).await;
    let code = code_in(&sent[0]);
    assert_eq!(sent[0], code_message("chat", &code));
    done("e1").await;

    send("e2", "hello again").await;
    done("e2").await;
    assert_eq!(chat.sent.lock().unwrap().len(), 1, "inside the rate limit the stranger hears nothing");
    assert_eq!(model.0.load(Ordering::SeqCst), 0, "nothing a stranger wrote reached the model");

    store.approve("chat", &code, store::now()).unwrap();
    send("e3", "let me in").await;
    wait_for(&chat, |s| s.last().is_some_and(|m| m == "fine")).await;
    assert_eq!(model.0.load(Ordering::SeqCst), 1, "approved, the user is answered at once");
}

#[test]
fn a_paired_user_is_allowed_but_never_an_implicit_admin() {
    let dir = tempfile::tempdir().unwrap();
    let store = PairingStore::new(dir.path().to_path_buf());
    let now = store::now();
    let CodeRequest::Issued(code) = store.request_code("telegram", "6001", "Paired", now).unwrap() else { panic!("no code") };
    store.approve("telegram", &code, now).unwrap();
    let pairing = Arc::new(Pairing::new(PairingStore::new(dir.path().to_path_buf()), ["telegram".to_string()]));
    // No admin named anywhere: the configured user is one, the paired one is not.
    let auth = AuthPolicy::new(vec![], false).with_platform("telegram", vec!["5001".into()], false).with_pairing(pairing);
    let event = |user: &str| InboundEvent::text("e", source("telegram", Some(user), ChatType::Dm), "hi");
    assert_eq!(auth.decide(&event("6001")), AuthDecision::Allowed);
    assert!(!auth.is_admin(&event("6001")), "pairing grants access, not /yolo or /approve always");
    assert!(auth.is_admin(&event("5001")));
    let mut bot = event("6001");
    bot.source.is_bot = true;
    assert_ne!(auth.decide(&bot), AuthDecision::Allowed, "a bot is never let in by pairing");
}
