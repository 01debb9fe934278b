//! `hermes mcp list | add | remove | test <name>`: the MCP servers of the selected HERMES_HOME;
//! `hermes mcp serve` is hermes itself as an MCP server (`super::mcp_serve`).
//! `list` reads config.yaml only (nothing connects; `env` and `headers` values are hidden unless
//! they are a `${VAR}` placeholder); `add` and `remove` rewrite the `mcp_servers` entry and keep
//! the file's other keys (a running gateway picks the change up with `/reload-mcp`); `test`
//! connects that one server, even a disabled one, in this process (its own child, never the
//! gateway's), lists its tools as the model would see them and stops it again.
//!
//! Exit 0 on success; 1 when the server is unknown or cannot be reached; 2 for bad arguments
//! (clap's usage errors, as every hermes command); 78 for an invalid configuration.

use super::{Cli, config_failure, resolve};
use crate::config::{Home, McpServerConfig, McpServers};
use crate::mcp::{McpHub, McpPaths, McpTool, ServerState, ServerStatus};
use crate::observe::redact::redact_patterns;
use clap::{ArgGroup, Args, Subcommand};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// The configured servers: transport, enabled, trust and tool filters (nothing connects;
    /// secrets are not printed).
    #[command(alias = "ls")]
    List,
    /// Add a server to config.yaml (a stdio `--command` or a streamable HTTP `--url`).
    Add(AddArgs),
    /// Remove a server from config.yaml.
    #[command(alias = "rm")]
    Remove {
        /// The server's name, as `hermes mcp list` shows it.
        name: String,
    },
    /// Connect one server (even a disabled one), list its tools and disconnect; exit 1 when it
    /// cannot be reached.
    Test {
        /// The server's name, as `hermes mcp list` shows it.
        name: String,
    },
    /// Serve the running gateway's conversations to an MCP client over stdio (list, read, wait
    /// for events, send, answer approvals); needs `mcp_serve.key` (MCP_SERVE_KEY) in the gateway.
    Serve,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("transport").required(true).args(["command", "url"])))]
pub struct AddArgs {
    /// The server's name (letters, digits, `_`, `-`, `.`); its tools are named `mcp__<name>__<tool>`.
    #[arg(value_parser = server_name)]
    pub name: String,
    /// stdio: the program to run (e.g. `npx`).
    #[arg(long)]
    pub command: Option<String>,
    /// stdio: one argument of the program (repeat for each).
    #[arg(long = "arg", value_name = "ARG", requires = "command", allow_hyphen_values = true)]
    pub args: Vec<String>,
    /// stdio: one variable of the program's environment (repeat); write secrets as `${VAR}`
    /// and keep them in .env.
    #[arg(long = "env", value_name = "KEY=VALUE", requires = "command", value_parser = pair)]
    pub env: Vec<(String, String)>,
    /// Streamable HTTP: the endpoint (often ending in `/mcp`).
    #[arg(long, value_parser = http_url)]
    pub url: Option<String>,
    /// HTTP: one header sent with every request (repeat); write secrets as `${VAR}`.
    #[arg(long = "header", value_name = "KEY=VALUE", requires = "url", value_parser = pair)]
    pub headers: Vec<(String, String)>,
    /// `untrusted`: every call to a tool the server does not mark read-only needs approval.
    #[arg(long, value_parser = ["full", "untrusted"])]
    pub trust: Option<String>,
    /// Replace an entry of the same name instead of refusing.
    #[arg(long)]
    pub replace: bool,
}

