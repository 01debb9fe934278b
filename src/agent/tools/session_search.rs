//! `session_search` (placeholder until implemented).

use super::{Tool, ToolContext, ToolOutput, ToolSchema};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct SessionSearch;

#[async_trait]
impl Tool for SessionSearch {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "session_search".into(),
            description: "not yet available".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn toolset(&self) -> &'static str {
        "session_search"
    }
    async fn call(&self, _ctx: &ToolContext, _arguments: Value) -> ToolOutput {
        ToolOutput::error("`session_search` is not implemented yet")
    }
}
