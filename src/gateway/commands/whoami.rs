//! `/whoami`: who the gateway thinks you are, and where this conversation is kept.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use async_trait::async_trait;
use hermes_adapter::InboundEvent;

pub(super) struct WhoAmI;

static SPEC: CommandSpec =
    CommandSpec { name: "whoami", aliases: &[], args_hint: "", description: "Show your ids and access", runs_mid_turn: true };

#[async_trait]
impl SlashCommand for WhoAmI {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, _args: &str) -> CommandOutcome {
        who_am_i(ctx.event, ctx.session_key)
    }
}

fn who_am_i(event: &InboundEvent, session_key: &str) -> CommandOutcome {
    let s = &event.source;
    let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "—".to_string());
    // Every command is open to every authorized user until command tiers arrive.
    let text = format!(
        "👤 **Who am I**\n\n**Platform:** {}\n**User ID:** `{}`\n**Handle:** {}\n**Display name:** {}\n**Chat ID:** `{}`\n**Chat type:** {}\n**Thread:** {}\n**Session key:** `{}`\n**Access:** user (all commands)",
        s.platform,
        or_none(&s.user_id),
        // Allowlists match the id and the handle; the display name is only shown.
        s.user_handle.as_ref().map(|h| format!("`@{h}`")).unwrap_or_else(|| "—".to_string()),
        or_none(&s.user_display_name),
        s.chat_id,
        s.chat_type,
        or_none(&s.thread_id),
        session_key,
    );
    CommandOutcome::Reply(text)
}
