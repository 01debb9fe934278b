//! `${VAR}` and `${env:VAR}` in a server's strings, from HERMES_HOME's `.env` then the process
//! environment, done at connect time so the filled-in values (often secrets) live only in the
//! connection. An unset variable keeps its placeholder; its name (never a value) is warned about.

use crate::config::{Env, McpServerConfig};

/// `text` with its placeholders filled from `env`; names of unset variables are pushed to `unset`.
pub(crate) fn fill(text: &str, env: &Env, unset: &mut Vec<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        let name = inner.strip_prefix("env:").unwrap_or(inner).trim();
        match env.get(name) {
            Some(value) if !name.is_empty() => out.push_str(value),
            _ => {
                unset.push(name.to_string());
                out.push_str(&rest[start..start + 3 + end]);
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Every string of `server` filled (command, args, env values, url, headers).
pub(crate) fn fill_server(name: &str, server: &McpServerConfig, env: &Env) -> McpServerConfig {
    let mut unset = Vec::new();
    let mut filled = server.clone();
    filled.command = server.command.as_deref().map(|c| fill(c, env, &mut unset));
    filled.args = server.args.iter().map(|a| fill(a, env, &mut unset)).collect();
    filled.env = server.env.iter().map(|(k, v)| (k.clone(), fill(v, env, &mut unset))).collect();
    filled.url = server.url.as_deref().map(|u| fill(u, env, &mut unset));
    filled.headers = server.headers.iter().map(|(k, v)| (k.clone(), fill(v, env, &mut unset))).collect();
    unset.sort();
    unset.dedup();
    if !unset.is_empty() {
        tracing::warn!(server = name, variables = ?unset, "MCP server config names unset variables; their placeholders are kept as written");
    }
    filled
}
