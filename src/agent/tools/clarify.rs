//! `clarify` (placeholder until implemented).

use super::{Tool, ToolContext, ToolOutput, ToolSchema};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct Clarify;

#[async_trait]
impl Tool for Clarify {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "clarify".into(),
            description: "not yet available".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn toolset(&self) -> &'static str {
        "clarify"
    }
    async fn call(&self, _ctx: &ToolContext, _arguments: Value) -> ToolOutput {
        ToolOutput::error("`clarify` is not implemented yet")
    }
}
