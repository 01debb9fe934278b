//! `/steer <text>`: add guidance to the running turn after its next tool call; when idle, the
//! text is sent as a normal message.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::turn::queue::SessionState;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;

pub(super) struct Steer;

static SPEC: CommandSpec = CommandSpec {
    name: "steer",
    aliases: &[],
    args_hint: "<text>",
    description: "Add guidance to the running task (after its next tool call)",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for Steer {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        steer(ctx.session, ctx.event, args)
    }
}

fn steer(session: &mut SessionState, event: &InboundEvent, args: &str) -> CommandOutcome {
    let text = args.trim();
    if text.is_empty() {
        return CommandOutcome::Reply("Usage: /steer <text>".into());
    }
    let mut steered = event.clone();
    steered.text = text.to_string();
    if session.steer(steered) {
        CommandOutcome::Reply("⏩ Steered into current run. Your message arrives after the next tool call.".into())
    } else {
        CommandOutcome::ReplyAndRun { reply: None, prompt: text.to_string() }
    }
}
