//! `send_message` (placeholder until implemented).

use super::{Tool, ToolContext, ToolOutput, ToolSchema};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct SendMessage;

#[async_trait]
impl Tool for SendMessage {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "send_message".into(),
            description: "not yet available".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn toolset(&self) -> &'static str {
        "messaging"
    }
    async fn call(&self, _ctx: &ToolContext, _arguments: Value) -> ToolOutput {
        ToolOutput::error("`send_message` is not implemented yet")
    }
}