/// Why a `hermes mcp` subcommand failed (printed after "hermes: ", exit 1).
#[derive(Debug, thiserror::Error)]
enum McpCliError {
    #[error("no MCP server named `{0}` in config.yaml (`hermes mcp list` shows the configured ones)")]
    Unknown(String),
    #[error("an MCP server named `{0}` is already configured: `hermes mcp remove {0}` first, or add `--replace`")]
    Exists(String),
    #[error(transparent)]
    Persist(#[from] crate::config::PersistError),
    #[error("{0}")]
    Failed(String),
}

pub(super) fn run(cli: &Cli, command: &McpCommand) -> ExitCode {
    let resolved = match resolve(cli) {
        Ok(r) => r,
        Err(e) => return config_failure(&e),
    };
    let (home, mut config) = (resolved.home, resolved.loaded.config);
    let outcome = match command {
        McpCommand::List => Ok(list(&home, &config.mcp_servers)),
        McpCommand::Add(args) => match add(&home, &mut config, args) {
            Err(AddError::Usage(message)) => usage_error(&message),
            Err(AddError::Cli(e)) => Err(e),
            Ok(text) => Ok(text),
        },
        McpCommand::Remove { name } => remove(&home, name),
        McpCommand::Test { name } => test(&home, &config.mcp_servers, name),
        McpCommand::Serve => return super::mcp_serve::run(&home, &config.mcp_serve),
    };
    super::report(outcome)
}

/// Print a usage error the way clap does and exit with its code (2).
fn usage_error(message: &str) -> ! {
    use clap::CommandFactory;
    let mut command = Cli::command();
    let mcp = command.find_subcommand_mut("mcp").and_then(|c| c.find_subcommand_mut("add").cloned());
    mcp.unwrap_or(command).error(clap::error::ErrorKind::ValueValidation, message).exit()
}

/// `name`: letters, digits, `_`, `-` and `.`, not starting with `-`.
fn server_name(name: &str) -> Result<String, String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if ok { Ok(name.to_string()) } else { Err("use 1-64 letters, digits, `_`, `-` or `.` (e.g. `github`)".into()) }
}

/// `KEY=VALUE`, the key non-empty.
fn pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_string(), value.to_string())),
        _ => Err(format!("expected KEY=VALUE, found {text:?}")),
    }
}

fn http_url(text: &str) -> Result<String, String> {
    if text.starts_with("http://") || text.starts_with("https://") || text.starts_with("${") {
        Ok(text.to_string())
    } else {
        Err(format!("expected a URL starting with http:// or https://, found {text:?}"))
    }
}

/// `hermes mcp add` went wrong: the input (a usage error) or the file.
enum AddError {
    Usage(String),
    Cli(McpCliError),
}

/// Write the entry `args` describe, checked like config.yaml is at start.
fn add(home: &Home, config: &mut crate::config::Config, args: &AddArgs) -> Result<String, AddError> {
    if config.mcp_servers.contains_key(&args.name) && !args.replace {
        return Err(AddError::Cli(McpCliError::Exists(args.name.clone())));
    }
    let entry = McpServerConfig {
        command: args.command.clone(),
        args: args.args.clone(),
        env: args.env.iter().cloned().collect(),
        url: args.url.clone(),
        headers: args.headers.iter().cloned().collect(),
        trust: args.trust.clone(),
        ..Default::default()
    };
    config.mcp_servers.insert(args.name.clone(), entry.clone());
    config.validate().map_err(|e| AddError::Usage(e.to_string()))?;
    crate::config::write_mcp_server(&home.config_file(), &args.name, &entry).map_err(|e| AddError::Cli(e.into()))?;
    Ok(format!(
        "Added MCP server `{name}` to {}. Check it with `hermes mcp test {name}`; a running gateway picks it up with /reload-mcp.",
        home.config_file().display(),
        name = args.name
    ))
}

fn remove(home: &Home, name: &str) -> Result<String, McpCliError> {
    if !crate::config::remove_mcp_server(&home.config_file(), name)? {
        return Err(McpCliError::Unknown(name.to_string()));
    }
    Ok(format!("Removed MCP server `{name}` from {}. A running gateway drops it with /reload-mcp.", home.config_file().display()))
}

/// Every configured server, one block each.
fn list(home: &Home, servers: &McpServers) -> String {
    if servers.is_empty() {
        return format!(
            "No MCP servers in {}. Add one with `hermes mcp add <name> --command CMD [--arg A]...` or `--url URL`.",
            home.config_file().display()
        );
    }
    let mut out = format!("MCP servers in {}:\n", home.config_file().display());
    for (name, server) in servers {
        out.push_str(&describe(name, server));
    }
    out.trim_end().to_string()
}

