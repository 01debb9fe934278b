//! `/new` (`/reset`): end this conversation and start a fresh one on the same chat.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use async_trait::async_trait;

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
        // A running turn (and any approval it waits for: stopping it denies), queued input and
        // the approvals given for the session belong to the old conversation.
        ctx.session.interrupt();
        ctx.handles.approvals.board.forget_session(ctx.session_key);
        ctx.session.clear_queue().await;
        let model = ctx.handles.models.default_model();
        let store = &ctx.handles.store;
        match store.session_reset(ctx.session_key, &ctx.event.source, &model.model, "session_reset").await {
            Ok(route) => {
                // A fresh conversation starts without the old one's per-session overrides.
                if let Err(e) = store.route_set_overrides(ctx.session_key, &serde_json::json!({})).await {
                    tracing::warn!(error = %e, "could not clear session overrides after /new");
                }
                tracing::info!(session_key = ctx.session_key, session_id = %route.session_id, "session reset by user");
                CommandOutcome::Reply("✨ Session reset! Starting fresh.".to_string())
            }
            Err(e) => {
                tracing::error!(error = %e, "session reset failed");
                CommandOutcome::Reply("⚠️ Could not start a new session (storage error). Please try again.".to_string())
            }
        }
    }
}
