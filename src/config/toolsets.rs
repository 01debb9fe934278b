//! The toolset names config may mention (`agent.disabled_toolsets`, `platform_toolsets`, a
//! platform's `toolsets`), and which of them act outside the conversation (for the audit). The
//! names are plain data owned here so that validation needs no tool code; `agent::tools` checks
//! in a test that its built-in tools declare exactly these. Beside them: `no_mcp`, and each MCP
//! server's toolset, `mcp-<server>` (or the bare server name), resolved by [`resolve_toolset`].

/// Every toolset name a built-in tool declares (a test in `agent::tools` checks both ways).
pub const TOOLSETS: &[&str] =
    &["terminal", "file", "memory", "session_search", "messaging", "skills", "clarify", "delegation", "cronjob", "vision"];

/// The toolsets whose tools only read the conversation's own world or ask its user; every other
/// toolset acts outside it (runs commands, writes files, sends messages, changes memory or
/// skills, starts other agents). A new toolset therefore counts as acting until it is listed
/// here, so the audit flags it where strangers could reach it rather than forgetting it.
pub(crate) const QUIET_TOOLSETS: &[&str] = &["session_search", "clarify", "cronjob", "vision"];

/// Whether `toolset`'s tools act outside the conversation (see [`QUIET_TOOLSETS`]).
pub fn toolset_acts(toolset: &str) -> bool {
    !QUIET_TOOLSETS.contains(&toolset)
}

/// The `platform_toolsets` entry that takes every MCP server's tools off that platform.
pub(crate) const NO_MCP: &str = "no_mcp";

/// The toolset of MCP server `server` (`mcp_servers.<server>`).
pub(crate) fn mcp_toolset(server: &str) -> String {
    format!("mcp-{server}")
}

/// What a toolset name in config stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolsetName<'a> {
    /// One of [`TOOLSETS`].
    Builtin(&'a str),
    /// [`NO_MCP`].
    NoMcp,
    /// A configured MCP server, named as `mcp-<server>` or by its bare name; the server's name.
    McpServer(&'a str),
    Unknown,
}

/// Read `name` against the built-in toolsets and the configured MCP servers `servers` (a
/// built-in name wins over a server of the same name; that server is still `mcp-<name>`).
pub(crate) fn resolve_toolset<'a>(name: &'a str, servers: &'a super::McpServers) -> ToolsetName<'a> {
    if let Some(builtin) = TOOLSETS.iter().find(|s| **s == name) {
        return ToolsetName::Builtin(builtin);
    }
    if name == NO_MCP {
        return ToolsetName::NoMcp;
    }
    if let Some((server, _)) = servers.get_key_value(name) {
        return ToolsetName::McpServer(server);
    }
    match name.strip_prefix("mcp-").and_then(|bare| servers.get_key_value(bare)) {
        Some((server, _)) => ToolsetName::McpServer(server),
        None => ToolsetName::Unknown,
    }
}

/// Every toolset name config may use with `servers` configured, for error messages.
pub(crate) fn known_toolsets(servers: &super::McpServers) -> String {
    let mut known: Vec<String> = TOOLSETS.iter().map(|s| s.to_string()).collect();
    known.push(NO_MCP.to_string());
    known.extend(servers.keys().map(|s| mcp_toolset(s)));
    known.join(", ")
}
