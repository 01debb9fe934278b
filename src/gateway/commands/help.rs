//! `/help`: the commands available in this chat.

use super::{CommandContext, CommandOutcome, CommandRegistry, CommandSpec, SlashCommand, describe};
use async_trait::async_trait;

pub(super) struct Help;

static SPEC: CommandSpec =
    CommandSpec { name: "help", aliases: &[], args_hint: "", description: "Show the available commands", runs_mid_turn: true };

#[async_trait]
impl SlashCommand for Help {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, _args: &str) -> CommandOutcome {
        help(&ctx.handles.registry)
    }
}

fn help(registry: &CommandRegistry) -> CommandOutcome {
    let mut text = String::from("📖 **Hermes Commands**\n\n");
    for spec in registry.specs() {
        text.push_str(&describe(spec));
        text.push('\n');
    }
    CommandOutcome::Reply(text.trim_end().to_string())
}
