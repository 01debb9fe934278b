//! `mcp_serve`: the gateway's own MCP server (`hermes mcp serve`), which lets another MCP client
//! read the gateway's conversations, send into them and answer its approvals. It is served only
//! when a key is set, and the key is its own (`MCP_SERVE_KEY`), not the API server's: the API
//! server's key lets a client talk to the agent in its own sessions, this one reads every user's
//! chat and approves shell commands, so holding one must not grant the other.

use super::de::opt_stringish;
use super::env::Env;
use super::error::ConfigError;
use super::secret::{self, Secret};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// The port served on when only a key is given.
pub const DEFAULT_MCP_SERVE_PORT: u16 = 8645;
/// The variable the key may come from (it wins over the file, as every variable does).
pub const MCP_SERVE_KEY_VAR: &str = "MCP_SERVE_KEY";

/// `mcp_serve:` in config.yaml.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpServeConfig {
    /// Where to listen; loopback unless the operator chooses otherwise (the key is always needed).
    #[serde(deserialize_with = "opt_stringish")]
    pub host: Option<String>,
    pub port: Option<u16>,
    /// The bearer key every request must carry; nothing is served without one.
    #[serde(deserialize_with = "secret::optional")]
    pub key: Option<Secret>,
}

/// Where and behind what the MCP server listens, once checked.
#[derive(Clone, Debug)]
pub struct McpServeListen {
    pub host: IpAddr,
    pub port: u16,
    pub key: Secret,
}

impl McpServeConfig {
    /// The key from [`MCP_SERVE_KEY_VAR`] replaces the file's.
    pub(crate) fn apply_env(&mut self, env: &Env) {
        if let Some(key) = env.get(MCP_SERVE_KEY_VAR).map(str::trim).filter(|k| !k.is_empty()) {
            self.key = Some(Secret::new(key));
        }
    }

    /// Whether it is served, and where; `None` without a key. Call after [`Self::check`].
    pub fn listen(&self) -> Option<McpServeListen> {
        let key = self.key.clone().filter(|k| !k.expose().trim().is_empty())?;
        let host = self.host.as_deref().unwrap_or("127.0.0.1").parse().ok()?;
        Some(McpServeListen { host, port: self.port.unwrap_or(DEFAULT_MCP_SERVE_PORT), key })
    }

    /// The first problem, naming its key: a host that is not an address, port 0, a guessable key,
    /// or a host or port set without a key (which would silently serve nothing).
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if let Some(host) = &self.host
            && host.parse::<IpAddr>().is_err()
        {
            return Err(ConfigError::invalid("mcp_serve.host", format!("expected an IP address such as 127.0.0.1, found {host:?}")));
        }
        if self.port == Some(0) {
            return Err(ConfigError::invalid("mcp_serve.port", "expected a port number 1-65535, found 0"));
        }
        match self.key.as_ref().map(|k| k.expose().trim()).filter(|k| !k.is_empty()) {
            Some(key) => hermes_http_guard::check_secret(key).map_err(|why| {
                ConfigError::invalid(
                    "mcp_serve.key",
                    format!("the key is refused: {why}. Generate one with `openssl rand -hex 32` and set {MCP_SERVE_KEY_VAR}"),
                )
            }),
            None if self.host.is_some() || self.port.is_some() => Err(ConfigError::invalid(
                "mcp_serve.key",
                format!("mcp_serve has a host or port but no key, so nothing would be served; set {MCP_SERVE_KEY_VAR}"),
            )),
            None => Ok(()),
        }
    }

    /// The key, for the log redactor.
    pub(crate) fn secret(&self) -> Option<&str> {
        self.key.as_ref().map(Secret::expose).filter(|k| !k.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(yaml: &str) -> McpServeConfig {
        serde_yaml_ng::from_str(yaml).expect("valid yaml")
    }

    fn refusal(yaml: &str) -> String {
        parsed(yaml).check().expect_err("should be refused").to_string()
    }

    #[test]
    fn nothing_is_served_without_a_key_and_a_key_alone_serves_on_loopback() {
        assert!(parsed("{}").listen().is_none());
        let listen = parsed("key: 3f9a1c77e2b04d58a6e1").listen().expect("served");
        assert_eq!((listen.host.to_string(), listen.port), ("127.0.0.1".to_string(), DEFAULT_MCP_SERVE_PORT));
    }

    #[test]
    fn the_variable_wins_over_the_file() {
        let mut config = parsed("key: 3f9a1c77e2b04d58a6e1");
        config.apply_env(&Env::from_pairs([(MCP_SERVE_KEY_VAR, "9b2e6d41c0a8f7735e19")]));
        assert_eq!(config.listen().expect("served").key.expose(), "9b2e6d41c0a8f7735e19");
    }

    #[test]
    fn bad_entries_name_their_key_and_never_print_the_key() {
        assert!(refusal("key: change-me-change-me").contains("`mcp_serve.key`"));
        assert!(!refusal("key: change-me-change-me").contains("change-me-change-me"));
        assert!(refusal("key: short").contains("at least 16"));
        assert!(refusal("port: 9000").contains("no key"));
        assert!(refusal("{host: localhost, key: 3f9a1c77e2b04d58a6e1}").contains("`mcp_serve.host`"));
        assert!(refusal("{port: 0, key: 3f9a1c77e2b04d58a6e1}").contains("`mcp_serve.port`"));
        assert!(serde_yaml_ng::from_str::<McpServeConfig>("prot: 9000").is_err(), "a misspelt key is refused");
    }
}
