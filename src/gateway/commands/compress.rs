//! `/compress [focus]` (`/compact`): summarize the middle of this conversation now, optionally
//! focused on a topic; the conversation continues in a child session linked to this one.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::conversation::compaction;
use crate::gateway::conversation::models::Models;
use crate::gateway::conversation::sessions::Sessions;
use crate::gateway::turn::tool_access::ToolAccess;
use crate::store::Routes;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;
use tokio_util::sync::CancellationToken;

pub(super) struct Compress;

static SPEC: CommandSpec = CommandSpec {
    name: "compress",
    aliases: &["compact"],
    args_hint: "[focus topic]",
    description: "Summarize the conversation so far to free context",
    runs_mid_turn: false,
};

#[async_trait]
impl SlashCommand for Compress {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        let h = ctx.handles;
        compress(h.routes.as_ref(), &h.models, &h.turns.tools, &h.turns.sessions, ctx.event, ctx.session_key, args).await
    }
}

async fn compress(
    routes: &dyn Routes,
    models: &Models,
    tools: &ToolAccess,
    sessions: &Sessions,
    event: &InboundEvent,
    session_key: &str,
    args: &str,
) -> CommandOutcome {
    let Some(route) = routes.route_get(session_key).await.ok().flatten() else {
        return CommandOutcome::Reply(compaction::CompressError::TooShort.to_string());
    };
    let model = models.model_for(Some(&route.overrides));
    let filter = tools.tool_filter(event.source.platform.as_str(), event.toolsets.as_deref());
    let toolsets = tools.toolsets_allowed(&filter);
    let prompt = match sessions.prompts.frozen(&route.session_id, &event.source, &toolsets).await {
        Ok(p) => p,
        Err(e) => return CommandOutcome::Reply(format!("⚠️ The session store is unavailable: {e}")),
    };
    let focus = Some(args.trim()).filter(|f| !f.is_empty());
    match sessions.compactor.compress_session(&route, &model, &prompt, focus, CancellationToken::new()).await {
        Ok(c) => CommandOutcome::Reply(format!(
            "🗜️ Compressed: {} → {} messages, ~{} → ~{} tokens.",
            c.messages_before, c.messages_after, c.tokens_before, c.tokens_after
        )),
        Err(e) => CommandOutcome::Reply(e.to_string()),
    }
}
