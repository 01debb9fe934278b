//! `permissions_respond`: approve or deny a waiting approval by id, as `/approve` or `/deny`
//! would in its chat; the chat is told it was answered from an MCP client. `always` is not
//! offered: writing `command_allowlist` stays a decision made in chat or in the config file.

use super::{ServeTool, ToolFailure, optional_str, required_str};
use crate::gateway::delivery::reply::{Reply, ReplyKey};
use crate::gateway::mcp_serve::ServeHandles;
use crate::gateway::turn::approvals::board::{Answer, Reach};
use crate::gateway::turn::approvals::texts;
use async_trait::async_trait;
use serde_json::{Value, json};

pub(super) struct PermissionsRespond;

/// Added to what the chat is told, so its people know who answered.
const FROM_MCP: &str = " _(answered from the operator's MCP client)_";

#[async_trait]
impl ServeTool for PermissionsRespond {
    fn name(&self) -> &'static str {
        "permissions_respond"
    }

    fn description(&self) -> &'static str {
        "Answer a waiting approval by its id (from permissions_list_open): decision approve or deny; scope once (default) or \
         session (approve the same kind of request for the rest of that conversation); a reason for a denial is relayed to the agent."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "decision": {"type": "string", "enum": ["approve", "deny"]},
                "scope": {"type": "string", "enum": ["once", "session"]},
                "reason": {"type": "string"}
            },
            "required": ["id", "decision"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, handles: &ServeHandles, args: &Value) -> Result<Value, ToolFailure> {
        let id = required_str(args, "id")?;
        let answer = parse_answer(args)?;
        let Some((about, _)) = handles.approvals.answer_any(id, &answer) else {
            return Err(ToolFailure::NotFound(format!(
                "no approval `{id}` is waiting (answered, timed out or stopped); call permissions_list_open"
            )));
        };
        let told = match &answer {
            Answer::Approve(reach) => texts::approved(1, *reach),
            Answer::Deny { reason } => texts::denied_reply(1, reason.as_deref()),
        };
        let notice = Reply::markdown(about.target.clone(), format!("{told}{FROM_MCP}"));
        handles.deliverer.send(notice, ReplyKey::ApprovalAnsweredElsewhere(about.id.clone())).await;
        tracing::info!(id = %about.id, session_key = %about.session_key, "approval answered from an MCP client");
        let decision = if matches!(answer, Answer::Approve(_)) { "approved" } else { "denied" };
        Ok(json!({ "id": about.id, "conversation_id": about.session_key, "decision": decision }))
    }
}

fn parse_answer(args: &Value) -> Result<Answer, ToolFailure> {
    let reason = optional_str(args, "reason")?.map(str::to_string);
    let reach = match optional_str(args, "scope")? {
        None | Some("once") => Reach::Once,
        Some("session") => Reach::Session,
        Some(other) => return Err(ToolFailure::BadArgument(format!("`scope` is once or session, not {other:?}"))),
    };
    match required_str(args, "decision")? {
        "approve" => Ok(Answer::Approve(reach)),
        "deny" => Ok(Answer::Deny { reason }),
        other => Err(ToolFailure::BadArgument(format!("`decision` is approve or deny, not {other:?}"))),
    }
}
