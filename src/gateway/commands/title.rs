//! `/title [name]`: show or set this session's title (unique across sessions).

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::store::{Routes, SessionLog};
use async_trait::async_trait;

pub(super) struct Title;

const MAX_TITLE: usize = 100;

static SPEC: CommandSpec =
    CommandSpec { name: "title", aliases: &[], args_hint: "[name]", description: "Show or set this session's title", runs_mid_turn: true };

#[async_trait]
impl SlashCommand for Title {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        title(ctx.handles.routes.as_ref(), ctx.handles.session_log.as_ref(), ctx.session_key, args).await
    }
}

async fn title(routes: &dyn Routes, log: &dyn SessionLog, session_key: &str, args: &str) -> CommandOutcome {
    let Some(route) = routes.route_get(session_key).await.ok().flatten() else {
        return CommandOutcome::Reply("No session yet — send a message to start one.".into());
    };
    let title: String = args.chars().filter(|c| !c.is_control()).collect::<String>().trim().chars().take(MAX_TITLE).collect();
    if title.is_empty() {
        let current = routes.session_get(&route.session_id).await.ok().flatten().and_then(|s| s.title);
        return CommandOutcome::Reply(format!(
            "**Session:** `{}`\n**Title:** {}",
            route.session_id,
            current.unwrap_or_else(|| "(untitled) — set one with /title <name>".into())
        ));
    }
    match log.session_set_title(&route.session_id, &title).await {
        Ok(true) => CommandOutcome::Reply(format!("✏️ Session title set: **{title}**")),
        Ok(false) => CommandOutcome::Reply(format!("⚠️ Another session is already titled \"{title}\". Pick a different title.")),
        Err(e) => CommandOutcome::Reply(format!("⚠️ The session store is unavailable: {e}")),
    }
}
