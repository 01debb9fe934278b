//! `/model [name] [--provider P] [--session | --global]`: show or switch the model. A session
//! switch is stored in the route's overrides (it survives a restart and touches no other chat);
//! `--global` (admins only, see `gateway::intake::auth`) changes the default for every chat and writes it to config.yaml. Refused while a
//! turn runs (the registry's mid-turn rule).

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::conversation::models::Models;
use crate::gateway::intake::auth::AuthPolicy;
use crate::store::{RouteEntry, Routes};
use async_trait::async_trait;
use hermes_adapter::{Button, InboundEvent, SessionSource};
use serde_json::json;

pub(super) struct Model;

static SPEC: CommandSpec = CommandSpec {
    name: "model",
    aliases: &[],
    args_hint: "[name] [--provider P] [--session | --global]",
    description: "Show or switch the model (this session, or --global for everyone)",
    runs_mid_turn: false,
};

#[derive(Debug, Default, PartialEq)]
struct Switch {
    model: Option<String>,
    provider: Option<String>,
    global: Option<bool>,
}

/// What `/model`'s arguments got wrong (the reply adds the usage line).
#[derive(Debug, thiserror::Error)]
enum SwitchError {
    #[error("`--provider` needs a name")]
    ProviderWithoutName,
    #[error("unknown option `{flag}`")]
    UnknownOption { flag: String },
    #[error("unexpected `{extra}` (one model name at a time)")]
    SecondModel { extra: String },
}

fn parse(args: &str) -> Result<Switch, SwitchError> {
    let mut out = Switch::default();
    let mut words = args.split_whitespace();
    while let Some(w) = words.next() {
        match w {
            "--global" => out.global = Some(true),
            "--session" => out.global = Some(false),
            "--provider" => out.provider = Some(words.next().ok_or(SwitchError::ProviderWithoutName)?.to_string()),
            flag if flag.starts_with("--") => return Err(SwitchError::UnknownOption { flag: flag.to_string() }),
            name if out.model.is_none() => out.model = Some(name.to_string()),
            extra => return Err(SwitchError::SecondModel { extra: extra.to_string() }),
        }
    }
    Ok(out)
}

#[async_trait]
impl SlashCommand for Model {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        model(ctx.handles.routes.as_ref(), &ctx.handles.models, &ctx.handles.auth, ctx.event, ctx.session_key, args).await
    }
}

async fn model(
    routes: &dyn Routes,
    models: &Models,
    auth: &AuthPolicy,
    event: &InboundEvent,
    session_key: &str,
    args: &str,
) -> CommandOutcome {
    let switch = match parse(args) {
        Ok(s) => s,
        Err(e) => return CommandOutcome::Reply(format!("⚠️ {e}.\nUsage: /model [name] [--provider P] [--session | --global]")),
    };
    let route = routes.route_get(session_key).await.ok().flatten();
    let Some(model) = switch.model else {
        return show_current(models, route.as_ref());
    };
    let is_admin = auth.is_admin(event);
    if switch.global == Some(true) && !is_admin {
        return CommandOutcome::Reply(
            "⚠️ Only an admin may change the model for every chat (`--global`). Use `/model <name>` to switch this session.".into(),
        );
    }
    // A non-admin's switch stays in their session even where switches persist by default.
    let global = switch.global.unwrap_or(models.switches_persist_by_default() && is_admin);
    let target = Target { routes, session_key, route };
    if global {
        return switch_global(target, models, &model, switch.provider.as_deref()).await;
    }
    switch_session(target, models, &event.source, &model, switch.provider).await
}

/// The session a switch applies to, with its route as read before the switch (if it has one).
struct Target<'a> {
    routes: &'a dyn Routes,
    session_key: &'a str,
    route: Option<RouteEntry>,
}

/// `/model` with no name: the current model, where it comes from, and a button per choice.
fn show_current(models: &Models, route: Option<&RouteEntry>) -> CommandOutcome {
    let current = models.model_for(route.map(|r| &r.overrides));
    let session_override = route.is_some_and(|r| r.overrides.get("model_override").is_some());
    let mut text = format!("🤖 **Current model:** `{}`", current.model);
    if let Some(p) = &current.provider {
        text.push_str(&format!(" ({p})"));
    }
    text.push_str(if session_override { "\n_(this session's choice)_" } else { "\n_(the configured default)_" });
    let choices = models.choices();
    text.push_str("\n\n**Choices:**\n");
    for c in &choices {
        text.push_str(&format!("- `{c}`\n"));
    }
    text.push_str("\nSwitch with `/model <name> [--provider P]` (this session) or add `--global` for every chat.");
    CommandOutcome::ReplyWithButtons(text, choice_buttons(&choices))
}

