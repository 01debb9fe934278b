//! `/new` (`/reset`): end this conversation and start a fresh one on the same chat.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::conversation::models::Models;
use crate::gateway::turn::approvals::board::ApprovalBoard;
use crate::gateway::turn::queue::SessionState;
use crate::store::Routes;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;

pub(super) struct New;

static SPEC: CommandSpec = CommandSpec {
    name: "new",
    aliases: &["reset"],
    args_hint: "",
    description: "Start a new conversation (the old one stays searchable)",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for New {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, _args: &str) -> CommandOutcome {
        new_session(ctx.session, &ctx.handles.approvals.board, &ctx.handles.models, ctx.handles.routes.as_ref(), ctx.event, ctx.session_key)
            .await
    }
}

/// End the session's conversation: its turn, queue, approvals and overrides go with it.
async fn new_session(
    session: &mut SessionState,
    approvals: &ApprovalBoard,
    models: &Models,
    routes: &dyn Routes,
    event: &InboundEvent,
    session_key: &str,
) -> CommandOutcome {
    // A running turn (and any approval it waits for: stopping it denies), queued input and
    // the approvals given for the session belong to the old conversation.
    session.interrupt();
    approvals.forget_session(session_key);
    session.clear_queue().await;
    let model = models.default_model();
    match routes.session_reset(session_key, &event.source, &model.model, "session_reset").await {
        Ok(route) => {
            // A fresh conversation starts without the old one's per-session overrides.
            if let Err(e) = routes.route_set_overrides(session_key, &serde_json::json!({})).await {
                tracing::warn!(error = %e, "could not clear session overrides after /new");
            }
            tracing::info!(session_key = session_key, session_id = %route.session_id, "session reset by user");
            CommandOutcome::Reply("✨ Session reset! Starting fresh.".to_string())
        }
        Err(e) => {
            tracing::error!(error = %e, "session reset failed");
            CommandOutcome::Reply("⚠️ Could not start a new session (storage error). Please try again.".to_string())
        }
    }
}
