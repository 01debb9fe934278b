//! `/retry`: take back the last user message (and everything after it) and run it again.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::store::{Routes, SessionLog};
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
        retry(ctx.handles.routes.as_ref(), ctx.handles.session_log.as_ref(), ctx.session_key).await
    }
}

async fn retry(routes: &dyn Routes, log: &dyn SessionLog, session_key: &str) -> CommandOutcome {
    let Some(route) = routes.route_get(session_key).await.ok().flatten() else {
        return CommandOutcome::Reply("No previous message to retry.".into());
    };
    match log.messages_undo(&route.session_id, 1).await {
        Ok(Some(undone)) => CommandOutcome::ReplyAndRun { reply: None, prompt: undone.first_user_text },
        Ok(None) => CommandOutcome::Reply("No previous message to retry.".into()),
        Err(e) => CommandOutcome::Reply(format!("⚠️ The session store is unavailable: {e}")),
    }
}
