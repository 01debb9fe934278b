//! `send_message`: deliver a message to a chat — this one, the platform's home channel, or an
//! explicit `platform:chat[:thread]` target — through the gateway's outbound path (outbox,
//! idempotency key per tool call, chunking, retries).

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use async_trait::async_trait;
use serde_json::{Value, json};

pub(super) struct SendMessage;

#[async_trait]
impl Tool for SendMessage {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "send_message".into(),
            description: "Send a message to a chat other than your reply: `origin` (this chat), `home` (this platform's home \
                          channel), `<platform>` (that platform's home channel) or `<platform>:<chat_id>[:<thread_id>]`. Your normal \
                          answer already goes to this chat; use this only for other destinations or extra notifications."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "target": {"type": "string", "description": "origin | home | <platform> | <platform>:<chat_id>[:<thread_id>]"},
                    "message": {"type": "string", "description": "The text (Markdown)."}
                },
                "required": ["target", "message"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "messaging"
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let (target, message) = match (required_str(&args, "target"), required_str(&args, "message")) {
            (Ok(t), Ok(m)) => (t, m),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        if message.trim().is_empty() {
            return ToolOutput::error("`message` is empty.");
        }
        // One delivery per tool call, even if the turn is replayed after a crash.
        let key = format!("{}:send_message:{}", ctx.turn_id, ctx.call_id);
        match ctx.host.send_message(&ctx.scope, target, message, &key).await {
            Ok(confirmation) => ToolOutput::ok(confirmation),
            Err(e) => ToolOutput::error(format!("the message was not sent: {e}")),
        }
    }
}
