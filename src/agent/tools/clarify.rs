//! `clarify`: ask the user a question and wait for the answer (bounded by
//! `agent.clarify_timeout`). Only offered where a person can answer.

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use async_trait::async_trait;
use serde_json::{Value, json};

pub(super) struct Clarify;

#[async_trait]
impl Tool for Clarify {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "clarify".into(),
            description: "Ask the user a question when you cannot proceed without their decision, and wait for the answer. Offer \
                          `choices` when there are a few clear options. Do not use it for things you can find out yourself."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "choices": {"type": "array", "items": {"type": "string"}, "maxItems": 6}
                },
                "required": ["question"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "clarify"
    }

    fn unavailable(&self, ctx: &ToolContext) -> Option<String> {
        (!ctx.scope.interactive).then(|| "nobody can answer in this conversation".to_string())
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let question = match required_str(&args, "question") {
            Ok(q) => q,
            Err(e) => return e,
        };
        let choices: Vec<String> = args
            .get("choices")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).take(6).collect())
            .unwrap_or_default();
        let timeout = ctx.settings.clarify_timeout;
        tokio::select! {
            answer = ctx.host.clarify(&ctx.scope, question, &choices, timeout) => match answer {
                Ok(a) => ToolOutput::ok(format!("The user answered: {a}")),
                Err(e) => ToolOutput::error(format!("no answer: {e}. Proceed with your best judgement and say what you assumed.")),
            },
            _ = ctx.cancel.cancelled() => ToolOutput::error("the turn was stopped while waiting for the answer."),
        }
    }
}
