//! `/restart`: an admin asks the gateway to restart. It drains like SIGUSR1 — no new messages,
//! running turns finish (or are replayed after the restart) — and `gateway run` exits 75, which
//! the systemd unit (`RestartForceExitStatus=75`) answers by starting it again. Run in a terminal
//! without a service manager, the gateway simply stops.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::intake::auth::AuthPolicy;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;
use tokio_util::sync::CancellationToken;

pub(super) struct Restart;

static SPEC: CommandSpec = CommandSpec {
    name: "restart",
    aliases: &[],
    args_hint: "",
    description: "Restart the gateway after running turns finish (admins)",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for Restart {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, _args: &str) -> CommandOutcome {
        restart(&ctx.handles.auth, &ctx.handles.restart, ctx.event)
    }
}

fn restart(auth: &AuthPolicy, restart: &CancellationToken, event: &InboundEvent) -> CommandOutcome {
    if !auth.is_admin(event) {
        return CommandOutcome::Reply("⛔ Only an admin can restart the gateway.".into());
    }
    tracing::warn!(by = ?event.source.user_id, platform = %event.source.platform, "restart requested from chat");
    restart.cancel();
    CommandOutcome::Reply(
        "♻️ Restarting: no new messages are taken, running answers finish first, then the service manager starts me again \
         (exit status 75)."
            .into(),
    )
}
