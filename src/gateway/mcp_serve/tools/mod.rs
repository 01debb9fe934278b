//! The tools `hermes mcp serve` offers, named as Hermes' and OpenClaw's channel bridges name
//! them, one file each. Arguments come from a client the key holder runs, but are still
//! checked: every limit is clamped, every id looked up, and a refusal says what to do.

mod conversations_list;
mod events;
mod events_poll;
mod events_wait;
mod messages_read;
mod messages_send;
mod permissions_list_open;
mod permissions_respond;

use super::ServeHandles;
use async_trait::async_trait;
use serde_json::Value;

/// Why a call did not do what was asked; the text is what the client is told.
#[derive(Debug, thiserror::Error)]
pub(super) enum ToolFailure {
    #[error("{0}")]
    BadArgument(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Refused(String),
    #[error("the gateway's store could not be read: {0}")]
    Store(#[from] crate::store::StoreError),
}

/// One tool of the server.
#[async_trait]
pub(super) trait ServeTool: Send + Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    /// The JSON Schema of its arguments.
    fn input_schema(&self) -> Value;
    /// Whether it only reads (`readOnlyHint`), so a careful client may call it unasked.
    fn read_only(&self) -> bool;
    async fn call(&self, handles: &ServeHandles, args: &Value) -> Result<Value, ToolFailure>;
}

/// Every tool, in the order `tools/list` shows them.
pub(super) fn all() -> &'static [&'static dyn ServeTool] {
    &[
        &conversations_list::ConversationsList,
        &messages_read::MessagesRead,
        &events_poll::EventsPoll,
        &events_wait::EventsWait,
        &messages_send::MessagesSend,
        &permissions_list_open::PermissionsListOpen,
        &permissions_respond::PermissionsRespond,
    ]
}

/// The tool named `name`.
pub(super) fn named(name: &str) -> Option<&'static dyn ServeTool> {
    all().iter().copied().find(|t| t.name() == name)
}

/// A required string argument, trimmed and not empty.
fn required_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolFailure> {
    match args.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim()),
        Some(Value::String(_)) => Err(ToolFailure::BadArgument(format!("`{key}` is empty"))),
        Some(_) => Err(ToolFailure::BadArgument(format!("`{key}` must be a string"))),
        None => Err(ToolFailure::BadArgument(format!("`{key}` is required"))),
    }
}

/// An optional string argument.
fn optional_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, ToolFailure> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim()).filter(|s| !s.is_empty())),
        Some(_) => Err(ToolFailure::BadArgument(format!("`{key}` must be a string"))),
    }
}

/// An optional whole number in `1..=max` (`default` when absent).
fn bounded(args: &Value, key: &str, default: u64, max: u64) -> Result<u64, ToolFailure> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(ToolFailure::BadArgument(format!("`{key}` must be a whole number from 1 to {max}"))),
        },
    }
}

/// The conversation named by `conversation_id` (a session key, as `conversations_list` gives it).
async fn conversation(handles: &ServeHandles, args: &Value) -> Result<crate::store::RouteEntry, ToolFailure> {
    let id = required_str(args, "conversation_id")?;
    handles
        .routes
        .route_get(id)
        .await?
        .ok_or_else(|| ToolFailure::NotFound(format!("no conversation `{id}`; call conversations_list for the ids the gateway has")))
}

/// A time as clients read it.
fn timestamp(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
