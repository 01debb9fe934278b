//! `memory`: add, replace or remove entries of `MEMORY.md` (the agent's notes) and `USER.md`
//! (the user profile). Writes are screened and budgeted by [`crate::agent::memory`]; they reach
//! the system prompt from the next session on, so the current prompt (and its cache) stays stable.

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use crate::agent::memory::{MemoryStore, MemoryTarget};
use async_trait::async_trait;
use serde_json::{Value, json};

pub(super) struct Memory;

#[async_trait]
impl Tool for Memory {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "memory".into(),
            description: "Save durable facts for future sessions. target `memory` = your notes about the environment, projects and \
                          lessons learned; target `user` = who the user is (preferences, name, habits). Keep entries short and factual; \
                          the files have a character budget, so replace or remove stale entries. Changes take effect in the next session."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["add", "replace", "remove"]},
                    "target": {"type": "string", "enum": ["memory", "user"]},
                    "content": {"type": "string", "description": "The new entry (add, replace)."},
                    "old_text": {"type": "string", "description": "A unique part of the entry to replace or remove."}
                },
                "required": ["action", "target"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "memory"
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let action = match required_str(&args, "action") {
            Ok(a) => a,
            Err(e) => return e,
        };
        let Some(target) = args.get("target").and_then(Value::as_str).and_then(MemoryTarget::parse) else {
            return ToolOutput::error("`target` must be `memory` or `user`.");
        };
        if target == MemoryTarget::Memory && !ctx.scope.is_admin {
            return ToolOutput::error(
                "MEMORY.md is shared by every user of this agent and only an admin may change it. Save facts about this user with \
                 target `user` (their own profile) instead.",
            );
        }
        let s = &ctx.settings;
        let scope = &ctx.scope;
        let store = MemoryStore::new(&ctx.paths.memories, s.memory_char_limit, s.user_char_limit).for_session(
            s.per_user_profiles,
            &scope.platform,
            scope.user_id.as_deref(),
        );
        let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        let result = match action {
            "add" => store.add(target, &text("content")).await,
            "replace" => store.replace(target, &text("old_text"), &text("content")).await,
            "remove" => store.remove(target, &text("old_text")).await,
            other => return ToolOutput::error(format!("unknown action `{other}`; use add, replace or remove.")),
        };
        match result {
            Ok(summary) => ToolOutput::ok(format!("Memory {summary}. It will be in your prompt from the next session on.")),
            Err(e) => ToolOutput::error(format!("memory not changed: {e}")),
        }
    }
}
