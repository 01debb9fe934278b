//! What `events_poll` and `events_wait` share: the messages stored after a cursor (a message
//! id, so a client that reconnects, or a restarted gateway, loses nothing and sees nothing
//! twice), and the approvals waiting now.

use super::{ToolFailure, bounded, timestamp};
use crate::gateway::mcp_serve::ServeHandles;
use serde_json::{Value, json};

pub(super) const DEFAULT_LIMIT: u64 = 100;
pub(super) const MAX_LIMIT: u64 = 500;

/// Where to read from: `after`, or the newest message now (a first poll starts from now).
pub(super) async fn cursor(handles: &ServeHandles, args: &Value) -> Result<i64, ToolFailure> {
    match args.get("after") {
        None | Some(Value::Null) => Ok(handles.log.latest_message_id().await?),
        Some(v) => v.as_i64().filter(|n| *n >= 0).ok_or_else(|| {
            ToolFailure::BadArgument("`after` must be the next_cursor of an earlier poll (a whole number, 0 for everything)".into())
        }),
    }
}

/// The events after `after`, at most `args.limit`, with the cursor to read on from.
pub(super) async fn read(handles: &ServeHandles, after: i64, args: &Value) -> Result<(Vec<Value>, i64), ToolFailure> {
    let limit = bounded(args, "limit", DEFAULT_LIMIT, MAX_LIMIT)? as usize;
    let messages = handles.log.messages_after(after, limit).await?;
    let next = messages.last().map_or(after, |m| m.message.id);
    let events = messages
        .into_iter()
        .map(|m| {
            json!({
                "type": "message",
                "cursor": m.message.id,
                "conversation_id": m.session_key,
                "role": m.message.role,
                "text": m.message.content,
                "timestamp": timestamp(m.message.timestamp),
            })
        })
        .collect();
    Ok((events, next))
}

/// The answer of either tool.
pub(super) fn answer(handles: &ServeHandles, events: Vec<Value>, next: i64) -> Value {
    let waiting = handles.approvals.waiting().len();
    json!({ "events": events, "next_cursor": next, "pending_approvals": waiting })
}

/// The arguments both take, and `more` of the tool's own.
pub(super) fn schema(more: Value) -> Value {
    let mut properties = json!({
        "after": {"type": "integer", "minimum": 0, "description": "next_cursor from the last call; omit to start from now, 0 for everything."},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "At most this many events (default 100)."}
    });
    if let (Some(all), Value::Object(more)) = (properties.as_object_mut(), more) {
        all.extend(more);
    }
    json!({ "type": "object", "properties": properties, "additionalProperties": false })
}
