//! The gateway's shared services, handed to the router, session actors and commands.

use super::auth::AuthPolicy;
use super::clarify::ClarifyBoard;
use super::commands::CommandRegistry;
use super::health::HealthBoard;
use super::session_key::KeyPolicy;
use super::tool_host::GatewayToolHost;
use super::turns::TurnTracker;
use crate::agent::approval::ApprovalPolicy;
use crate::agent::tools::{AgentPaths, ToolFilter, ToolSettings};
use crate::agent::{Agent, ModelSpec};
use crate::config::Config;
use crate::config::Home;
use crate::store::Store;
use hermes_adapter::PlatformAdapter;
use hermes_adapter::Usage;
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
    /// Shared with the adapters, which ask it before fetching attachments.
    pub auth: Arc<AuthPolicy>,
    pub key_policy: KeyPolicy,
    /// Bounds how many turns run at once (`gateway.max_concurrent_sessions`); `None` = unbounded.
    pub turn_slots: Option<Arc<Semaphore>>,
    /// Cancelled when the drain timeout runs out: running turns stop and stay in the inbox to be
    /// replayed after the restart.
    pub turns_abort: CancellationToken,
    pub turns: TurnTracker,
    pub home: Home,
    pub paths: Arc<AgentPaths>,
    pub tool_settings: Arc<ToolSettings>,
    pub tool_host: Arc<GatewayToolHost>,
    pub approval: Arc<dyn ApprovalPolicy>,
    pub clarify: ClarifyBoard,
    /// Set by `/model --global`: the default model for every chat until the next restart (which
    /// reads it back from config.yaml).
    pub global_model: std::sync::RwLock<Option<(String, Option<String>)>>,
    /// Recent history of the sessions that talked last, so a turn reads only what is new.
    pub history: super::history_cache::HistoryCache,
    /// `/background` tasks running per session.
    pub background: super::background_slots::BackgroundSlots,
}

impl Services {
    pub fn adapter(&self, platform: &str) -> Option<&Arc<dyn PlatformAdapter>> {
        self.adapters.get(platform)
    }

    /// The configured model (or the one `/model --global` chose since).
    pub fn default_model(&self) -> ModelSpec {
        let m = &self.config.model;
        let mut spec = ModelSpec {
            model: m.default.clone(),
            provider: m.provider.clone(),
            base_url: m.base_url.clone(),
            api_key: m.api_key.as_ref().map(|k| k.expose().to_string()),
        };
        if let Ok(guard) = self.global_model.read()
            && let Some((model, provider)) = guard.as_ref()
        {
            spec.model = model.clone();
            if provider.is_some() {
                spec.provider = provider.clone();
            }
        }
        spec
    }

    pub fn set_global_model(&self, model: &str, provider: Option<&str>) {
        if let Ok(mut guard) = self.global_model.write() {
            *guard = Some((model.to_string(), provider.map(str::to_string)));
        }
    }

    /// The configured fallback models, in order.
    pub fn fallbacks(&self) -> Vec<ModelSpec> {
        let primary = self.default_model();
        self.config
            .fallback_providers
            .iter()
            .map(|f| ModelSpec {
                model: f.model.clone(),
                provider: f.provider.clone(),
                base_url: f.base_url.clone().unwrap_or_else(|| primary.base_url.clone()),
                api_key: f.api_key.as_ref().map(|k| k.expose().to_string()).or_else(|| primary.api_key.clone()),
            })
            .collect()
    }

    /// The model that summarizes conversations (`auxiliary.compression`, else the session's).
    pub fn compression_model(&self, session_model: &ModelSpec) -> ModelSpec {
        let aux = &self.config.auxiliary.compression;
        let mut spec = session_model.clone();
        if let Some(m) = &aux.model {
            spec.model = m.clone();
        }
        if aux.provider.is_some() {
            spec.provider = aux.provider.clone();
        }
        if let Some(u) = &aux.base_url {
            spec.base_url = u.clone();
        }
        if let Some(k) = &aux.api_key {
            spec.api_key = Some(k.expose().to_string());
        }
        spec
    }

    /// Which tools a turn on `platform` may use; `event_toolsets`, when the event's source
    /// restricts them (a webhook route), narrows that further.
    pub fn tool_filter(&self, platform: &str, event_toolsets: Option<&[String]>) -> ToolFilter {
        let mut filter = ToolFilter::default();
        if let Some(sets) = self.config.platform_toolsets.get(platform) {
            filter.enabled_toolsets = Some(sets.iter().cloned().collect());
        }
        if let Some(sets) = event_toolsets {
            let allowed: std::collections::BTreeSet<String> = sets.iter().cloned().collect();
            filter.enabled_toolsets = Some(match filter.enabled_toolsets.take() {
                Some(platform_sets) => platform_sets.intersection(&allowed).cloned().collect(),
                None => allowed,
            });
        }
        filter.disabled_toolsets.extend(self.config.agent.disabled_toolsets.iter().cloned());
        if !self.config.memory.enabled {
            filter.disabled_toolsets.insert("memory".into());
        }
        filter
    }

    /// The toolsets `filter` lets through (for prompt guidance).
    pub fn toolsets_allowed(&self, filter: &ToolFilter) -> Vec<String> {
        crate::agent::tools::TOOLSETS.iter().filter(|s| filter.allows_toolset(s)).map(|s| s.to_string()).collect()
    }

    /// The context window of `model` in tokens (configured, else a conservative default).
    pub fn context_length(&self, _model: &str) -> u64 {
        self.config.model.context_length.unwrap_or(128_000)
    }

    /// Cost of one call in USD; 0 when no price is configured for the model.
    pub fn cost_of(&self, model: &str, usage: &Usage) -> f64 {
        self.config
            .model
            .pricing
            .get(model)
            .map(|p| p.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens, usage.cache_write_tokens))
            .unwrap_or(0.0)
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
