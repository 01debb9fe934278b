//! `session_search`: full-text search over this user's past conversations from the same origin.
//! The gateway's [`super::ToolHost`] enforces the scope: another user's messages are never found.

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use async_trait::async_trait;
use serde_json::{Value, json};

pub(super) struct SessionSearch;

#[async_trait]
impl Tool for SessionSearch {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "session_search".into(),
            description: "Search your past conversations with this user (full text; words, phrases, or parts of words). Use it when \
                          the user refers to something discussed before that is not in the current conversation."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to look for."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most results to return (default 10)."}
                },
                "required": ["query"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "session_search"
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let query = match required_str(&args, "query") {
            Ok(q) if !q.trim().is_empty() => q,
            Ok(_) => return ToolOutput::error("`query` is empty; give the words to search for."),
            Err(e) => return e,
        };
        let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(10).clamp(1, 50) as usize;
        match ctx.host.search_sessions(&ctx.scope, query, limit).await {
            Ok(hits) if hits.is_empty() => ToolOutput::ok(format!("No past messages match {query:?}.")),
            Ok(hits) => {
                let mut out = format!("{} past message(s) match {query:?}:\n", hits.len());
                for h in hits {
                    let when = chrono::DateTime::from_timestamp_millis(h.timestamp)
                        .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
                        .unwrap_or_default();
                    out.push_str(&format!("- [{when}, session {}, {}] {}\n", h.session_id, h.role, h.snippet));
                }
                ToolOutput::ok(out)
            }
            Err(e) => ToolOutput::error(format!("session search failed: {e}")),
        }
    }
}
