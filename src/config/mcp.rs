//! `mcp_servers.<name>`: the MCP servers whose tools the agent may use, as Hermes writes them
//! (stdio `command`/`args`/`env`, or streamable HTTP `url`/`headers`), with `${VAR}` taken from
//! `.env` and the environment, and checked so a bad entry names its key.
//!
//! SKELETON (issue 36): the fields are fixed; parsing details, interpolation and validation are
//! filled in by the MCP client work.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every configured server by name (`mcp_servers:` in config.yaml).
pub type McpServers = BTreeMap<String, McpServerConfig>;

/// One `mcp_servers.<name>` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpServerConfig {
    /// stdio: the executable.
    pub command: Option<String>,
    /// stdio: its arguments.
    pub args: Vec<String>,
    /// stdio: environment added to the safe list the child gets.
    pub env: BTreeMap<String, String>,
    /// HTTP: the streamable HTTP endpoint.
    pub url: Option<String>,
    /// HTTP: headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// HTTP: `streamable-http` (default) or the legacy `sse`.
    pub transport: Option<String>,
    /// `false` (or a boolish string: `false`, `0`, `no`, `off`) keeps the server off.
    pub enabled: Option<serde_yaml_ng::Value>,
    /// Seconds one tool call may take (default 300).
    pub timeout: Option<f64>,
    /// Seconds to connect and initialise (default 60).
    pub connect_timeout: Option<f64>,
    pub tools: McpToolsConfig,
    /// `full` (default) or `untrusted`: calls to tools not marked read-only need approval.
    pub trust: Option<String>,
}

/// `mcp_servers.<name>.tools`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpToolsConfig {
    /// Only these tools (original names or globs); wins over `exclude`.
    pub include: Option<Vec<String>>,
    /// Never these tools (original names or globs).
    pub exclude: Vec<String>,
    /// The resource utility tools (default on where the server offers resources).
    pub resources: Option<bool>,
    /// The prompt utility tools (default on where the server offers prompts).
    pub prompts: Option<bool>,
}
