//! `skill_view` (placeholder until implemented).

use super::{Tool, ToolContext, ToolOutput, ToolSchema};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct SkillView;

#[async_trait]
impl Tool for SkillView {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "skill_view".into(),
            description: "not yet available".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn toolset(&self) -> &'static str {
        "skills"
    }
    async fn call(&self, _ctx: &ToolContext, _arguments: Value) -> ToolOutput {
        ToolOutput::error("`skill_view` is not implemented yet")
    }
}
