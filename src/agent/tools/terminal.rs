//! `terminal` (placeholder until implemented).

use super::{Tool, ToolContext, ToolOutput, ToolSchema};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct Terminal;

#[async_trait]
impl Tool for Terminal {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "terminal".into(),
            description: "not yet available".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn toolset(&self) -> &'static str {
        "terminal"
    }
    async fn call(&self, _ctx: &ToolContext, _arguments: Value) -> ToolOutput {
        ToolOutput::error("`terminal` is not implemented yet")
    }
}
