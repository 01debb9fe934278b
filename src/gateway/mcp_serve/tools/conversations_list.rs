//! `conversations_list`: the conversations the gateway has, most recently active first, with
//! whether a message can be sent into each.

use super::{ServeTool, ToolFailure, bounded, optional_str, timestamp};
use crate::gateway::mcp_serve::ServeHandles;
use crate::store::Conversation;
use async_trait::async_trait;
use serde_json::{Value, json};

pub(super) struct ConversationsList;

const DEFAULT_LIMIT: u64 = 50;
const MAX_LIMIT: u64 = 500;

#[async_trait]
impl ServeTool for ConversationsList {
    fn name(&self) -> &'static str {
        "conversations_list"
    }

    fn description(&self) -> &'static str {
        "List the gateway's conversations (one per chat, or per user in a shared chat), most recently active first. \
         Each has a conversation_id for the other tools, its platform and chat, and can_send: whether messages_send can post into it."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "At most this many (default 50)."},
                "platform": {"type": "string", "description": "Only this platform's conversations (telegram, discord, …)."}
            },
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, handles: &ServeHandles, args: &Value) -> Result<Value, ToolFailure> {
        let limit = bounded(args, "limit", DEFAULT_LIMIT, MAX_LIMIT)?;
        let platform = optional_str(args, "platform")?;
        // Filtering after the limit could return fewer than exist: read them all when filtering.
        let read = if platform.is_some() { usize::MAX } else { limit as usize };
        let conversations = handles.routes.conversations(read).await?;
        let listed: Vec<Value> = conversations
            .iter()
            .filter(|c| platform.is_none_or(|p| c.origin.platform.as_str().eq_ignore_ascii_case(p)))
            .take(limit as usize)
            .map(|c| describe(handles, c))
            .collect();
        Ok(json!({ "conversations": listed }))
    }
}

fn describe(handles: &ServeHandles, conversation: &Conversation) -> Value {
    let origin = &conversation.origin;
    let can_send =
        handles.deliverer.adapter(origin.platform.as_str()).is_some_and(|adapter| adapter.capabilities().supports_async_delivery);
    json!({
        "conversation_id": conversation.session_key,
        "platform": origin.platform.as_str(),
        "chat_id": origin.chat_id,
        "thread_id": origin.thread_id,
        "chat_type": origin.chat_type.as_str(),
        "chat_name": origin.chat_name,
        "user_id": origin.user_id,
        "user_name": origin.user_display_name,
        "title": conversation.title,
        "message_count": conversation.message_count,
        "updated_at": timestamp(conversation.updated_at),
        "can_send": can_send,
    })
}
