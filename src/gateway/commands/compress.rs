//! `/compress [focus]` (`/compact`): summarize the middle of this conversation now, optionally
//! focused on a topic; the conversation continues in a child session linked to this one.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::compaction;
use crate::gateway::turn::frozen_prompt;
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

pub struct Compress;

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
        let services = ctx.services;
        let Some(route) = services.store.route_get(ctx.session_key).await.ok().flatten() else {
            return CommandOutcome::Reply(compaction::CompressError::TooShort.to_string());
        };
        let model = services.model_for(Some(&route.overrides));
        let filter = services.tool_filter(ctx.event.source.platform.as_str(), ctx.event.toolsets.as_deref());
        let toolsets = services.toolsets_allowed(&filter);
        let prompt = match frozen_prompt(services, &route.session_id, &ctx.event.source, &toolsets).await {
            Ok(p) => p,
            Err(e) => return CommandOutcome::Reply(format!("⚠️ The session store is unavailable: {e}")),
        };
        let focus = Some(args.trim()).filter(|f| !f.is_empty());
        match compaction::compress_session(services, &route, &model, &prompt, focus, CancellationToken::new()).await {
            Ok(c) => CommandOutcome::Reply(format!(
                "🗜️ Compressed: {} → {} messages, ~{} → ~{} tokens.",
                c.messages_before, c.messages_after, c.tokens_before, c.tokens_after
            )),
            Err(e) => CommandOutcome::Reply(e.to_string()),
        }
    }
}
