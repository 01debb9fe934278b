//! [`ToolAccess`]: what the agent's tools may use in a turn — which toolsets each platform
//! allows, the agent's folders and tool limits, the gateway's side of outward tools
//! ([`GatewayToolHost`]) and the approval policy for commands and MCP tool calls. A turn asks it
//! for the tool filter of its event and for the context its tools run in.
//!
//! MCP servers are toolsets too (`mcp-<server>`, or the bare server name): on every platform
//! unless `platform_toolsets.<platform>` names servers (then only those) or `no_mcp` (none); a
//! restriction an event carries (a webhook route's, a cron job's `toolsets`) lets through only
//! the servers it names; `agent.disabled_toolsets` may switch one off everywhere.

use crate::agent::approval::ApprovalPolicy;
use crate::agent::fence::Fence;
use crate::agent::tools::mcp::{McpSource, servers_down_note};
use crate::agent::tools::{AgentPaths, McpAllow, SessionScope, ToolContext, ToolFilter, ToolSettings};
use crate::config::{Config, McpServers, PlatformToolsets, ToolsetName, mcp_toolset, resolve_toolset};
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
    /// `agent.disabled_toolsets` (MCP servers as `mcp-<server>`), plus `memory` when memory is off.
    disabled_toolsets: BTreeSet<String>,
    /// The configured MCP servers, to read toolset names against.
    mcp_servers: McpServers,
    /// The MCP hub behind the agent's MCP tools, for the servers' state in the prompt.
    mcp: Option<Arc<dyn McpSource>>,
}

/// What a list of toolset names lets through.
struct Named {
    builtin: BTreeSet<String>,
    mcp: McpAllow,
}

impl ToolAccess {
    pub(crate) fn new(
        config: &Config,
        paths: Arc<AgentPaths>,
        settings: Arc<ToolSettings>,
        host: Arc<GatewayToolHost>,
        approval: Arc<dyn ApprovalPolicy>,
    ) -> Self {
        let mcp_servers = config.mcp_servers.clone();
        let mut disabled_toolsets: BTreeSet<String> = config
            .agent
            .disabled_toolsets
            .iter()
            .map(|set| match resolve_toolset(set, &mcp_servers) {
                ToolsetName::McpServer(server) => mcp_toolset(server),
                _ => set.clone(),
            })
            .collect();
        if !config.memory.enabled {
            disabled_toolsets.insert("memory".into());
        }
        let platform_toolsets = config.platform_toolsets.clone();
        Self { paths, settings, host, approval, platform_toolsets, disabled_toolsets, mcp_servers, mcp: None }
    }

    /// This access with the MCP hub the agent's MCP tools come from.
    pub(crate) fn with_mcp(mut self, mcp: Option<Arc<dyn McpSource>>) -> Self {
        self.mcp = mcp;
        self
    }

    /// Which tools a turn on `platform` may use; `event_toolsets`, when the event's source
    /// restricts them (a webhook route, a cron job), narrows that further.
    pub(crate) fn tool_filter(&self, platform: &str, event_toolsets: Option<&[String]>) -> ToolFilter {
        let mut filter = ToolFilter::default();
        if let Some(sets) = self.platform_toolsets.get(platform) {
            // A platform's list names the built-in toolsets it gets; MCP servers only when it names some.
            let named = self.named(sets, McpAllow::All);
            filter.enabled_toolsets = Some(named.builtin);
            filter.mcp = named.mcp;
        }
        if let Some(sets) = event_toolsets {
            // A restriction lets through only what it names, MCP servers included.
            let named = self.named(sets, McpAllow::None);
            filter.enabled_toolsets = Some(match filter.enabled_toolsets.take() {
                Some(platform_sets) => platform_sets.intersection(&named.builtin).cloned().collect(),
                None => named.builtin,
            });
            filter.mcp = std::mem::take(&mut filter.mcp).narrowed(named.mcp);
        }
        filter.disabled_toolsets.extend(self.disabled_toolsets.iter().cloned());
        filter
    }

    /// The built-in toolsets and MCP servers `sets` names; `unnamed` when it names no server.
    fn named(&self, sets: &[String], unnamed: McpAllow) -> Named {
        let (mut builtin, mut servers, mut no_mcp) = (BTreeSet::new(), BTreeSet::new(), false);
        for set in sets {
            match resolve_toolset(set, &self.mcp_servers) {
                ToolsetName::Builtin(name) => {
                    builtin.insert(name.to_string());
                }
                ToolsetName::McpServer(server) => {
                    servers.insert(server.to_string());
                }
                ToolsetName::NoMcp => no_mcp = true,
                // Validation refuses unknown names in config; a job's own list may hold stale ones.
                ToolsetName::Unknown => {}
            }
        }
        let mcp = match (no_mcp, servers.is_empty()) {
            (true, _) => McpAllow::None,
            (false, true) => unnamed,
            (false, false) => McpAllow::Only(servers),
        };
        Named { builtin, mcp }
    }

