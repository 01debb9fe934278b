//! `delegate_task`: hand a self-contained sub-task to a sub-agent with its own fresh context and
//! get its final answer back. A sub-agent may not delegate again, ask the user (`clarify`), write
//! memory or send messages, so nesting stops at two levels; at most three run at once per turn.

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use crate::agent::message::ChatMessage;
use crate::agent::run_loop::{TurnRequest, TurnTools};
use async_trait::async_trait;
use serde_json::{Value, json};

/// Levels of agents: the user's agent (depth 0) and its sub-agents (depth 1).
pub(super) const MAX_DEPTH: u8 = 2;
/// Toolsets a sub-agent never gets.
const DENIED_TOOLSETS: &[&str] = &["delegation", "clarify", "memory", "messaging"];

const SUBAGENT_PROMPT: &str = "You are a focused sub-agent working for another AI agent. Complete the task below using your tools, then \
reply with a concise report of what you found or did: facts, file paths, commands and results the parent needs. You cannot ask questions; \
when something is ambiguous, make a reasonable choice and say so.";

pub(super) struct DelegateTask;

#[async_trait]
impl Tool for DelegateTask {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "delegate_task".into(),
            description: "Delegate a self-contained sub-task to a sub-agent with a fresh context (it sees none of this conversation, \
                          so put everything it needs in `goal` and `context`). Several calls in one response run in parallel (at most 3 \
                          at a time). Returns the sub-agent's final report."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "goal": {"type": "string", "description": "What the sub-agent must achieve."},
                    "context": {"type": "string", "description": "Facts, paths and constraints it needs."}
                },
                "required": ["goal"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "delegation"
    }

    fn unavailable(&self, ctx: &ToolContext) -> Option<String> {
        match &ctx.delegation {
            None => Some("sub-agents are not available in this context".into()),
            Some(d) if d.depth + 1 >= MAX_DEPTH => Some(format!("sub-agents may not nest deeper than {MAX_DEPTH} levels")),
            Some(_) => None,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let goal = match required_str(&args, "goal") {
            Ok(g) => g,
            Err(e) => return e,
        };
        let Some(parent) = ctx.delegation.clone().filter(|d| d.depth + 1 < MAX_DEPTH) else {
            return ToolOutput::error(self.unavailable(ctx).unwrap_or_default());
        };
        let _slot = tokio::select! {
            permit = parent.slots.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => return ToolOutput::error("sub-agents are shutting down"),
            },
            _ = ctx.cancel.cancelled() => return ToolOutput::error("the turn was stopped"),
        };
        let mut task = goal.to_string();
        if let Some(extra) = args.get("context").and_then(Value::as_str).filter(|c| !c.trim().is_empty()) {
            task.push_str(&format!("\n\nContext:\n{extra}"));
        }
        let mut child = parent.clone();
        child.depth += 1;
        child.filter = parent.filter.clone().without_toolsets(DENIED_TOOLSETS);
        let mut context = ctx.clone();
        context.scope.interactive = false;
        context.delegation = Some(child.clone());
        let mut request = TurnRequest::new(child.model.clone(), vec![ChatMessage::system(SUBAGENT_PROMPT), ChatMessage::user(task)]);
        request.fallbacks = child.fallbacks.clone();
        request.tools = Some(TurnTools { filter: child.filter.clone(), context });
        match child.agent.run_to_end(request, ctx.cancel.child_token()).await {
            Ok(outcome) if outcome.text.trim().is_empty() => ToolOutput::error("the sub-agent finished without a report"),
            Ok(outcome) => ToolOutput::ok(format!("Sub-agent report ({} model call(s)):\n{}", outcome.api_calls, outcome.text)),
            Err(e) => ToolOutput::error(format!("the sub-agent failed: {e}")),
        }
    }
}
