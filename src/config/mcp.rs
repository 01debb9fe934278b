//! `mcp_servers.<name>`: the MCP servers whose tools the agent may use, as Hermes writes them
//! (stdio `command`/`args`/`env`, or streamable HTTP `url`/`headers`), and checked so a bad entry
//! names its key. `${VAR}` placeholders stay as written here: the MCP hub fills them in at connect
//! time (`crate::mcp::interpolate`), so secrets never sit in the loaded config or its logs.

use super::error::ConfigError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every configured server by name (`mcp_servers:` in config.yaml).
pub type McpServers = BTreeMap<String, McpServerConfig>;

/// Seconds one tool call may take unless `timeout` says otherwise (Hermes' `_DEFAULT_TOOL_TIMEOUT`).
pub(crate) const DEFAULT_CALL_TIMEOUT_SECS: f64 = 300.0;
/// Seconds to spawn or reach a server and finish `initialize`.
pub(crate) const DEFAULT_CONNECT_TIMEOUT_SECS: f64 = 60.0;

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
    /// When calls stop reaching the server at all.
    pub circuit_breaker: McpBreakerConfig,
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

/// `mcp_servers.<name>.circuit_breaker`: after `threshold` consecutive transport failures, calls
/// are answered at once for `cooldown` seconds (then one call may try again).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpBreakerConfig {
    /// Consecutive transport failures that open it (default 3).
    pub threshold: Option<u32>,
    /// Seconds it stays open (default 60).
    pub cooldown: Option<f64>,
}

impl McpServerConfig {
    /// Whether the server is on: a YAML bool, or Python's boolish strings (`enabled: off` is a
    /// bool in Hermes' YAML 1.1 but a string for our YAML 1.2 parser). `Err` is the complaint.
    pub fn is_enabled(&self) -> Result<bool, String> {
        use serde_yaml_ng::Value;
        match &self.enabled {
            None | Some(Value::Null) => Ok(true),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::Number(n)) if n.as_i64() == Some(0) => Ok(false),
            Some(Value::Number(n)) if n.as_i64() == Some(1) => Ok(true),
            Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => Err(format!("expected true or false (or yes/no, on/off, 1/0), found {s:?}")),
            },
            Some(other) => Err(format!("expected true or false, found {}", yaml_brief(other))),
        }
    }

    /// `untrusted` servers' write tools need approval.
    pub fn is_untrusted(&self) -> bool {
        self.trust.as_deref().is_some_and(|t| t.trim().eq_ignore_ascii_case("untrusted"))
    }

    pub fn call_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.timeout.unwrap_or(DEFAULT_CALL_TIMEOUT_SECS))
    }

    pub fn connect_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT_SECS))
    }
}

fn yaml_brief(value: &serde_yaml_ng::Value) -> String {
    serde_yaml_ng::to_string(value).map(|s| s.trim().to_string()).unwrap_or_else(|_| "a non-boolean".into())
}

/// The first problem among `mcp_servers`, naming its key (`mcp_servers.<name>.<field>`).
pub(crate) fn check_mcp_servers(servers: &McpServers) -> Result<(), ConfigError> {
    for (name, server) in servers {
        check_server(name, server)?;
    }
    Ok(())
}

fn check_server(name: &str, server: &McpServerConfig) -> Result<(), ConfigError> {
    let key = |field: &str| format!("mcp_servers.{name}.{field}");
    if name.trim().is_empty() {
        return Err(ConfigError::invalid("mcp_servers", "a server name must not be empty"));
    }
    server.is_enabled().map_err(|message| ConfigError::invalid(key("enabled"), message))?;
    match (&server.command, &server.url) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::invalid(
                format!("mcp_servers.{name}"),
                "set either `command` (a stdio server) or `url` (a streamable HTTP server), not both",
            ));
        }
        (None, None) => {
            return Err(ConfigError::invalid(
                format!("mcp_servers.{name}"),
                "set `command` (a stdio server) or `url` (a streamable HTTP server)",
            ));
        }
        (Some(command), None) if command.trim().is_empty() => {
            return Err(ConfigError::invalid(key("command"), "must not be empty"));
        }
        (None, Some(url)) if !(url.starts_with("http://") || url.starts_with("https://") || url.starts_with("${")) => {
            return Err(ConfigError::invalid(key("url"), format!("expected a URL starting with http:// or https://, found {url:?}")));
        }
        _ => {}
    }
    check_transport(&key("transport"), server.transport.as_deref())?;
    for (field, value) in [
        ("timeout", server.timeout),
        ("connect_timeout", server.connect_timeout),
        ("circuit_breaker.cooldown", server.circuit_breaker.cooldown),
    ] {
        if let Some(secs) = value
            && !(secs.is_finite() && secs > 0.0)
        {
            return Err(ConfigError::invalid(key(field), format!("expected a positive number of seconds, found {secs}")));
        }
    }
    if server.circuit_breaker.threshold == Some(0) {
        return Err(ConfigError::invalid(key("circuit_breaker.threshold"), "expected at least 1 failure, found 0"));
    }
    if let Some(trust) = &server.trust
        && !matches!(trust.trim().to_ascii_lowercase().as_str(), "full" | "untrusted")
    {
        return Err(ConfigError::invalid(key("trust"), format!("expected one of full, untrusted, found {trust:?}")));
    }
    Ok(())
}

