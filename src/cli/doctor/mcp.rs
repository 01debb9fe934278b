//! Every enabled MCP server, connected the way the gateway connects it (in this process, apart
//! from a running gateway's children) and asked for its tools within its `connect_timeout`: one
//! line per server, a fix under each that fails. All of them are tried at once, so a slow server
//! costs its own timeout, not the sum.

use super::report::Report;
use crate::cli::mcp_cmd::{probe, unreachable_text};
use crate::config::{Config, Home, McpServers};
use crate::mcp::ServerState;

pub(super) async fn check(report: &mut Report, config: &Config, home: &Home) {
    let enabled: McpServers =
        config.mcp_servers.iter().filter(|(_, s)| s.is_enabled().unwrap_or(true)).map(|(n, s)| (n.clone(), s.clone())).collect();
    if enabled.is_empty() {
        return;
    }
    let probe = probe(home, enabled).await;
    for status in &probe.statuses {
        let tools = probe.tools.iter().filter(|t| t.server == status.name).count();
        match status.state {
            ServerState::Connected => report.ok(&format!("mcp {}: connected, {tools} tool(s)", status.name)),
            _ => report.fail(
                &format!("mcp {}", unreachable_text(status)),
                &format!(
                    "check mcp_servers.{name} in config.yaml (`hermes mcp test {name}` shows the details; the server's own errors are in {})",
                    home.logs_dir().join("mcp-cli").join(format!("mcp-{}.log", status.name)).display(),
                    name = status.name
                ),
            ),
        }
    }
}
