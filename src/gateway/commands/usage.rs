//! `/usage`: this session's tokens (input, cached, output), API calls, cost, context fill and
//! compressions, per model.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::conversation::models::Models;
use crate::store::{Routes, SessionLog, UsageLedger};
use async_trait::async_trait;

pub(super) struct UsageCommand;

static SPEC: CommandSpec = CommandSpec {
    name: "usage",
    aliases: &[],
    args_hint: "",
    description: "Show this session's token usage and cost",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for UsageCommand {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, _args: &str) -> CommandOutcome {
        let h = ctx.handles;
        usage(h.routes.as_ref(), h.usage.as_ref(), h.session_log.as_ref(), &h.models, ctx.session_key).await
    }
}

async fn usage(routes: &dyn Routes, ledger: &dyn UsageLedger, log: &dyn SessionLog, models: &Models, session_key: &str) -> CommandOutcome {
    let Some(route) = routes.route_get(session_key).await.ok().flatten() else {
        return CommandOutcome::Reply("No session yet — send a message to start one.".into());
    };
    let model = models.model_for(Some(&route.overrides));
    let u = match ledger.session_usage(&route.session_id).await {
        Ok(u) => u,
        Err(e) => return CommandOutcome::Reply(format!("⚠️ The session store is unavailable: {e}")),
    };
    let (last_prompt, compressions) = log.session_prompt_tokens(&route.session_id).await.unwrap_or((0, 0));
    let window = models.context_length(&model.model);
    let mut text = String::from("📊 **Session Token Usage**\n\n");
    text.push_str(&format!("**Model:** `{}`\n", model.model));
    text.push_str(&format!("**Input tokens:** {}\n", u.prompt_tokens));
    text.push_str(&format!("**Cache read:** {}\n", u.cached_tokens));
    text.push_str(&format!("**Output tokens:** {}\n", u.completion_tokens));
    text.push_str(&format!("**Total:** {}\n", u.prompt_tokens + u.completion_tokens));
    text.push_str(&format!("**API calls:** {}\n", u.api_calls));
    text.push_str(&format!("**Cost:** {}\n", format_cost(u.cost_usd, &u.models, models)));
    text.push_str(&format!("**Context:** {last_prompt} / {window} tokens ({}%)\n", (last_prompt * 100).checked_div(window).unwrap_or(0)));
    text.push_str(&format!("**Compressions:** {compressions}\n"));
    if u.models.len() > 1 {
        text.push_str(&format!("**Models used:** {}\n", u.models.join(", ")));
    }
    CommandOutcome::Reply(text.trim_end().to_string())
}

/// The cost, or why it is unknown.
pub(super) fn format_cost(cost: f64, used: &[String], models: &Models) -> String {
    if !models.all_priced(used) {
        return format!("${cost:.4} (no price configured for some models: set model.pricing.<model>)");
    }
    format!("${cost:.4}")
}
