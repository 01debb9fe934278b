//! An in-process gateway for tests: a real store in a temp dir, the real command registry and
//! tool set, an agent over the provider the test chooses, and one chat adapter the test owns,
//! wired as `gateway::run` wires them; a ready [`rig`] of that gateway with an admin and a guest,
//! and outbox rows queued or dead-lettered for it.

use crate::agent::providers::ChatProvider;
use crate::config::{Config, Home};
use crate::gateway::wiring::Parts;
pub(crate) use crate::gateway::wiring::Wiring;
use crate::store::{AttemptEnd, NewOutboxRow, SqliteStore, Store};
use hermes_adapter::{ChatTarget, OutboundMessage, Platform, PlatformAdapter};
use std::sync::Arc;

/// The gateway's handles with `adapter` as its only platform; the temp dir owns the home.
pub(crate) async fn gateway(
    config: Config,
    adapter: Arc<dyn PlatformAdapter>,
    provider: Arc<dyn ChatProvider>,
) -> (tempfile::TempDir, Wiring) {
    let dir = tempfile::tempdir().unwrap();
    let config = Arc::new(config);
    let store: Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
    let home = Home::at(dir.path());
    let agent = Arc::new(crate::agent::Agent::new(provider, crate::agent::tools::builtin(), 3, Default::default()));
    let platform = adapter.platform().as_str().to_string();
    let auth = Arc::new(crate::gateway::intake::access::auth_policy(&config, std::slice::from_ref(&platform)));
    let tool_settings = Arc::new(crate::agent::tools::ToolSettings {
        per_user_profiles: auth.serves_several_users(),
        ..crate::gateway::tool_settings(&config)
    });
    let guard = Arc::new(crate::agent::approval::GuardPolicy::new(
        false,
        crate::agent::approval::GuardPolicy::context_for(&dir.path().join("workspace"), dir.path(), None),
    ));
    let wiring = Wiring::build(Parts {
        paths: Arc::new(crate::gateway::agent_paths(&home, &config)),
        folders: crate::gateway::folders::Folders::of(&home, None),
        config,
        home,
        store,
        adapters: &[adapter],
        auth,
        agent,
        tool_settings,
        guard,
        history_bytes: 1 << 20,
        mcp: crate::mcp::McpHub::new(Default::default(), crate::mcp::McpPaths { logs_dir: dir.path().join("logs") }),
    });
    (dir, wiring)
}

/// A chat read live that records the text of every message the bot sent (platform `chat`).
pub(crate) struct RecordingChat {
    platform: hermes_adapter::Platform,
    caps: hermes_adapter::Capabilities,
    pub sent: std::sync::Mutex<Vec<String>>,
}

impl RecordingChat {
    pub(crate) fn new() -> Arc<RecordingChat> {
        let caps = hermes_adapter::Capabilities { supports_async_delivery: true, read_live: true, ..hermes_adapter::Capabilities::http() };
        Arc::new(RecordingChat { platform: hermes_adapter::Platform::new("chat"), caps, sent: Default::default() })
    }
}

#[async_trait::async_trait]
impl PlatformAdapter for RecordingChat {
    fn platform(&self) -> &hermes_adapter::Platform {
        &self.platform
    }
    fn capabilities(&self) -> &hermes_adapter::Capabilities {
        &self.caps
    }
    async fn run(&self, _ctx: hermes_adapter::AdapterContext) -> Result<(), hermes_adapter::AdapterError> {
        Ok(())
    }
    async fn send(&self, msg: &hermes_adapter::OutboundMessage) -> Result<hermes_adapter::SendReceipt, hermes_adapter::SendError> {
        let mut sent = self.sent.lock().unwrap();
        sent.push(msg.text.clone());
        Ok(hermes_adapter::SendReceipt { message_id: Some(format!("m{}", sent.len())) })
    }
}

/// A provider that fails every request: the rig's tests never reach a model.
pub(crate) struct NoModel;

#[async_trait::async_trait]
impl crate::agent::providers::ChatProvider for NoModel {
    async fn complete(
        &self,
        _request: &crate::agent::providers::ChatRequest,
        _deltas: Option<&tokio::sync::mpsc::Sender<String>>,
    ) -> Result<crate::agent::providers::ChatResponse, crate::agent::providers::ProviderError> {
        Err(crate::agent::providers::ProviderError::Fatal("no model in this test".into()))
    }
}

/// A gateway on the recording `chat` platform that lets in `boss` (an admin) and `guest`
/// (not one).
pub(crate) async fn rig() -> (tempfile::TempDir, Wiring, Arc<RecordingChat>) {
    let env = crate::config::Env::from_pairs(Vec::<(String, String)>::new());
    let yaml = "gateway:\n  allowed_users: [boss, guest]\n  admin_users: [boss]\n";
    let config = crate::config::load_str(yaml, std::path::Path::new("config.yaml"), &env).unwrap().config;
    let chat = RecordingChat::new();
    let (dir, wiring) = gateway(config, chat.clone(), Arc::new(NoModel)).await;
    (dir, wiring, chat)
}

/// A message on its way to `chat_id` of the `chat` platform, queued under `key`.
pub(crate) async fn queued(store: &Store, key: &str, chat_id: &str, text: &str) {
    let target = ChatTarget { platform: Platform::new("chat"), chat_id: chat_id.into(), thread_id: None };
    let message = OutboundMessage {
        target: target.clone(),
        text: text.into(),
        reply_to: None,
        idempotency_key: key.into(),
        is_final: true,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file: None,
    };
    let row = NewOutboxRow {
        key: key.into(),
        lane: crate::gateway::delivery::courier::lane_of("chat", chat_id),
        platform: "chat".into(),
        target: serde_json::to_string(&target).unwrap(),
        body: text.into(),
        message: serde_json::to_string(&message).unwrap(),
        deadline_ms: chrono::Utc::now().timestamp_millis() + 60_000,
        notify_on_death: false,
        lead: true,
    };
    store.outbox_enqueue(vec![row]).await.unwrap();
}

/// Queue `text` for `chat:<chat_id>` and make it a dead letter; its id.
pub(crate) async fn dead_letter(store: &Store, key: &str, chat_id: &str, text: &str) -> i64 {
    queued(store, key, chat_id, text).await;
    store.outbox_end_attempt(key, AttemptEnd::Dead { reason: "chat not found".into() }).await.unwrap();
    store.outbox_dead_letters(100).await.unwrap().into_iter().find(|l| l.key == key).expect("the row is a dead letter").id
}
