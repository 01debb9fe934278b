//! An in-process gateway for tests: a real store in a temp dir, the real command registry and
//! tool set, an agent over the provider the test chooses, and one chat adapter the test owns,
//! wired as `gateway::run` wires them.

use crate::agent::providers::ChatProvider;
use crate::config::{Config, Home};
use crate::gateway::wiring::{Parts, Wiring};
use crate::store::{SqliteStore, Store};
use hermes_adapter::PlatformAdapter;
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
    let auth = Arc::new(crate::gateway::auth_policy(&config, std::slice::from_ref(&platform)));
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
        config,
        home,
        store,
        adapters: &[adapter],
        auth,
        agent,
        tool_settings,
        guard,
        history_bytes: 1 << 20,
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
