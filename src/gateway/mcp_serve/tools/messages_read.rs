//! `messages_read`: the latest words of a conversation's current session: what its users and
//! the agent said, without tool calls and their output.

use super::{ServeTool, ToolFailure, bounded, conversation, timestamp};
use crate::gateway::mcp_serve::ServeHandles;
use async_trait::async_trait;
use serde_json::{Value, json};

pub(super) struct MessagesRead;

const DEFAULT_LIMIT: u64 = 50;
const MAX_LIMIT: u64 = 500;

#[async_trait]
impl ServeTool for MessagesRead {
    fn name(&self) -> &'static str {
        "messages_read"
    }

    fn description(&self) -> &'static str {
        "Read the latest messages of a conversation (users' and the agent's words, oldest first). \
         conversation_id comes from conversations_list or an event."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "conversation_id": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "The latest this many (default 50)."}
            },
            "required": ["conversation_id"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, handles: &ServeHandles, args: &Value) -> Result<Value, ToolFailure> {
        let route = conversation(handles, args).await?;
        let limit = bounded(args, "limit", DEFAULT_LIMIT, MAX_LIMIT)? as usize;
        // Tool traffic sits between the words; read enough to find `limit` of them.
        let rows = handles.log.messages(&route.session_id, None).await?;
        let words: Vec<Value> = rows
            .iter()
            .filter(|m| matches!(m.role.as_str(), "user" | "assistant") && !m.content.is_empty())
            .map(|m| json!({ "id": m.id, "role": m.role, "text": m.content, "timestamp": timestamp(m.timestamp) }))
            .collect();
        let skip = words.len().saturating_sub(limit);
        Ok(json!({ "conversation_id": route.session_key, "messages": words[skip..] }))
    }
}
