//! `memory` (placeholder until implemented).

use super::{Tool, ToolContext, ToolOutput, ToolSchema};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct Memory;

#[async_trait]
impl Tool for Memory {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "memory".into(),
            description: "not yet available".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn toolset(&self) -> &'static str {
        "memory"
    }
    async fn call(&self, _ctx: &ToolContext, _arguments: Value) -> ToolOutput {
        ToolOutput::error("`memory` is not implemented yet")
    }
}
