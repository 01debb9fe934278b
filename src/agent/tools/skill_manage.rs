//! `skill_manage`: create, edit, patch, delete a skill, or write one of its supporting files.
//! Every text written is screened like a memory write.

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use crate::agent::skills;
use async_trait::async_trait;
use serde_json::{Value, json};

pub(super) struct SkillManage;

#[async_trait]
impl Tool for SkillManage {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "skill_manage".into(),
            description: "Save and maintain skills: reusable step-by-step instructions for tasks you may do again. Actions: create \
                          (name, description, content), edit (name, content, optional description), patch (name, old_text, new_text, \
                          optional file), write_file (name, file, content), delete (name)."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["create", "edit", "patch", "write_file", "delete"]},
                    "name": {"type": "string", "description": "lowercase-with-dashes"},
                    "description": {"type": "string", "description": "One line: when to use this skill."},
                    "content": {"type": "string"},
                    "file": {"type": "string"},
                    "old_text": {"type": "string"},
                    "new_text": {"type": "string"}
                },
                "required": ["action", "name"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "skills"
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let (action, name) = match (required_str(&args, "action"), required_str(&args, "name")) {
            (Ok(a), Ok(n)) => (a.to_string(), n.to_string()),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        if !ctx.scope.is_admin {
            return ToolOutput::error(
                "Skills are shared by every user of this agent and only an admin may create or change them; tell the user to ask \
                 an admin.",
            );
        }
        let root = ctx.paths.skills.clone();
        let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        let (description, content, file, old, new) = (s("description"), s("content"), s("file"), s("old_text"), s("new_text"));
        let outcome = tokio::task::spawn_blocking(move || {
            let content_ref = content.as_deref().unwrap_or_default();
            match action.as_str() {
                "create" => skills::create(&root, &name, description.as_deref().unwrap_or_default(), content_ref)
                    .map(|_| format!("Skill `{name}` created.")),
                "edit" => skills::edit(&root, &name, description.as_deref(), content_ref).map(|_| format!("Skill `{name}` updated.")),
                "patch" => {
                    skills::patch(&root, &name, file.as_deref(), old.as_deref().unwrap_or_default(), new.as_deref().unwrap_or_default())
                        .map(|_| format!("Skill `{name}` patched."))
                }
                "write_file" => match file.as_deref() {
                    Some(f) => skills::write_file(&root, &name, f, content_ref).map(|_| format!("Wrote {f} in skill `{name}`.")),
                    None => Err(skills::SkillError::Invalid("`file` is required for write_file".into())),
                },
                "delete" => skills::delete(&root, &name).map(|_| format!("Skill `{name}` deleted.")),
                other => {
                    Err(skills::SkillError::Invalid(format!("unknown action `{other}`; use create, edit, patch, write_file or delete")))
                }
            }
        })
        .await;
        match outcome {
            Ok(Ok(msg)) => ToolOutput::ok(msg),
            Ok(Err(e)) => ToolOutput::error(e.to_string()),
            Err(e) => ToolOutput::error(format!("the skill change failed: {e}")),
        }
    }
}
