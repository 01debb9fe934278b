//! `messages_send`: post a message into a conversation the gateway has, through the outbox (so
//! it is chunked for the platform, survives an outage, and is sent once per idempotency key).
//! Only where `send_message` would let an admin post: into a known conversation, on a platform
//! this gateway runs that can receive a message outside a request (not the API server, not a
//! webhook); while that platform is down the message waits in the outbox. Text only: a `MEDIA:`
//! tag, which would attach a file from the gateway's cache or working folder (other users'
//! downloads among them), is refused. The message is not added to the agent's transcript: it
//! may be in the middle of a turn, and a stranger's words between its tool calls would break
//! the conversation.

use super::{ServeTool, ToolFailure, conversation, optional_str, required_str};
use crate::gateway::delivery::outbound::Delivery;
use crate::gateway::delivery::reply::{Reply, ReplyKey};
use crate::gateway::mcp_serve::ServeHandles;
use async_trait::async_trait;
use hermes_adapter::ChatTarget;
use serde_json::{Value, json};

pub(super) struct MessagesSend;

/// The longest text accepted; the platform's own limit is met by splitting it into parts.
const MAX_TEXT_CHARS: usize = 20_000;
/// The longest idempotency key accepted (it becomes part of the outbox key).
const MAX_KEY_CHARS: usize = 128;

#[async_trait]
impl ServeTool for MessagesSend {
    fn name(&self) -> &'static str {
        "messages_send"
    }

    fn description(&self) -> &'static str {
        "Send a message (Markdown) from the bot into a conversation. Give an idempotency_key and retry with the same key after an \
         error or a timeout: a key is sent at most once. The agent does not see the message in its history."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "conversation_id": {"type": "string"},
                "text": {"type": "string", "maxLength": MAX_TEXT_CHARS},
                "idempotency_key": {"type": "string", "maxLength": MAX_KEY_CHARS, "description": "Same key, same message: sent once."}
            },
            "required": ["conversation_id", "text"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, handles: &ServeHandles, args: &Value) -> Result<Value, ToolFailure> {
        let text = required_str(args, "text")?;
        if text.chars().count() > MAX_TEXT_CHARS {
            return Err(ToolFailure::BadArgument(format!("`text` is longer than {MAX_TEXT_CHARS} characters; send it in parts")));
        }
        if !hermes_adapter::media::extract_media_tags(text).1.is_empty() {
            return Err(ToolFailure::Refused(
                "`MEDIA:` tags are not sent from an MCP client: messages_send posts text only, never a file from the gateway".into(),
            ));
        }
        let key = idempotency_key(args)?;
        let route = conversation(handles, args).await?;
        let origin = &route.origin;
        let target = ChatTarget { platform: origin.platform.clone(), chat_id: origin.chat_id.clone(), thread_id: origin.thread_id.clone() };
        reachable(handles, &target)?;
        let delivery = handles.deliverer.send(Reply::markdown(target.clone(), text), ReplyKey::McpSend(key.clone())).await;
        let status = match delivery {
            Delivery::Delivered => "delivered",
            Delivery::Queued => "queued",
            Delivery::InDoubt => "in_doubt",
            Delivery::Failed => {
                return Err(ToolFailure::Refused(format!(
                    "{} refused the message or could not be reached (see the gateway log); it was not sent",
                    target.platform
                )));
            }
        };
        Ok(json!({
            "status": status,
            "idempotency_key": key,
            "conversation_id": route.session_key,
            "note": match status {
                "queued" => "the platform is not accepting messages now; it is delivered when it recovers. Do not send it again.",
                "in_doubt" => "the platform did not confirm it; it may have arrived. Retry only with the same idempotency_key.",
                _ => "",
            },
        }))
    }
}

/// The client's key (letters, digits and `-_.:`), or a new one.
fn idempotency_key(args: &Value) -> Result<String, ToolFailure> {
    let Some(key) = optional_str(args, "idempotency_key")? else {
        return Ok(uuid::Uuid::new_v4().simple().to_string());
    };
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.:".contains(c);
    if key.chars().count() > MAX_KEY_CHARS || !key.chars().all(allowed) {
        return Err(ToolFailure::BadArgument(format!(
            "`idempotency_key` must be at most {MAX_KEY_CHARS} letters, digits and - _ . : (a UUID is a good key)"
        )));
    }
    Ok(key.to_string())
}

/// Refused unless this gateway runs the platform and it takes messages outside a request.
fn reachable(handles: &ServeHandles, target: &ChatTarget) -> Result<(), ToolFailure> {
    let Some(adapter) = handles.deliverer.adapter(target.platform.as_str()) else {
        return Err(ToolFailure::Refused(format!(
            "`{}` is not a platform this gateway runs (enable it, or pick another conversation)",
            target.platform
        )));
    };
    if !adapter.capabilities().supports_async_delivery {
        return Err(ToolFailure::Refused(format!(
            "`{}` cannot receive messages outside a request (its clients only get answers to what they send)",
            target.platform
        )));
    }
    Ok(())
}
