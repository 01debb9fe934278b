//! `/retry`: take back the last user message (and everything after it) and run it again.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use async_trait::async_trait;

pub(super) struct Retry;

static SPEC: CommandSpec =
    CommandSpec { name: "retry", aliases: &[], args_hint: "", description: "Run your last message again", runs_mid_turn: false };

#[async_trait]
impl SlashCommand for Retry {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, _args: &str) -> CommandOutcome {
        let store = &ctx.handles.store;
        let Some(route) = store.route_get(ctx.session_key).await.ok().flatten() else {
            return CommandOutcome::Reply("No previous message to retry.".into());
        };
        match store.messages_undo(&route.session_id, 1).await {
            Ok(Some(undone)) => CommandOutcome::ReplyAndRun { reply: None, prompt: undone.first_user_text },
            Ok(None) => CommandOutcome::Reply("No previous message to retry.".into()),
            Err(e) => CommandOutcome::Reply(format!("⚠️ The session store is unavailable: {e}")),
        }
    }
}
