//! `/drop <id>`: an admin gives a dead letter (see `/undelivered`) up for good. It is kept in the
//! outbox as `dropped` (a record of what was never delivered) but no longer listed or resendable.

use super::undelivered;
use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::intake::auth::AuthPolicy;
use crate::store::Outbox;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;

pub(super) struct DropCommand;

static SPEC: CommandSpec = CommandSpec {
    name: "drop",
    aliases: &[],
    args_hint: "<id>",
    description: "Give up an undelivered message for good (admins; ids from /undelivered)",
    runs_mid_turn: true,
};

const USAGE: &str = "Usage: /drop <id> (a number from /undelivered)";

#[async_trait]
impl SlashCommand for DropCommand {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        CommandOutcome::Reply(respond(&ctx.handles.auth, ctx.handles.outbox.as_ref(), ctx.event, args).await)
    }
}

/// The reply to `/drop <args>` from `event`'s sender.
async fn respond(auth: &AuthPolicy, outbox: &dyn Outbox, event: &InboundEvent, args: &str) -> String {
    if !auth.is_admin(event) {
        return "⛔ Only an admin can drop undelivered messages.".into();
    }
    let Some(id) = undelivered::parse_id(args) else { return USAGE.into() };
    match undelivered::drop_letter(outbox, id).await {
        Ok(Some(destination)) => {
            tracing::info!(outbox_id = id, by = ?event.source.user_id, "dead letter dropped by an admin");
            format!("Dropped #{id} to {destination}: it will not be sent.")
        }
        Ok(None) => format!("No undelivered message #{id}; see /undelivered."),
        Err(e) => {
            tracing::warn!(outbox_id = id, error = %e, "cannot drop a dead letter");
            format!("Could not drop #{id}: {e}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::commands::undelivered::tests::from;
    use crate::gateway::tests::support::{dead_letter, rig};

    /// `/drop <args>` from `event`'s sender, with the handles the command takes.
    async fn ask(handles: &crate::gateway::commands::CommandHandles, event: &InboundEvent, args: &str) -> String {
        respond(&handles.auth, handles.outbox.as_ref(), event, args).await
    }

    #[tokio::test]
    async fn drop_removes_a_dead_letter_from_the_list_for_good() {
        let (_dir, wiring, chat) = rig().await;
        let handles = &wiring.actors.commands;
        let id = dead_letter(&wiring.store, "k1", "c9", "the lost answer").await;
        let kept = dead_letter(&wiring.store, "k2", "c9", "another one").await;
        let refused = ask(handles, &from("guest", ""), &id.to_string()).await;
        assert!(refused.starts_with("⛔ Only an admin"), "{refused}");
        assert_eq!(ask(handles, &from("boss", ""), &id.to_string()).await, format!("Dropped #{id} to chat:c9: it will not be sent."));
        let left: Vec<i64> = wiring.store.outbox_dead_letters(10).await.unwrap().iter().map(|l| l.id).collect();
        assert_eq!(left, vec![kept]);
        assert_eq!(ask(handles, &from("boss", ""), &id.to_string()).await, format!("No undelivered message #{id}; see /undelivered."));
        assert!(wiring.store.outbox_requeue(id, i64::MAX).await.unwrap().is_none(), "a dropped message cannot be resent");
        assert_eq!(ask(handles, &from("boss", ""), "x").await, USAGE);
        assert!(chat.sent.lock().unwrap().is_empty());
    }
}
