//! `skill_view`: the full text of one skill (or one of its supporting files), loaded on demand so
//! the system prompt only carries the index.

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use crate::agent::skills;
use async_trait::async_trait;
use serde_json::{Value, json};

pub(super) struct SkillView;

#[async_trait]
impl Tool for SkillView {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "skill_view".into(),
            description: "Read a skill's full instructions (SKILL.md), or one of its supporting files with `file`.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "file": {"type": "string", "description": "A supporting file, relative to the skill folder."}
                },
                "required": ["name"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "skills"
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let name = match required_str(&args, "name") {
            Ok(n) => n.to_string(),
            Err(e) => return e,
        };
        let file = args.get("file").and_then(Value::as_str).map(str::to_string);
        let root = ctx.paths.skills.clone();
        let result = tokio::task::spawn_blocking(move || {
            let text = skills::view(&root, &name, file.as_deref())?;
            let extra = match file {
                Some(_) => Vec::new(),
                None => skills::files(&skills::find(&root, &name)?),
            };
            Ok::<_, skills::SkillError>((text, extra))
        })
        .await;
        match result {
            Ok(Ok((text, extra))) if extra.is_empty() => ToolOutput::ok(text),
            Ok(Ok((text, extra))) => ToolOutput::ok(format!("{text}\n\n[Supporting files (read with `file`): {}]", extra.join(", "))),
            Ok(Err(e)) => ToolOutput::error(e.to_string()),
            Err(e) => ToolOutput::error(format!("reading the skill failed: {e}")),
        }
    }
}
