//! `/queue <prompt>` (`/q`): run a prompt after the current turn without interrupting it.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::turn::queue::SessionState;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;

pub(super) struct Queue;

static SPEC: CommandSpec = CommandSpec {
    name: "queue",
    aliases: &["q"],
    args_hint: "<prompt>",
    description: "Queue a prompt for the next turn without interrupting",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for Queue {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        queue(ctx.session, ctx.event, args)
    }
}

fn queue(session: &mut SessionState, event: &InboundEvent, args: &str) -> CommandOutcome {
    if args.trim().is_empty() {
        return CommandOutcome::Reply("Usage: /queue <prompt>".to_string());
    }
    if !session.is_running() {
        return CommandOutcome::ReplyAndRun { reply: None, prompt: args.trim().to_string() };
    }
    let mut queued = event.clone();
    queued.text = args.trim().to_string();
    match session.enqueue_back(queued) {
        Ok(n) => CommandOutcome::Reply(format!("Queued for the next turn. ({n} queued)")),
        Err(cap) => CommandOutcome::Reply(format!("⚠️ The queue is full ({cap} waiting). Wait for the current task or /stop it.")),
    }
}
