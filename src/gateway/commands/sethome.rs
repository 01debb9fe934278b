//! `/sethome`: make this chat (and its thread or topic) the platform's home channel, where cron
//! jobs delivering to the platform (or to `all`) post. Stored as Hermes stores it, in `.env`
//! under the variables the platform's registration names (`TELEGRAM_HOME_CHANNEL`,
//! `MATRIX_HOME_ROOM`, `EMAIL_HOME_ADDRESS`, and the thread companion), and in effect at once.
//! Admins only: it decides where every job's results go.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::cron::ticker::CronCommandHandles;
use crate::gateway::delivery::home_channels::SetHomeError;
use crate::gateway::intake::auth::AuthPolicy;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;

pub(super) struct SetHome;

static SPEC: CommandSpec = CommandSpec {
    name: "sethome",
    aliases: &["set-home"],
    args_hint: "",
    description: "Make this chat the home channel for cron results on this platform (admins)",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for SetHome {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, _args: &str) -> CommandOutcome {
        set_home(&ctx.handles.auth, &ctx.handles.cron, ctx.event)
    }
}

fn set_home(auth: &AuthPolicy, cron: &CronCommandHandles, event: &InboundEvent) -> CommandOutcome {
    if !auth.is_admin(event) {
        return CommandOutcome::Reply("⛔ Only an admin can choose the home channel.".into());
    }
    let target = event.answer_target();
    match cron.homes.set_and_save(&target, &cron.env_file) {
        Ok(()) => {}
        Err(SetHomeError::NoHome(platform)) => {
            return CommandOutcome::Reply(format!("❌ {platform} has no home channel: its answers go back to whoever asked."));
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot save the home channel");
            return CommandOutcome::Reply(format!("❌ Could not save the home channel: {e}"));
        }
    }
    let place = match &target.thread_id {
        Some(thread) => format!("this chat (`{}`, thread `{thread}`)", target.chat_id),
        None => format!("this chat (`{}`)", target.chat_id),
    };
    CommandOutcome::Reply(format!(
        "🏠 Home channel for {} set to {place}. Cron jobs delivering to `{}` or `all` post here.",
        target.platform, target.platform
    ))
}
