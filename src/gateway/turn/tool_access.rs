//! [`ToolAccess`]: what the agent's tools may use in a turn — which toolsets each platform
//! allows, the agent's folders and tool limits, the gateway's side of outward tools
//! ([`GatewayToolHost`]) and the approval policy for commands. A turn asks it for the tool
//! filter of its event and for the context its tools run in.

use crate::agent::approval::ApprovalPolicy;
use crate::agent::fence::Fence;
use crate::agent::tools::{AgentPaths, SessionScope, ToolContext, ToolFilter, ToolSettings};
use crate::config::{Config, PlatformToolsets};
use crate::gateway::turn::tool_host::GatewayToolHost;
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub(crate) struct ToolAccess {
    pub paths: Arc<AgentPaths>,
    pub settings: Arc<ToolSettings>,
    host: Arc<GatewayToolHost>,
    approval: Arc<dyn ApprovalPolicy>,
    /// `platform_toolsets`: the toolsets each platform may use (unlisted: all).
    platform_toolsets: PlatformToolsets,
    /// `agent.disabled_toolsets`, plus `memory` when memory is off.
    disabled_toolsets: BTreeSet<String>,
}

impl ToolAccess {
    pub(crate) fn new(
        config: &Config,
        paths: Arc<AgentPaths>,
        settings: Arc<ToolSettings>,
        host: Arc<GatewayToolHost>,
        approval: Arc<dyn ApprovalPolicy>,
    ) -> Self {
        let mut disabled_toolsets: BTreeSet<String> = config.agent.disabled_toolsets.iter().cloned().collect();
        if !config.memory.enabled {
            disabled_toolsets.insert("memory".into());
        }
        Self { paths, settings, host, approval, platform_toolsets: config.platform_toolsets.clone(), disabled_toolsets }
    }

    /// Which tools a turn on `platform` may use; `event_toolsets`, when the event's source
    /// restricts them (a webhook route), narrows that further.
    pub(crate) fn tool_filter(&self, platform: &str, event_toolsets: Option<&[String]>) -> ToolFilter {
        let mut filter = ToolFilter::default();
        if let Some(sets) = self.platform_toolsets.get(platform) {
            filter.enabled_toolsets = Some(sets.iter().cloned().collect());
        }
        if let Some(sets) = event_toolsets {
            let allowed: BTreeSet<String> = sets.iter().cloned().collect();
            filter.enabled_toolsets = Some(match filter.enabled_toolsets.take() {
                Some(platform_sets) => platform_sets.intersection(&allowed).cloned().collect(),
                None => allowed,
            });
        }
        filter.disabled_toolsets.extend(self.disabled_toolsets.iter().cloned());
        filter
    }

    /// The toolsets `filter` lets through (for prompt guidance).
    pub(crate) fn toolsets_allowed(&self, filter: &ToolFilter) -> Vec<String> {
        crate::agent::tools::TOOLSETS.iter().filter(|s| filter.allows_toolset(s)).map(|s| s.to_string()).collect()
    }

    /// The context the tools of turn `turn_id` run in, for the conversation `scope`.
    pub(crate) fn context(&self, scope: SessionScope, turn_id: &str, fence: Arc<Fence>, cancel: CancellationToken) -> ToolContext {
        ToolContext {
            scope,
            paths: self.paths.clone(),
            settings: self.settings.clone(),
            host: self.host.clone(),
            approval: self.approval.clone(),
            delegation: None,
            cancel,
            call_id: String::new(),
            turn_id: turn_id.to_string(),
            fence,
        }
    }
}
