//! `/undo [N]`: remove the last N user turns (default 1) from the conversation. The rows are kept
//! (inactive), so nothing is truly lost.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::store::{Routes, SessionLog};
use async_trait::async_trait;

pub(super) struct Undo;

static SPEC: CommandSpec = CommandSpec {
    name: "undo",
    aliases: &[],
    args_hint: "[N]",
    description: "Remove your last N turns from the conversation (default 1)",
    runs_mid_turn: false,
};

#[async_trait]
impl SlashCommand for Undo {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        undo(ctx.handles.routes.as_ref(), ctx.handles.session_log.as_ref(), ctx.session_key, args).await
    }
}

async fn undo(routes: &dyn Routes, log: &dyn SessionLog, session_key: &str, args: &str) -> CommandOutcome {
    let n = match args.trim() {
        "" => 1,
        s => match s.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => return CommandOutcome::Reply("Usage: /undo [N] — N is how many of your turns to remove (1-100, default 1).".into()),
        },
    };
    let Some(route) = routes.route_get(session_key).await.ok().flatten() else {
        return CommandOutcome::Reply("Nothing to undo.".into());
    };
    match log.messages_undo(&route.session_id, n).await {
        Ok(Some(u)) => {
            let preview: String = u.first_user_text.chars().take(200).collect();
            CommandOutcome::Reply(format!(
                "↩️ Undid {} turn(s) ({} message(s)).\nBacked up to: \"{preview}\"\nCopy/edit the text above and send it to re-prompt from here.",
                u.turns, u.messages
            ))
        }
        Ok(None) => CommandOutcome::Reply("Nothing to undo.".into()),
        Err(e) => CommandOutcome::Reply(format!("⚠️ The session store is unavailable: {e}")),
    }
}
