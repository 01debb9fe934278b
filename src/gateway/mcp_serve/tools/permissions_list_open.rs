//! `permissions_list_open`: the approvals waiting now in every chat (a flagged command, or a
//! call to an untrusted MCP tool), oldest first, as the chat was shown them (secrets masked).

use super::{ServeTool, ToolFailure, timestamp};
use crate::gateway::mcp_serve::ServeHandles;
use async_trait::async_trait;
use serde_json::{Value, json};

pub(super) struct PermissionsListOpen;

#[async_trait]
impl ServeTool for PermissionsListOpen {
    fn name(&self) -> &'static str {
        "permissions_list_open"
    }

    fn description(&self) -> &'static str {
        "List the approvals the agent is waiting for in any chat: a dangerous command or an untrusted MCP tool call, with its id \
         for permissions_respond, the conversation and what exactly would run."
    }

    fn input_schema(&self) -> Value {
        json!({ "type": "object", "properties": {}, "additionalProperties": false })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, handles: &ServeHandles, _args: &Value) -> Result<Value, ToolFailure> {
        let now = chrono::Utc::now();
        let open: Vec<Value> = handles
            .approvals
            .waiting()
            .into_iter()
            .map(|p| {
                json!({
                    "id": p.id,
                    "conversation_id": p.session_key,
                    "platform": p.target.platform.as_str(),
                    "chat_id": p.target.chat_id,
                    "request": p.command,
                    "asked_at": timestamp(p.created_at),
                    "waiting_seconds": (now - p.created_at).num_seconds().max(0),
                })
            })
            .collect();
        Ok(json!({ "approvals": open }))
    }
}