/// One server as `list` shows it: what runs or is reached, then its settings, secrets hidden.
fn describe(name: &str, server: &McpServerConfig) -> String {
    let enabled = match server.is_enabled() {
        Ok(true) => "enabled",
        Ok(false) => "disabled",
        Err(_) => "enabled: invalid",
    };
    let trust = if server.is_untrusted() { "untrusted" } else { "full" };
    let target = match (&server.command, &server.url) {
        (Some(command), _) => {
            let line = std::iter::once(command.as_str()).chain(server.args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ");
            format!("stdio  {}", redact_patterns(&line))
        }
        (None, Some(url)) => format!("http   {}", redact_patterns(url)),
        (None, None) => "(no command or url)".to_string(),
    };
    let mut out = format!("  {name}: {target}\n      {enabled}, trust {trust}\n");
    for (label, values) in [("env", &server.env), ("headers", &server.headers)] {
        if !values.is_empty() {
            let shown: Vec<String> = values.iter().map(|(k, v)| format!("{k}={}", masked(v))).collect();
            out.push_str(&format!("      {label}: {}\n", shown.join(", ")));
        }
    }
    if let Some(include) = &server.tools.include {
        out.push_str(&format!("      tools.include: {}\n", include.join(", ")));
    }
    if !server.tools.exclude.is_empty() {
        out.push_str(&format!("      tools.exclude: {}\n", server.tools.exclude.join(", ")));
    }
    out
}

/// A value as `list` prints it: a lone `${VAR}` placeholder names a variable and is shown; any
/// other value may be a secret and is hidden.
fn masked(value: &str) -> &str {
    let placeholder = value.strip_prefix("${").and_then(|rest| rest.strip_suffix('}')).is_some_and(|inner| {
        let inner = inner.strip_prefix("env:").unwrap_or(inner);
        !inner.is_empty() && inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    });
    if placeholder { value } else { "***" }
}

/// Connect `name` alone (enabled or not), list its tools, stop it.
fn test(home: &Home, servers: &McpServers, name: &str) -> Result<String, McpCliError> {
    let Some(server) = servers.get(name) else { return Err(McpCliError::Unknown(name.to_string())) };
    // `test` is for trying a server before switching it on, too.
    let server = McpServerConfig { enabled: None, ..server.clone() };
    let one: McpServers = [(name.to_string(), server)].into_iter().collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| McpCliError::Failed(format!("cannot start the async runtime: {e}")))?;
    let probe = runtime.block_on(probe(home, one));
    let status = probe.statuses.into_iter().next();
    match status {
        Some(ServerStatus { state: ServerState::Connected, .. }) => Ok(tool_list(name, &probe.tools)),
        Some(status) => Err(McpCliError::Failed(unreachable_text(&status))),
        None => Err(McpCliError::Failed(format!("`{name}` was not started"))),
    }
}

/// What `test` prints for a connected server.
fn tool_list(name: &str, tools: &[McpTool]) -> String {
    let mut out = format!("✓ {name}: connected, {} tool(s)", tools.len());
    for tool in tools {
        let approval = if tool.needs_approval { "  (needs approval)" } else { "" };
        out.push_str(&format!("\n  {}{approval}", tool.name));
    }
    out
}

/// Why a server is not usable, for `test` and doctor.
pub(super) fn unreachable_text(status: &ServerStatus) -> String {
    let why = status.last_error.as_deref().map(redact_patterns).unwrap_or_else(|| match status.state {
        ServerState::Connecting => "no answer within its connect_timeout".into(),
        ServerState::Disabled => "it is disabled".into(),
        _ => "unreachable".into(),
    });
    format!("{}: {} — {why}", status.name, status.state.as_str())
}

/// Servers connected in this process, as far as they got.
pub(super) struct Probe {
    pub statuses: Vec<ServerStatus>,
    pub tools: Vec<McpTool>,
}

