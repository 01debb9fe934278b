//! `send_message`: deliver a message to a chat — this one, the platform's home channel, or an
//! explicit `platform:chat[:thread]` target — through the gateway's outbound path (outbox,
//! idempotency key per tool call, chunking, retries).

use super::{SendId, Tool, ToolContext, ToolOutput, ToolSchema, required_str};
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
        let id = SendId { turn_id: ctx.turn_id.clone(), call_id: ctx.call_id.clone() };
        match ctx.host.send_message(&ctx.scope, target, message, &id).await {
            Ok(confirmation) => ToolOutput::ok(confirmation),
            Err(e) => ToolOutput::error(format!("the message was not sent: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::{AgentPaths, HostError, PastMessage, SessionScope, ToolHost, ToolSettings};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// Records what `send_message` was handed.
    #[derive(Default)]
    struct Recording {
        sent: Mutex<Vec<(String, String, SendId)>>,
    }

    #[async_trait]
    impl ToolHost for Recording {
        async fn search_sessions(&self, _: &SessionScope, _: &str, _: usize) -> Result<Vec<PastMessage>, HostError> {
            Ok(Vec::new())
        }
        async fn send_message(&self, _: &SessionScope, target: &str, text: &str, id: &SendId) -> Result<String, HostError> {
            self.sent.lock().unwrap().push((target.into(), text.into(), id.clone()));
            Ok("Sent.".into())
        }
        async fn clarify(&self, _: &SessionScope, _: &str, _: &[String], _: Duration) -> Result<String, HostError> {
            Ok(String::new())
        }
    }

    /// The host gets the turn and the call the message comes from, which key its delivery.
    #[tokio::test]
    async fn the_host_is_handed_the_turn_and_the_call() {
        let host = Arc::new(Recording::default());
        let mut ctx = ToolContext::detached(AgentPaths::under(std::env::temp_dir()), ToolSettings::default());
        (ctx.host, ctx.turn_id, ctx.call_id) = (host.clone(), "t1".into(), "call_1".into());
        let out = SendMessage.call(&ctx, json!({"target": "home", "message": "hi"})).await;
        assert!(!out.is_error, "{}", out.content);
        let want = SendId { turn_id: "t1".into(), call_id: "call_1".into() };
        assert_eq!(*host.sent.lock().unwrap(), [("home".to_string(), "hi".to_string(), want)]);
    }
}
