//! `skills_list`: the names and descriptions of the skills under `HERMES_HOME/skills`.

use super::{Tool, ToolContext, ToolOutput, ToolSchema};
use crate::agent::skills;
use async_trait::async_trait;
use serde_json::{Value, json};

pub(super) struct SkillsList;

#[async_trait]
impl Tool for SkillsList {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "skills_list".into(),
            description: "List your saved skills (name and when to use each).".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }

    fn toolset(&self) -> &'static str {
        "skills"
    }

    async fn call(&self, ctx: &ToolContext, _args: Value) -> ToolOutput {
        let root = ctx.paths.skills.clone();
        let found = tokio::task::spawn_blocking(move || skills::list(&root)).await.unwrap_or_default();
        if found.is_empty() {
            return ToolOutput::ok("No skills saved yet. Create one with skill_manage (action `create`).");
        }
        let lines: Vec<String> = found.iter().map(|s| format!("- {}: {}", s.name, s.description)).collect();
        ToolOutput::ok(format!("{} skill(s):\n{}", found.len(), lines.join("\n")))
    }
}
