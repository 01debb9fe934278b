//! `/sethome`: make this chat (and its thread or topic) the platform's home channel, where cron
//! jobs delivering to the platform (or to `all`) post. Stored as Hermes stores it,
//! `<PLATFORM>_HOME_CHANNEL` (and `<PLATFORM>_HOME_CHANNEL_THREAD_ID`) in `.env`, and in effect at
//! once. Admins only: it decides where every job's results go.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use async_trait::async_trait;

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
        if !ctx.handles.auth.is_admin(ctx.event) {
            return CommandOutcome::Reply("⛔ Only an admin can choose the home channel.".into());
        }
        let target = ctx.event.answer_target();
        let prefix = target.platform.as_str().to_ascii_uppercase().replace('-', "_");
        let (channel_key, thread_key) = (format!("{prefix}_HOME_CHANNEL"), format!("{prefix}_HOME_CHANNEL_THREAD_ID"));
        let cron = &ctx.handles.cron;
        let vars = [(channel_key.as_str(), Some(target.chat_id.as_str())), (thread_key.as_str(), target.thread_id.as_deref())];
        if let Err(e) = crate::config::set_env_vars(&cron.env_file, &vars) {
            tracing::error!(error = %e, "cannot save the home channel");
            return CommandOutcome::Reply(format!("❌ Could not save the home channel: {e}"));
        }
        cron.homes.set(&target);
        let place = match &target.thread_id {
            Some(thread) => format!("this chat (`{}`, thread `{thread}`)", target.chat_id),
            None => format!("this chat (`{}`)", target.chat_id),
        };
        CommandOutcome::Reply(format!(
            "🏠 Home channel for {} set to {place}. Cron jobs delivering to `{}` or `all` post here.",
            target.platform, target.platform
        ))
    }
}
