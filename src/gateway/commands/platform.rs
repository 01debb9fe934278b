//! `/platform list | pause <name> | resume <name>`: admins see every adapter's state and stop or
//! restart one adapter's receiving without restarting the gateway (a noisy channel, a platform
//! under maintenance). A pause lasts until `resume` or the next restart.
//!
//! Pausing the platform the admin is talking on is refused: the chat would go deaf at once, and
//! the `resume` could then only come from another platform or a restart, which is a lock-out a
//! typo should not cause.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::intake::auth::AuthPolicy;
use crate::gateway::ops::health::{AdapterState, AdapterStatus, HealthBoard};
use crate::gateway::ops::supervisor::PlatformControls;
use crate::observe::redact::redact_patterns;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;

pub(super) struct PlatformCommand;

static SPEC: CommandSpec = CommandSpec {
    name: "platform",
    aliases: &["platforms"],
    args_hint: "[list|pause <name>|resume <name>]",
    description: "Show each platform's state, or pause/resume one (admins)",
    runs_mid_turn: true,
};

const USAGE: &str = "Use `/platform list`, `/platform pause <name>` or `/platform resume <name>`.";

#[async_trait]
impl SlashCommand for PlatformCommand {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        let handles = ctx.handles;
        CommandOutcome::Reply(respond(&handles.auth, &handles.health, &handles.platforms, ctx.event, args))
    }
}

/// The reply to `/platform <args>` from `event`'s sender.
fn respond(auth: &AuthPolicy, health: &HealthBoard, controls: &PlatformControls, event: &InboundEvent, args: &str) -> String {
    if !auth.is_admin(event) {
        return "⛔ Only an admin can see or pause the platforms.".into();
    }
    let mut words = args.split_whitespace();
    let action = words.next().unwrap_or("list").to_ascii_lowercase();
    let name = words.next().map(str::to_ascii_lowercase);
    match (action.as_str(), name, words.next()) {
        ("list", None, None) => list(health, controls),
        ("pause", Some(name), None) => switch(health, controls, event, &name, true),
        ("resume", Some(name), None) => switch(health, controls, event, &name, false),
        ("pause" | "resume", None, _) => format!("`/platform {action}` needs a platform name. {USAGE}"),
        _ => format!("`/platform {}` is not understood. {USAGE}", args.trim()),
    }
}

/// Every adapter with its state and why.
fn list(health: &HealthBoard, controls: &PlatformControls) -> String {
    let statuses = health.snapshot().adapters;
    let names = controls.platforms();
    if names.is_empty() {
        return "No platform is running.".into();
    }
    let mut lines = vec!["Platforms:".to_string()];
    for name in &names {
        lines.push(match statuses.iter().find(|s| &s.platform == name) {
            Some(status) => format!("• {}", describe(status)),
            None => format!("• {name} — starting"),
        });
    }
    lines.join("\n")
}

fn describe(status: &AdapterStatus) -> String {
    let state = status.state.as_str().replace('_', " ");
    match &status.detail {
        // Details are adapter errors; they may quote a URL with a token in it.
        Some(detail) => format!("{} — {state}: {}", status.platform, redact_patterns(detail)),
        None => format!("{} — {state}", status.platform),
    }
}

/// Pause (`paused`) or resume `name`.
fn switch(health: &HealthBoard, controls: &PlatformControls, event: &InboundEvent, name: &str, paused: bool) -> String {
    let known = controls.platforms();
    if !known.iter().any(|k| k == name) {
        return format!("No platform named `{name}` runs here. Known: {}.", known.join(", "));
    }
    if paused && event.source.platform.as_str() == name {
        return format!(
            "⚠️ Not pausing {name}: you are talking to me on it, so this chat would stop receiving at once and only another \
             platform or a restart could resume it. Pause it from another platform."
        );
    }
    let state = health.snapshot().adapters.into_iter().find(|s| s.platform == name);
    if let Some(status) = state.as_ref().filter(|s| matches!(s.state, AdapterState::Parked | AdapterState::Stopped)) {
        return format!("{} — there is nothing to {}: fix the cause and restart the gateway.", describe(status), action(paused));
    }
    if let Some(status) = state.filter(|s| paused && s.state == AdapterState::Standby) {
        // The switch is this replica's: flipped here, it would leave the serving replica running.
        return format!(
            "⚠️ Not pausing {name}: another replica serves it ({}). Pause it there, from a chat on a platform that replica \
             serves, or stop that replica.",
            redact_patterns(status.detail.as_deref().unwrap_or("standby"))
        );
    }
    match controls.set_paused(name, paused) {
        Ok(true) if paused => {
            tracing::warn!(platform = name, by = ?event.source.user_id, "platform paused by an admin");
            format!("⏸️ {name} paused: it receives nothing until `/platform resume {name}` (or the next restart).")
        }
        Ok(true) => {
            tracing::warn!(platform = name, by = ?event.source.user_id, "platform resumed by an admin");
            format!("▶️ {name} resumed: it is reconnecting.")
        }
        Ok(false) if paused => format!("{name} is already paused."),
        Ok(false) => format!("{name} is not paused."),
        Err(unknown) => format!("No platform named `{name}` runs here. Known: {}.", unknown.known.join(", ")),
    }
}

