//! `/resend <id>`: an admin puts a dead letter (see `/undelivered`) back on its way. It gets a
//! fresh retry window and its lane's worker is woken, so it goes out at once when its platform
//! takes it; it keeps its place in its chat's order.

use super::undelivered::{self, Requeued};
use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::delivery::courier::Courier;
use crate::gateway::intake::auth::AuthPolicy;
use crate::store::Outbox;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;
use std::sync::Arc;

pub(super) struct Resend;

static SPEC: CommandSpec = CommandSpec {
    name: "resend",
    aliases: &[],
    args_hint: "<id>",
    description: "Try an undelivered message again (admins; ids from /undelivered)",
    runs_mid_turn: true,
};

const USAGE: &str = "Usage: /resend <id> (a number from /undelivered)";

#[async_trait]
impl SlashCommand for Resend {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        let handles = ctx.handles;
        CommandOutcome::Reply(respond(&handles.auth, handles.outbox.as_ref(), handles.turns.deliverer.courier(), ctx.event, args).await)
    }
}

/// The reply to `/resend <args>` from `event`'s sender.
async fn respond(auth: &AuthPolicy, outbox: &dyn Outbox, courier: &Arc<Courier>, event: &InboundEvent, args: &str) -> String {
    if !auth.is_admin(event) {
        return "⛔ Only an admin can resend undelivered messages.".into();
    }
    let Some(id) = undelivered::parse_id(args) else { return USAGE.into() };
    let deadline = undelivered::deadline_after(courier.policy().window);
    match undelivered::requeue(outbox, id, deadline).await {
        Ok(Some(Requeued { lane, destination })) => {
            tracing::info!(outbox_id = id, by = ?event.source.user_id, "dead letter resent by an admin");
            courier.wake(&lane);
            format!("Resending #{id} to {destination}.")
        }
        Ok(None) => format!("No undelivered message #{id}; see /undelivered."),
        Err(e) => {
            tracing::warn!(outbox_id = id, error = %e, "cannot requeue a dead letter");
            format!("Could not resend #{id}: {e}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::commands::undelivered::tests::from;
    use crate::gateway::tests::support::{dead_letter, rig};
    use std::time::Duration;

    /// `/resend <args>` from `event`'s sender, with the handles the command takes.
    async fn ask(handles: &crate::gateway::commands::CommandHandles, event: &InboundEvent, args: &str) -> String {
        respond(&handles.auth, handles.outbox.as_ref(), handles.turns.deliverer.courier(), event, args).await
    }

    #[tokio::test]
    async fn resend_delivers_a_dead_letter_once_and_it_leaves_the_list() {
        let (_dir, wiring, chat) = rig().await;
        let handles = &wiring.actors.commands;
        let id = dead_letter(&wiring.store, "k1", "c9", "the lost answer").await;
        assert_eq!(ask(handles, &from("boss", ""), &format!("#{id}")).await, format!("Resending #{id} to chat:c9."));
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while chat.sent.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "the resent message was not delivered");
        // Give a second (wrong) delivery time to happen before counting.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(*chat.sent.lock().unwrap(), vec!["the lost answer".to_string()], "delivered exactly once");
        assert!(wiring.store.outbox_dead_letters(10).await.unwrap().is_empty());
        let again = ask(handles, &from("boss", ""), &id.to_string()).await;
        assert_eq!(again, format!("No undelivered message #{id}; see /undelivered."));
        assert_eq!(chat.sent.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn refuses_non_admins_bad_ids_and_unknown_ones() {
        let (_dir, wiring, chat) = rig().await;
        let handles = &wiring.actors.commands;
        let id = dead_letter(&wiring.store, "k1", "c9", "the lost answer").await;
        let refused = ask(handles, &from("guest", ""), &id.to_string()).await;
        assert!(refused.starts_with("⛔ Only an admin"), "{refused}");
        assert_eq!(wiring.store.outbox_dead_letters(10).await.unwrap().len(), 1, "still a dead letter");
        for bad in ["", "abc", "1 2"] {
            assert_eq!(ask(handles, &from("boss", ""), bad).await, USAGE, "{bad:?}");
        }
        let unknown = ask(handles, &from("boss", ""), &(id + 100).to_string()).await;
        assert_eq!(unknown, format!("No undelivered message #{}; see /undelivered.", id + 100));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(chat.sent.lock().unwrap().is_empty());
    }
}