fn check_transport(key: &str, transport: Option<&str>) -> Result<(), ConfigError> {
    match transport.map(|t| t.trim().to_ascii_lowercase()) {
        None => Ok(()),
        Some(t) if t == "streamable-http" || t == "streamable_http" || t == "http" || t == "stdio" => Ok(()),
        Some(t) if t == "sse" => Err(ConfigError::invalid(
            key,
            "the legacy HTTP+SSE transport was replaced by streamable HTTP in the 2025-03-26 MCP spec and is not \
             supported: remove `transport: sse` and point `url` at the server's streamable HTTP endpoint (often `/mcp`)",
        )),
        Some(t) => Err(ConfigError::invalid(key, format!("expected streamable-http, found {t:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(yaml: &str) -> McpServers {
        serde_yaml_ng::from_str(yaml).expect("test yaml")
    }

    fn error(yaml: &str) -> String {
        check_mcp_servers(&server(yaml)).expect_err("should be refused").to_string()
    }

    #[test]
    fn enabled_accepts_yaml_bools_and_python_boolish_strings() {
        for (text, want) in [
            ("true", true),
            ("false", false),
            ("'off'", false),
            ("'no'", false),
            ("'0'", false),
            ("'Yes'", true),
            ("'on'", true),
            ("1", true),
            ("0", false),
        ] {
            let servers = server(&format!("s: {{command: x, enabled: {text}}}"));
            assert_eq!(servers["s"].is_enabled(), Ok(want), "enabled: {text}");
        }
        assert_eq!(server("s: {command: x}")["s"].is_enabled(), Ok(true));
        assert!(error("s: {command: x, enabled: maybe}").contains("`mcp_servers.s.enabled`"));
    }

    #[test]
    fn each_bad_entry_kind_names_its_key() {
        let cases = [
            ("s: {url: 'http://h/sse', transport: sse}", "`mcp_servers.s.transport`"),
            ("s: {command: x, url: 'http://h'}", "`mcp_servers.s`"),
            ("s: {args: [a]}", "`mcp_servers.s`"),
            ("s: {command: x, timeout: 0}", "`mcp_servers.s.timeout`"),
            ("s: {command: x, connect_timeout: -1}", "`mcp_servers.s.connect_timeout`"),
            ("s: {command: x, trust: partial}", "`mcp_servers.s.trust`"),
            ("s: {command: x, circuit_breaker: {threshold: 0}}", "`mcp_servers.s.circuit_breaker.threshold`"),
            ("s: {url: 'ftp://h'}", "`mcp_servers.s.url`"),
            ("'': {command: x}", "`mcp_servers`"),
        ];
        for (yaml, key) in cases {
            let message = error(yaml);
            assert!(message.contains(key), "{yaml}: {message}");
        }
    }

    #[test]
    fn sse_refusal_explains_the_streamable_http_replacement() {
        let message = error("s: {url: 'http://h/sse', transport: sse}");
        assert!(message.contains("2025-03-26") && message.contains("streamable HTTP") && message.contains("`url`"), "{message}");
    }

    #[test]
    fn loading_a_config_with_a_bad_server_fails_with_the_key_and_exit_78() {
        let yaml = "mcp_servers:\n  orders:\n    url: http://127.0.0.1:9/sse\n    transport: sse\n";
        let err = super::super::load_str(yaml, std::path::Path::new("config.yaml"), &super::super::Env::default())
            .map(|l| l.config)
            .expect_err("sse refused");
        assert!(matches!(&err, ConfigError::Invalid { key, .. } if key == "mcp_servers.orders.transport"), "{err}");
        assert!(err.to_string().starts_with("invalid config: `mcp_servers.orders.transport`: the legacy HTTP+SSE transport"), "{err}");
    }

    #[test]
    fn good_entries_pass_with_hermes_defaults() {
        let servers = server(
            "a: {command: npx, args: [-y, pkg], env: {K: v}}\nb: {url: 'https://h/mcp', headers: {Authorization: 'Bearer ${T}'}, trust: untrusted}",
        );
        check_mcp_servers(&servers).expect("valid");
        assert_eq!(servers["a"].call_timeout().as_secs(), 300);
        assert_eq!(servers["a"].connect_timeout().as_secs(), 60);
        assert!(servers["b"].is_untrusted() && !servers["a"].is_untrusted());
    }
}