fn action(paused: bool) -> &'static str {
    if paused { "pause" } else { "resume" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::tests::support::Wiring;
    use crate::gateway::tests::support::{self, RecordingChat};
    use hermes_adapter::{ChatType, HealthReporter, Platform, SessionSource};
    use std::path::Path;

    /// A gateway whose `chat` platform lets in `boss` (an admin) and `guest` (not one), with
    /// `chat`, `discord` and `email` supervised: chat connected, discord backing off, email parked.
    async fn rig() -> (tempfile::TempDir, Wiring) {
        let env = crate::config::Env::from_pairs(Vec::<(String, String)>::new());
        let yaml = "gateway:\n  allowed_users: [boss, guest]\n  admin_users: [boss]\n";
        let config = crate::config::load_str(yaml, Path::new("config.yaml"), &env).unwrap().config;
        let (dir, wiring) = support::gateway(config, RecordingChat::new(), std::sync::Arc::new(support::NoModel)).await;
        let (handles, board) = (&wiring.actors.commands, &wiring.health);
        for name in ["chat", "discord", "email"] {
            handles.platforms.register(name);
            board.register(name, HealthReporter::new());
        }
        board.set("chat", AdapterState::Connected, None, 0);
        let leak = "net: GET https://discord.com/api?token=abcdef0123456789 failed";
        board.set("discord", AdapterState::BackingOff, Some(leak.into()), 2);
        board.set("email", AdapterState::Parked, Some("auth: IMAP login refused".into()), 1);
        (dir, wiring)
    }

    /// `/platform <args>` from `event`'s sender, with the handles the command takes.
    fn ask(handles: &crate::gateway::commands::CommandHandles, event: &InboundEvent, args: &str) -> String {
        respond(&handles.auth, &handles.health, &handles.platforms, event, args)
    }

    fn from(user: &str) -> InboundEvent {
        let mut source = SessionSource::new(Platform::new("chat"), "c1", ChatType::Dm);
        source.user_id = Some(user.into());
        InboundEvent::text("e1", source, "/platform")
    }

    #[tokio::test]
    async fn only_admins_see_or_switch_platforms() {
        let (_dir, wiring) = rig().await;
        let handles = &wiring.actors.commands;
        for args in ["", "list", "pause discord"] {
            assert!(ask(handles, &from("guest"), args).starts_with("⛔ Only an admin"), "{args}");
        }
        assert!(!handles.platforms.is_paused("discord"));
    }

    #[tokio::test]
    async fn list_shows_every_adapter_with_its_state_and_masked_detail() {
        let (_dir, wiring) = rig().await;
        let reply = ask(&wiring.actors.commands, &from("boss"), "list");
        assert!(reply.contains("• chat — connected"), "{reply}");
        assert!(reply.contains("• discord — backing off: net:"), "{reply}");
        assert!(reply.contains("• email — parked: auth: IMAP login refused"), "{reply}");
        assert!(!reply.contains("abcdef0123456789"), "a token in an error reached the chat: {reply}");
        assert_eq!(ask(&wiring.actors.commands, &from("boss"), ""), reply, "list is the default");
    }

    #[tokio::test]
    async fn pause_and_resume_flip_the_switch_and_say_so() {
        let (_dir, wiring) = rig().await;
        let (handles, boss) = (&wiring.actors.commands, from("boss"));
        let paused = ask(handles, &boss, "pause Discord");
        assert!(paused.contains("discord paused") && paused.contains("/platform resume discord"), "{paused}");
        assert!(handles.platforms.is_paused("discord"));
        assert_eq!(ask(handles, &boss, "pause discord"), "discord is already paused.");
        assert!(ask(handles, &boss, "resume discord").contains("discord resumed"));
        assert!(!handles.platforms.is_paused("discord"));
        assert_eq!(ask(handles, &boss, "resume discord"), "discord is not paused.");
    }

    #[tokio::test]
    async fn refuses_its_own_platform_unknown_names_parked_adapters_one_served_elsewhere_and_bad_usage() {
        let (_dir, wiring) = rig().await;
        let (handles, boss) = (&wiring.actors.commands, from("boss"));
        let own = ask(handles, &boss, "pause chat");
        assert!(own.starts_with("⚠️ Not pausing chat"), "{own}");
        assert!(!handles.platforms.is_paused("chat"));
        let unknown = ask(handles, &boss, "pause telegram");
        assert_eq!(unknown, "No platform named `telegram` runs here. Known: chat, discord, email.");
        wiring.health.set("discord", AdapterState::Standby, Some("standby: replica-b holds the connection".into()), 0);
        let elsewhere = ask(handles, &boss, "pause discord");
        assert!(elsewhere.starts_with("⚠️ Not pausing discord: another replica serves it (standby: replica-b"), "{elsewhere}");
        assert!(!handles.platforms.is_paused("discord"), "a switch here would not stop the replica serving it");
        let parked = ask(handles, &boss, "pause email");
        assert!(parked.contains("email — parked") && parked.contains("nothing to pause"), "{parked}");
        assert!(!handles.platforms.is_paused("email"));
        assert!(ask(handles, &boss, "pause").contains("needs a platform name"));
        assert!(ask(handles, &boss, "reboot discord").contains("is not understood"));
    }
}
