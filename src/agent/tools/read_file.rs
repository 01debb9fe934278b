//! `read_file` (placeholder until implemented).

use super::{Tool, ToolContext, ToolOutput, ToolSchema};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct ReadFile;

#[async_trait]
impl Tool for ReadFile {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "read_file".into(),
            description: "not yet available".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn toolset(&self) -> &'static str {
        "file"
    }
    async fn call(&self, _ctx: &ToolContext, _arguments: Value) -> ToolOutput {
        ToolOutput::error("`read_file` is not implemented yet")
    }
}
