//! What the model reads back from an MCP call, shaped as Hermes shapes it (`{"result": …}` or
//! `{"error": …}`), with Unicode tag characters stripped (hidden prompt injection) and
//! credentials redacted from every error; and the fixed answers for a server that is down or
//! whose breaker is open. What the server said is marked ([`server_words`]) so the tool registry
//! fences exactly those words as untrusted, and none of hermes' own around them.

use serde_json::{Value, json};
use std::sync::LazyLock;

/// `text` without Unicode tag characters (U+E0000–U+E007F), which render as nothing but a model reads.
pub(crate) fn strip_tags(text: &str) -> String {
    text.chars().filter(|c| !('\u{E0000}'..='\u{E007F}').contains(c)).collect()
}

static SECRETS: LazyLock<Vec<(regex::Regex, &'static str)>> = LazyLock::new(|| {
    [
        (r"ghp_[A-Za-z0-9]{4,}|github_pat_[A-Za-z0-9_]{4,}", "[REDACTED]"),
        (r"sk-[A-Za-z0-9_\-]{4,}", "[REDACTED]"),
        (r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]+", "${1}[REDACTED]"),
        // Stops at the untrusted-text markers too, so a redacted value never swallows a mark's end.
        (r"(?i)((?:token|key|password|secret)=)[^\s&,;\x{E000}\x{E001}]+", "${1}[REDACTED]"),
    ]
    .into_iter()
    // The patterns are constants checked by the redaction tests.
    .filter_map(|(pattern, with)| regex::Regex::new(pattern).ok().map(|re| (re, with)))
    .collect()
});

/// `text` with credential-shaped values replaced by `[REDACTED]`.
pub(crate) fn redact(text: &str) -> String {
    SECRETS.iter().fold(text.to_string(), |acc, (re, with)| re.replace_all(&acc, *with).into_owned())
}

/// `text`, which the server sent (a result, an error message, a reason it gave), marked as
/// untrusted (see [`hermes_adapter::untrusted`]): the registry fences the marked stretch and
/// leaves hermes' own words around it as they are. Markers inside `text` are dropped, so the
/// server cannot end its mark early.
pub(crate) fn server_words(text: &str) -> String {
    hermes_adapter::untrusted::mark(text)
}

/// `{"error": <redacted, cleaned message>}`.
pub(crate) fn error_json(message: &str) -> String {
    json!({ "error": redact(&strip_tags(message)) }).to_string()
}

/// One content block of a result, reduced to what the model reads now.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Block {
    Text(String),
    /// An image (or audio) kept as a note until images reach the model.
    Media {
        kind: &'static str,
        mime: String,
        bytes: usize,
    },
    /// A resource or link: its text if embedded, else its URI.
    Resource(String),
}

/// A tool result as `(content JSON, is_error)`.
pub(crate) fn shape(blocks: &[Block], structured: Option<&Value>, is_error: bool) -> (String, bool) {
    let text = blocks
        .iter()
        .map(|block| match block {
            Block::Text(t) | Block::Resource(t) => strip_tags(t),
            Block::Media { kind, mime, bytes } => format!("[{kind}: {mime}, {bytes} bytes]"),
        })
        .collect::<Vec<_>>()
        .join("\n");
    if is_error {
        let message = if text.is_empty() { "the MCP tool reported an error".to_string() } else { server_words(&text) };
        return (error_json(&message), true);
    }
    let structured = structured.map(clean_value);
    let content = match structured {
        Some(structured) if text.is_empty() => json!({ "result": structured }),
        Some(structured) => json!({ "result": text, "structuredContent": structured }),
        None => json!({ "result": text }),
    };
    (content.to_string(), false)
}

/// `value` with tag characters stripped from every string in it.
fn clean_value(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(strip_tags(s)),
        Value::Array(items) => Value::Array(items.iter().map(clean_value).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (strip_tags(k), clean_value(v))).collect()),
        other => other.clone(),
    }
}

/// The answer while a server is not connected: at once, never a wait.
pub(crate) fn not_connected(server: &str, last_error: Option<&str>) -> String {
    // The last error may quote the server (a JSON-RPC error from initialize, an HTTP body).
    let cause = last_error.map(|e| format!("; last error: {}", server_words(e))).unwrap_or_default();
    error_json(&format!(
        "MCP server '{server}' is not connected (reconnecting{cause}). Do not retry this tool now; use alternative \
         approaches or tell the user the MCP server is unavailable."
    ))
}

/// Hermes' answer while the breaker is open.
pub(crate) fn breaker_open(server: &str, failures: u32, seconds_left: u64) -> String {
    error_json(&format!(
        "MCP server '{server}' is unreachable after {failures} consecutive failures. Auto-retry available in ~{seconds_left}s. \
         Do NOT retry this tool yet — use alternative approaches or ask the user to check the MCP server."
    ))
}
