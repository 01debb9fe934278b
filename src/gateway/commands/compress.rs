//! `/compress [focus]` (`/compact`): summarize the middle of this conversation now, optionally
//! focused on a topic; the conversation continues in a child session linked to this one.

use super::{CommandContext, CommandHandles, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::conversation::compaction;
use async_trait::async_trait;
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
        let CommandHandles { store, models, turns, .. } = ctx.handles;
        let Some(route) = store.route_get(ctx.session_key).await.ok().flatten() else {
            return CommandOutcome::Reply(compaction::CompressError::TooShort.to_string());
        };
        let model = models.model_for(Some(&route.overrides));
        let filter = turns.tools.tool_filter(ctx.event.source.platform.as_str(), ctx.event.toolsets.as_deref());
        let toolsets = turns.tools.toolsets_allowed(&filter);
        let prompt = match turns.sessions.prompts.frozen(&route.session_id, &ctx.event.source, &toolsets).await {
            Ok(p) => p,
            Err(e) => return CommandOutcome::Reply(format!("⚠️ The session store is unavailable: {e}")),
        };
        let focus = Some(args.trim()).filter(|f| !f.is_empty());
        match turns.sessions.compactor.compress_session(&route, &model, &prompt, focus, CancellationToken::new()).await {
            Ok(c) => CommandOutcome::Reply(format!(
                "🗜️ Compressed: {} → {} messages, ~{} → ~{} tokens.",
                c.messages_before, c.messages_after, c.tokens_before, c.tokens_after
            )),
            Err(e) => CommandOutcome::Reply(e.to_string()),
        }
    }
}