/// Connect `servers` with a hub of this process, wait until each is connected or has failed (at
/// most its `connect_timeout`, plus a moment), note what they offer and stop them. Their stderr
/// goes to `logs/mcp-cli/`, apart from the running gateway's logs.
pub(super) async fn probe(home: &Home, servers: McpServers) -> Probe {
    let longest = servers.values().map(McpServerConfig::connect_timeout).max().unwrap_or_default();
    let logs_dir = home.logs_dir().join("mcp-cli");
    if let Err(e) = std::fs::create_dir_all(&logs_dir) {
        tracing::warn!(error = %e, dir = %logs_dir.display(), "cannot create the MCP log folder");
    }
    let hub: Arc<McpHub> = McpHub::new(servers, McpPaths { logs_dir });
    let stop = CancellationToken::new();
    hub.start(stop.clone());
    let deadline = Instant::now() + longest + Duration::from_secs(2);
    while hub.status().iter().any(|s| s.state == ServerState::Connecting) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let probe = Probe { statuses: hub.status(), tools: hub.tools().as_ref().clone() };
    stop.cancel();
    hub.shutdown().await;
    probe
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_hides_secret_values_and_shows_placeholders_and_filters() {
        let yaml = r#"
gh:
  command: npx
  args: [-y, server-github, --token=ghp_abcdefghijklmnopqrstuvwxyz0123456789]
  env: {GITHUB_TOKEN: "${GITHUB_TOKEN}", LITERAL: hunter2-secret}
  tools: {include: [get_issue], exclude: ["delete_*"]}
orders:
  url: http://127.0.0.1:8000/mcp
  headers: {Authorization: "Bearer sk-live-0123456789abcdef"}
  enabled: "off"
  trust: untrusted
"#;
        let servers: McpServers = serde_yaml_ng::from_str(yaml).unwrap();
        let text = list(&Home::at("/tmp/h"), &servers);
        for expected in [
            "MCP servers in /tmp/h/config.yaml:",
            "  gh: stdio  npx -y server-github",
            "      enabled, trust full",
            "      env: GITHUB_TOKEN=${GITHUB_TOKEN}, LITERAL=***",
            "      tools.include: get_issue",
            "      tools.exclude: delete_*",
            "  orders: http   http://127.0.0.1:8000/mcp",
            "      disabled, trust untrusted",
            "      headers: Authorization=***",
        ] {
            assert!(text.lines().any(|l| l.starts_with(expected)), "{expected:?} missing:\n{text}");
        }
        for secret in ["hunter2", "sk-live", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"] {
            assert!(!text.contains(secret), "{secret} printed:\n{text}");
        }
        assert!(list(&Home::at("/tmp/h"), &McpServers::new()).starts_with("No MCP servers in /tmp/h/config.yaml"));
    }

    #[test]
    fn names_pairs_and_urls_are_checked_before_anything_is_written() {
        assert!(server_name("github").is_ok() && server_name("my-server.v2").is_ok());
        for bad in ["", "-x", "two words", "a/b", &"x".repeat(65)] {
            assert!(server_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(pair("A=b=c"), Ok(("A".into(), "b=c".into())));
        assert!(pair("novalue").is_err() && pair("=x").is_err());
        assert!(http_url("https://x/mcp").is_ok() && http_url("${MCP_URL}").is_ok());
        assert!(http_url("ftp://x").unwrap_err().contains("http:// or https://"));
    }

    #[test]
    fn a_failed_server_says_its_state_and_masked_error() {
        let status =
            |state, error: Option<&str>| ServerStatus { name: "gh".into(), state, tools: 0, last_error: error.map(str::to_string) };
        assert_eq!(unreachable_text(&status(ServerState::Down, Some("No such file or directory"))), "gh: down — No such file or directory");
        assert_eq!(unreachable_text(&status(ServerState::Connecting, None)), "gh: connecting — no answer within its connect_timeout");
        let leaked = unreachable_text(&status(ServerState::Down, Some("401 for https://x/?token=abcdef0123456789")));
        assert!(!leaked.contains("abcdef0123456789"), "{leaked}");
    }
}
