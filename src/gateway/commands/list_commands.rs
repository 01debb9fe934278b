//! `/commands [page]`: the paginated list of every command.

use super::{CommandContext, CommandOutcome, CommandRegistry, CommandSpec, SlashCommand, describe};
use async_trait::async_trait;

pub(super) struct Commands;

const PER_PAGE: usize = 20;

static SPEC: CommandSpec = CommandSpec {
    name: "commands",
    aliases: &[],
    args_hint: "[page]",
    description: "List all commands, a page at a time",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for Commands {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        list(&ctx.handles.registry, args)
    }
}

fn list(registry: &CommandRegistry, args: &str) -> CommandOutcome {
    let specs: Vec<_> = registry.specs().collect();
    let pages = specs.len().div_ceil(PER_PAGE).max(1);
    let page = match args.trim() {
        "" => 1,
        n => match n.parse::<usize>() {
            Ok(p) if (1..=pages).contains(&p) => p,
            _ => return CommandOutcome::Reply(format!("Usage: /commands [page] — pages 1 to {pages}.")),
        },
    };
    let mut text = format!("📋 **Commands** (page {page}/{pages})\n\n");
    for spec in specs.iter().skip((page - 1) * PER_PAGE).take(PER_PAGE) {
        text.push_str(&describe(spec));
        text.push('\n');
    }
    if page < pages {
        text.push_str(&format!("\nMore: /commands {}", page + 1));
    }
    CommandOutcome::Reply(text.trim_end().to_string())
}
