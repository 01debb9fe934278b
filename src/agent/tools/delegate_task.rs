//! `delegate_task` (placeholder until implemented).

use super::{Tool, ToolContext, ToolOutput, ToolSchema};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct DelegateTask;

#[async_trait]
impl Tool for DelegateTask {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "delegate_task".into(),
            description: "not yet available".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn toolset(&self) -> &'static str {
        "delegation"
    }
    async fn call(&self, _ctx: &ToolContext, _arguments: Value) -> ToolOutput {
        ToolOutput::error("`delegate_task` is not implemented yet")
    }
}
