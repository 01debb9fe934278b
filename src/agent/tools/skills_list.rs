//! `skills_list` (placeholder until implemented).

use super::{Tool, ToolContext, ToolOutput, ToolSchema};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct SkillsList;

#[async_trait]
impl Tool for SkillsList {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "skills_list".into(),
            description: "not yet available".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn toolset(&self) -> &'static str {
        "skills"
    }
    async fn call(&self, _ctx: &ToolContext, _arguments: Value) -> ToolOutput {
        ToolOutput::error("`skills_list` is not implemented yet")
    }
}
