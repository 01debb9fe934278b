//! `/pair approve <code>`: an admin approves a pairing code in chat, for this chat's platform —
//! the same approval as `hermes pairing approve <platform> <code>`, counted toward the same
//! lockout. Anyone else is refused: letting a stranger in is the operator's decision.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::intake::auth::AuthPolicy;
use crate::gateway::intake::pairing::store::PairingError;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;

pub(super) struct Pair;

static SPEC: CommandSpec = CommandSpec {
    name: "pair",
    aliases: &[],
    args_hint: "approve <code>",
    description: "Approve a stranger's pairing code (admins)",
    runs_mid_turn: true,
};

const USAGE: &str = "Usage: `/pair approve <code>` — the code a stranger was sent when they messaged me.";

#[async_trait]
impl SlashCommand for Pair {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }

    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        pair(&ctx.handles.auth, ctx.event, args).await
    }
}

async fn pair(auth: &AuthPolicy, event: &InboundEvent, args: &str) -> CommandOutcome {
    if !auth.is_admin(event) {
        return CommandOutcome::Reply("⚠️ Only an admin may approve pairing codes.".into());
    }
    let mut words = args.split_whitespace();
    let (Some(action), Some(code), None) = (words.next(), words.next(), words.next()) else {
        return CommandOutcome::Reply(USAGE.into());
    };
    if !action.eq_ignore_ascii_case("approve") {
        return CommandOutcome::Reply(USAGE.into());
    }
    let Some(pairing) = auth.pairing() else {
        return CommandOutcome::Reply("Pairing is not available in this gateway.".into());
    };
    let platform = event.source.platform.as_str();
    CommandOutcome::Reply(match pairing.approve(platform, code).await {
        Ok(user) => {
            let name = if user.user_name.is_empty() { String::new() } else { format!("{} ", user.user_name) };
            format!("✅ Approved {name}(`{}`) on {platform}: their next message reaches me.", user.user_id)
        }
        Err(e @ (PairingError::WrongCode { .. } | PairingError::Expired { .. } | PairingError::LockedOut { .. })) => {
            format!("⚠️ Not approved: {e}.")
        }
        Err(e) => {
            tracing::warn!(error = %e, "/pair approve failed");
            "⚠️ Not approved: the pairing store could not be used (see the gateway's log).".into()
        }
    })
}