    /// The toolsets `filter` lets through (for prompt guidance): the built-in ones, then each
    /// enabled MCP server's.
    pub(crate) fn toolsets_allowed(&self, filter: &ToolFilter) -> Vec<String> {
        let builtin = crate::agent::tools::TOOLSETS.iter().filter(|s| filter.allows_toolset(s)).map(|s| s.to_string());
        let enabled = self.mcp_servers.iter().filter(|(_, config)| config.is_enabled().unwrap_or(false));
        let mcp = enabled.map(|(server, _)| server).filter(|server| filter.allows_mcp_server(server)).map(|server| mcp_toolset(server));
        builtin.chain(mcp).collect()
    }

    /// What the model is told about MCP servers `filter` allows that are not connected (one
    /// line each), so it neither waits for their tools nor improvises them; `None` when all are up.
    pub(crate) fn mcp_note(&self, filter: &ToolFilter) -> Option<String> {
        let note = servers_down_note(self.mcp.as_deref()?, filter)?;
        Some(self.settings.secrets.scrub(&note))
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
            // Issue 37: the turn sets this when its model does not see images (`vision_analyze`).
            vision: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::agent::tools::McpAllow;
    use crate::config::Config;
    use crate::gateway::tests::support::{NoModel, RecordingChat, gateway};
    use std::collections::BTreeSet;
    use std::path::Path;
    use std::sync::Arc;

    const SERVERS: &str =
        "mcp_servers:\n  fs:\n    command: node\n  every-thing:\n    command: node\n  off:\n    command: node\n    enabled: false\n";

    fn only(servers: &[&str]) -> McpAllow {
        McpAllow::Only(servers.iter().map(|s| s.to_string()).collect())
    }

    #[tokio::test]
    async fn mcp_servers_are_toolsets_on_every_platform_unless_named_or_no_mcp() {
        let yaml = format!(
            "{SERVERS}platform_toolsets:\n  telegram: [terminal, no_mcp]\n  discord: [file, mcp-fs]\n  slack: [terminal]\n  matrix: [every-thing, fs]\n"
        );
        let env = crate::config::Env::from_pairs(Vec::<(String, String)>::new());
        let config: Config = crate::config::load_str(&yaml, Path::new("config.yaml"), &env).unwrap().config;
        let (_dir, gateway) = gateway(config, RecordingChat::new(), Arc::new(NoModel)).await;
        let tools = &gateway.turns().tools;
        let webhook_route = ["terminal".to_string(), "mcp-every-thing".to_string()];
        for (platform, event, mcp, builtin) in [
            ("email", None, McpAllow::All, None),
            ("telegram", None, McpAllow::None, Some(vec!["terminal"])),
            ("discord", None, only(&["fs"]), Some(vec!["file"])),
            ("slack", None, McpAllow::All, Some(vec!["terminal"])),
            ("matrix", None, only(&["every-thing", "fs"]), Some(vec![])),
            // A route's (or a cron job's) list lets through only the servers it names.
            ("webhook", Some(&webhook_route[..]), only(&["every-thing"]), Some(vec!["terminal"])),
            ("webhook", Some(&webhook_route[..1]), McpAllow::None, Some(vec!["terminal"])),
            ("discord", Some(&webhook_route[..]), only(&[]), Some(vec![])),
        ] {
            let filter = tools.tool_filter(platform, event);
            assert_eq!(filter.mcp, mcp, "{platform} {event:?}");
            let want: Option<BTreeSet<String>> = builtin.map(|b| b.into_iter().map(String::from).collect());
            assert_eq!(filter.enabled_toolsets, want, "{platform} {event:?}");
        }
        let email = tools.tool_filter("email", None);
        let mcp_sets: Vec<String> = tools.toolsets_allowed(&email).into_iter().filter(|s| s.starts_with("mcp-")).collect();
        assert_eq!(mcp_sets, ["mcp-every-thing", "mcp-fs"], "a disabled server is no toolset in the prompt");
        assert_eq!(tools.toolsets_allowed(&tools.tool_filter("telegram", None)), ["terminal"]);
        assert_eq!(tools.toolsets_allowed(&tools.tool_filter("discord", None)), ["file", "mcp-fs"]);
    }

    #[tokio::test]
    async fn disabled_toolsets_switch_a_server_off_by_either_name_and_cron_follows() {
        let yaml = format!("{SERVERS}agent:\n  disabled_toolsets: [fs]\nplatform_toolsets:\n  cron: [terminal, mcp-every-thing]\n");
        let env = crate::config::Env::from_pairs(Vec::<(String, String)>::new());
        let config: Config = crate::config::load_str(&yaml, Path::new("config.yaml"), &env).unwrap().config;
        let (_dir, gateway) = gateway(config, RecordingChat::new(), Arc::new(NoModel)).await;
        let tools = &gateway.turns().tools;
        let everywhere = tools.tool_filter("email", None);
        assert!(!everywhere.allows_mcp_server("fs") && everywhere.allows_mcp_server("every-thing"));
        let cron = tools.tool_filter("cron", None);
        assert!(cron.allows_mcp_server("every-thing") && !cron.allows_mcp_server("fs"));
        let job = ["terminal".to_string()];
        assert!(!tools.tool_filter("cron", Some(&job)).allows_mcp_server("every-thing"), "a job's own list names no server");
        let sub_agent = everywhere.clone().without_toolsets(&["delegation", "clarify"]);
        assert_eq!(sub_agent.mcp, everywhere.mcp, "a sub-agent keeps its parent's MCP servers");
    }
}
