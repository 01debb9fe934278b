//! `/stop`: interrupt the running turn and drop queued input; the session is kept.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::turn::queue::SessionState;
use async_trait::async_trait;

pub(super) struct Stop;

static SPEC: CommandSpec = CommandSpec {
    name: "stop",
    aliases: &[],
    args_hint: "",
    description: "Stop the current task (the conversation is kept)",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for Stop {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, _args: &str) -> CommandOutcome {
        stop(ctx.session).await
    }
}

async fn stop(session: &mut SessionState) -> CommandOutcome {
    let was_running = session.is_running();
    let started = session.turn_started();
    session.interrupt();
    session.clear_queue().await;
    let reply = match (was_running, started) {
        (true, true) => "⚡ Stopped. You can continue this session.",
        (true, false) => "⚡ Stopped. The agent hadn't started yet — you can continue this session.",
        (false, _) => "No active task to stop.",
    };
    CommandOutcome::Reply(reply.to_string())
}
