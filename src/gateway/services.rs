//! The gateway's shared services, handed to the router, session actors and commands.

use super::auth::AuthPolicy;
use super::commands::CommandRegistry;
use super::health::HealthBoard;
use super::session_key::KeyPolicy;
use super::turns::TurnTracker;
use crate::agent::{Agent, ModelSpec};
use crate::config::Config;
use crate::store::Store;
use hermes_adapter::PlatformAdapter;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub struct Services {
    pub store: Store,
    pub config: Arc<Config>,
    pub agent: Arc<Agent>,
    pub adapters: HashMap<String, Arc<dyn PlatformAdapter>>,
    pub health: Arc<HealthBoard>,
    pub commands: CommandRegistry,
    pub auth: AuthPolicy,
    pub key_policy: KeyPolicy,
    /// Bounds how many turns run at once (`gateway.max_concurrent_sessions`); `None` = unbounded.
    pub turn_slots: Option<Arc<Semaphore>>,
    /// Cancelled when the drain timeout runs out: running turns stop and stay in the inbox to be
    /// replayed after the restart.
    pub turns_abort: CancellationToken,
    pub turns: TurnTracker,
}

impl Services {
    pub fn adapter(&self, platform: &str) -> Option<&Arc<dyn PlatformAdapter>> {
        self.adapters.get(platform)
    }

    /// The configured model.
    pub fn default_model(&self) -> ModelSpec {
        let m = &self.config.model;
        ModelSpec {
            model: m.default.clone(),
            provider: m.provider.clone(),
            base_url: m.base_url.clone(),
            api_key: m.api_key.as_ref().map(|k| k.expose().to_string()),
        }
    }

    /// The model for a session: the configured one, with the session's `model_override`
    /// (`{model, provider, base_url}`) applied when present.
    pub fn model_for(&self, overrides: Option<&serde_json::Value>) -> ModelSpec {
        let mut spec = self.default_model();
        if let Some(o) = overrides.and_then(|o| o.get("model_override")) {
            if let Some(m) = o.get("model").and_then(|v| v.as_str()) {
                spec.model = m.to_string();
            }
            if let Some(p) = o.get("provider").and_then(|v| v.as_str()) {
                spec.provider = Some(p.to_string());
            }
            if let Some(u) = o.get("base_url").and_then(|v| v.as_str()) {
                spec.base_url = u.to_string();
            }
        }
        spec
    }
}
