//! `search_files` (placeholder until implemented).

use super::{Tool, ToolContext, ToolOutput, ToolSchema};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct SearchFiles;

#[async_trait]
impl Tool for SearchFiles {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "search_files".into(),
            description: "not yet available".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn toolset(&self) -> &'static str {
        "file"
    }
    async fn call(&self, _ctx: &ToolContext, _arguments: Value) -> ToolOutput {
        ToolOutput::error("`search_files` is not implemented yet")
    }
}
