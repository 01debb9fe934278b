//! MCP servers' tools for the agent: one supervised session per configured server (stdio child
//! or streamable HTTP), connected in the background, reconnected forever with capped backoff, and
//! its tools offered under stable names (`mcp__<server>__<tool>`) whether or not the server is up
//! at the moment. Knows no agent and no gateway: the agent's tool registry asks [`McpHub`] for
//! its tools and calls; the gateway starts it, reloads it and reads its status.
//!
//! SKELETON (issue 36): the API below is fixed for the gateway and agent work; the bodies are
//! filled in by the MCP client work.

use crate::config::McpServers;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// One MCP tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// `mcp__<server>__<tool>`, `[A-Za-z0-9_]`, at most 64 characters.
    pub name: String,
    /// The configured server name.
    pub server: String,
    /// `mcp-<server>`.
    pub toolset: String,
    /// The server's own name for the tool.
    pub original: String,
    /// Description, cleaned (Unicode tag characters stripped).
    pub description: String,
    /// The input schema, repaired for providers.
    pub parameters: Value,
    /// The server says the tool only reads (`readOnlyHint: true`).
    pub read_only: bool,
    /// The server is `trust: untrusted` and the tool is not read-only: a person approves each call.
    pub needs_approval: bool,
}

/// What a call returned, as the model reads it (a JSON string: `{"result": …}` or `{"error": …}`).
#[derive(Debug, Clone, PartialEq)]
pub struct McpOutcome {
    pub content: String,
    pub is_error: bool,
}

/// Where a server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// `enabled: false`.
    Disabled,
    /// Not yet connected since start (or reload).
    Connecting,
    Connected,
    /// Was connected or tried; reconnecting with backoff.
    Down,
}

impl ServerState {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Disabled => "disabled",
            ServerState::Connecting => "connecting",
            ServerState::Connected => "connected",
            ServerState::Down => "down",
        }
    }
}

/// One server's state for `/status`, `hermes gateway status`, `/readyz` and `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerStatus {
    pub name: String,
    pub state: ServerState,
    /// Tools registered from it (kept while it is down).
    pub tools: usize,
    /// The last connection or transport error, credentials redacted.
    pub last_error: Option<String>,
}

/// What `/reload-mcp` changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReloadReport {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Kept, torn down and connected again (changed or not).
    pub reconnected: Vec<String>,
    /// Tools now registered, and from how many servers.
    pub tools: usize,
    pub servers: usize,
}

/// Where the hub keeps what it writes.
#[derive(Debug, Clone)]
pub struct McpPaths {
    /// `HERMES_HOME/logs`: each server's stderr goes to `mcp-<server>.log`, rotated.
    pub logs_dir: PathBuf,
}

/// Every configured MCP server, supervised.
pub struct McpHub {
    servers: std::sync::Mutex<McpServers>,
    #[allow(dead_code)]
    paths: McpPaths,
}

impl McpHub {
    /// A hub for `servers`; nothing connects until [`McpHub::start`].
    pub fn new(servers: McpServers, paths: McpPaths) -> Arc<Self> {
        Arc::new(Self { servers: std::sync::Mutex::new(servers), paths })
    }

    /// Connect every enabled server in the background; returns at once. `stop` ends the
    /// supervisors (then call [`McpHub::shutdown`] to reap the children).
    pub fn start(self: &Arc<Self>, _stop: CancellationToken) {}

    /// The tools registered now, sorted by name. Cheap: a shared snapshot.
    pub fn tools(&self) -> Arc<Vec<McpTool>> {
        Arc::new(Vec::new())
    }

    /// Bumped whenever [`McpHub::tools`] changes (a server connected, listed anew, reloaded).
    pub fn generation(&self) -> u64 {
        0
    }

    /// Check `arguments` against the tool's input schema: `Err` names what is wrong.
    pub fn validate(&self, name: &str, _arguments: &Value) -> Result<(), String> {
        Err(format!("unknown MCP tool `{name}`"))
    }

    /// Call tool `name` (prefixed) with `arguments`: validated first, bounded by the server's
    /// `timeout`, ended early by `cancel`. Never blocks on a server that is down.
    pub async fn call(&self, name: &str, _arguments: Value, _cancel: &CancellationToken) -> McpOutcome {
        McpOutcome { content: serde_json::json!({ "error": format!("unknown MCP tool `{name}`") }).to_string(), is_error: true }
    }

    /// Every configured server's state, sorted by name.
    pub fn status(&self) -> Vec<ServerStatus> {
        let servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        servers.keys().map(|name| ServerStatus { name: name.clone(), state: ServerState::Connecting, tools: 0, last_error: None }).collect()
    }

    /// Replace the configuration: tear down every server, connect the new set; reports what
    /// changed once the new set has connected or failed (bounded by `connect_timeout`).
    pub async fn reload(&self, servers: McpServers) -> ReloadReport {
        *self.servers.lock().unwrap_or_else(|p| p.into_inner()) = servers;
        ReloadReport::default()
    }

    /// Stop every server: close, kill each child's process group and reap it.
    pub async fn shutdown(&self) {}
}