/// One button per choice; pressing it is the same as typing `/model <choice>`.
fn choice_buttons(choices: &[String]) -> Vec<Vec<Button>> {
    choices
        .iter()
        .map(|c| Button { label: c.clone(), data: format!("/model {c}") })
        .filter(|b| b.data.len() <= 64)
        .map(|b| vec![b])
        .collect()
}

/// `--global`: change the default in config.yaml, then let this session follow it.
async fn switch_global(target: Target<'_>, models: &Models, model: &str, provider: Option<&str>) -> CommandOutcome {
    if let Err(e) = models.switch_global(model, provider) {
        return CommandOutcome::Reply(format!("⚠️ config.yaml could not be updated: {e}"));
    }
    // This session follows the new default.
    let mut kept_override = String::new();
    if let Some(mut r) = target.route
        && let Some(o) = r.overrides.as_object_mut()
        && o.remove("model_override").is_some()
        && let Err(e) = target.routes.route_set_overrides(target.session_key, &r.overrides).await
    {
        tracing::error!(error = %e, "could not clear this session's own model after a global switch");
        kept_override = format!("\n⚠️ This chat keeps its own model switch: the session store is unavailable ({e}).");
    }
    CommandOutcome::Reply(format!("Model switched to `{model}`\nSaved to config.yaml (`--global`): every chat uses it now.{kept_override}"))
}

/// A session switch: stored in the route's overrides, creating the route if the chat has none yet.
async fn switch_session(
    target: Target<'_>,
    models: &Models,
    source: &SessionSource,
    model: &str,
    provider: Option<String>,
) -> CommandOutcome {
    let Target { routes, session_key, route } = target;
    let route = match route {
        Some(r) => r,
        None => match routes.route_get_or_create(session_key, source, &models.default_model().model).await {
            Ok(r) => r,
            Err(e) => return CommandOutcome::Reply(format!("⚠️ The session store is unavailable: {e}")),
        },
    };
    let overrides = with_model_override(route.overrides.clone(), model, provider.as_deref());
    match routes.route_set_overrides(session_key, &overrides).await {
        Ok(true) => {
            let provider = provider.map(|p| format!("\nProvider: {p}")).unwrap_or_default();
            CommandOutcome::Reply(format!("Model switched to `{model}`{provider}\n_(session only — add `--global` to persist)_"))
        }
        Ok(false) => CommandOutcome::Reply("⚠️ This conversation has no session yet; send a message first.".into()),
        Err(e) => CommandOutcome::Reply(format!("⚠️ The session store is unavailable: {e}")),
    }
}

/// The route's overrides with `model_override` set (overrides that are not an object start over).
fn with_model_override(mut overrides: serde_json::Value, model: &str, provider: Option<&str>) -> serde_json::Value {
    if !overrides.is_object() {
        overrides = json!({});
    }
    let mut entry = json!({ "model": model });
    if let Some(p) = provider {
        entry["provider"] = json!(p);
    }
    overrides["model_override"] = entry;
    overrides
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags() {
        assert_eq!(parse("").unwrap(), Switch::default());
        assert_eq!(
            parse("claude-sonnet-4 --provider anthropic --global").unwrap(),
            Switch { model: Some("claude-sonnet-4".into()), provider: Some("anthropic".into()), global: Some(true) }
        );
        assert_eq!(parse("x --session").unwrap().global, Some(false));
        assert!(parse("a b").is_err());
        assert!(parse("a --fast").is_err());
        assert!(parse("a --provider").is_err());
    }

    #[test]
    fn a_session_switch_replaces_only_the_model_override() {
        let cases = [
            // (overrides before, provider, overrides after)
            (json!(null), None, json!({ "model_override": { "model": "m" } })),
            (json!("junk"), Some("p"), json!({ "model_override": { "model": "m", "provider": "p" } })),
            (
                json!({ "title": "kept", "model_override": { "model": "old", "provider": "gone" } }),
                None,
                json!({ "title": "kept", "model_override": { "model": "m" } }),
            ),
        ];
        for (before, provider, after) in cases {
            assert_eq!(with_model_override(before.clone(), "m", provider), after, "from {before}");
        }
    }

    #[test]
    fn each_choice_gets_a_button_unless_its_command_is_too_long() {
        let long = "x".repeat(60);
        let buttons = choice_buttons(&["a".to_string(), long]);
        assert_eq!(buttons.len(), 1);
        assert_eq!(buttons[0].len(), 1);
        assert_eq!((buttons[0][0].label.as_str(), buttons[0][0].data.as_str()), ("a", "/model a"));
    }
}
