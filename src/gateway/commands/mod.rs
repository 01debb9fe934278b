//! Slash commands: parsing, the registry, and dispatch. Each command is one file in this folder
//! exporting a unit struct that implements [`SlashCommand`]; [`registry`] lists them. A command
//! is handed its event, its session's live state and the [`CommandHandles`]; its `run` takes
//! from them only what it touches and passes that to a function whose parameters say so
//! (`/stop` gets the session, `/usage` the routes, the usage ledger, the message log and the
//! models), so each command's signature is its list of needs.

mod approve;
mod background;
mod compress;
mod cron;
mod deny;
mod drop;
mod help;
mod list_commands;
mod model;
mod new;
mod pair;
mod platform;
mod queue;
mod reload_mcp;
mod resend;
mod restart;
mod retry;
mod sethome;
mod status;
mod steer;
mod stop;
mod title;
// `hermes outbox` lists, resends and drops dead letters with the same words and store calls.
pub(crate) mod undelivered;
mod undo;
mod usage;
mod voice;
mod whoami;
mod yolo;

pub(crate) use reload_mcp::McpCommandHandles;

use crate::gateway::conversation::models::Models;
use crate::gateway::intake::auth::AuthPolicy;
use crate::gateway::ops::health::HealthBoard;
use crate::gateway::turn::TurnHandles;
use crate::gateway::turn::approvals::ApprovalHandles;
use crate::gateway::turn::queue::SessionState;
use crate::store::{Outbox, Routes, SessionLog, UsageLedger};
use async_trait::async_trait;
use hermes_adapter::{Button, InboundEvent};
use std::sync::Arc;

/// A command's static description, used for dispatch, `/help`, `/commands` and platform menus.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommandSpec {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub args_hint: &'static str,
    pub description: &'static str,
    /// May run while the agent is working on a turn (otherwise the user is told to wait).
    pub runs_mid_turn: bool,
}

/// What a command asks the session to do after it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommandOutcome {
    /// Send this text back.
    Reply(String),
    /// Send this text back with buttons whose data are commands (the text must list the same
    /// choices for platforms without buttons).
    ReplyWithButtons(String, Vec<Vec<Button>>),
    /// Reply, then run this text as a normal agent prompt.
    ReplyAndRun { reply: Option<String>, prompt: String },
}

/// What commands may use beyond their session: built once at start-up. Each command's `run`
/// takes from it only what the command touches and hands that to a function whose parameters
/// say so; the store is here one concern at a time.
pub(crate) struct CommandHandles {
    /// Which conversation each chat is in, its per-session overrides, who talked where.
    pub routes: Arc<dyn Routes>,
    /// Stored messages: titles, `/undo`, `/retry`, the context fill.
    pub session_log: Arc<dyn SessionLog>,
    /// Tokens and cost per session (`/usage`, `/status`).
    pub usage: Arc<dyn UsageLedger>,
    /// Outbound messages: dead letters (`/undelivered`, `/resend`, `/drop`) and the queues (`/status`).
    pub outbox: Arc<dyn Outbox>,
    pub models: Arc<Models>,
    /// Who is an admin (`/model --global`).
    pub auth: Arc<AuthPolicy>,
    /// The adapters' states (`/status`).
    pub health: Arc<HealthBoard>,
    /// Every command (`/help`, `/commands`).
    pub registry: Arc<CommandRegistry>,
    /// What a turn runs with: `/background` starts one, `/compress` compacts as one does.
    pub turns: TurnHandles,
    /// Pending approvals and the standing rules (`/approve`, `/deny`, `/yolo`, `/status`).
    pub approvals: ApprovalHandles,
    /// Jobs, home channels and the ticker's health (`/cron`, `/sethome`, `/status`).
    pub cron: crate::gateway::cron::ticker::CronCommandHandles,
    /// The adapters' pause switches (`/platform`).
    pub platforms: Arc<crate::gateway::ops::supervisor::PlatformControls>,
    /// Cancelled by `/restart`: the gateway drains and exits 75.
    pub restart: tokio_util::sync::CancellationToken,
    /// The MCP hub and where its configuration is re-read from (`/reload-mcp`).
    pub mcp: McpCommandHandles,
}

/// What a running command may see and touch.
pub(crate) struct CommandContext<'a> {
    pub handles: &'a CommandHandles,
    pub event: &'a InboundEvent,
    pub session_key: &'a str,
    pub session: &'a mut SessionState,
}

#[async_trait]
pub(crate) trait SlashCommand: Send + Sync + 'static {
    fn spec(&self) -> &'static CommandSpec;
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome;
}

/// Every command available in chats, in the order `/help` shows them.
/// The slash commands, as a platform's command menu shows them: (name, description).
pub(crate) fn menu() -> Vec<(String, String)> {
    registry().specs().map(|spec| (spec.name.to_string(), spec.description.to_string())).collect()
}

pub(crate) fn registry() -> CommandRegistry {
    CommandRegistry {
        commands: vec![
            Arc::new(help::Help),
            Arc::new(list_commands::Commands),
            Arc::new(status::Status),
            Arc::new(new::New),
            Arc::new(stop::Stop),
            Arc::new(approve::Approve),
            Arc::new(deny::Deny),
            Arc::new(yolo::Yolo),
            Arc::new(voice::VoiceCommand),
            Arc::new(queue::Queue),
            Arc::new(steer::Steer),
            Arc::new(background::Background),
            Arc::new(cron::Cron),
            Arc::new(sethome::SetHome),
            Arc::new(model::Model),
            Arc::new(usage::UsageCommand),
            Arc::new(retry::Retry),
            Arc::new(undo::Undo),
            Arc::new(title::Title),
            Arc::new(compress::Compress),
            Arc::new(whoami::WhoAmI),
            Arc::new(pair::Pair),
            Arc::new(platform::PlatformCommand),
            Arc::new(undelivered::Undelivered),
            Arc::new(resend::Resend),
            Arc::new(drop::DropCommand),
            Arc::new(restart::Restart),
            Arc::new(reload_mcp::ReloadMcp),
        ],
    }
}

pub(crate) struct CommandRegistry {
    commands: Vec<Arc<dyn SlashCommand>>,
}

impl CommandRegistry {
    /// Exact name or alias, case-insensitive; no prefix abbreviations.
    pub(crate) fn find(&self, name: &str) -> Option<Arc<dyn SlashCommand>> {
        self.commands
            .iter()
            .find(|c| {
                let spec = c.spec();
                spec.name.eq_ignore_ascii_case(name) || spec.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
            })
            .cloned()
    }

    pub(crate) fn specs(&self) -> impl Iterator<Item = &'static CommandSpec> + '_ {
        self.commands.iter().map(|c| c.spec())
    }
}

/// A slash command recognised in a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedCommand {
    /// Lower-cased, without the slash and without a trailing `@botname`.
    pub name: String,
    pub args: String,
}

/// Recognise `/name[@bot] args`. Path-like text (`/usr/bin/x`) and a lone slash are not commands.
pub(crate) fn parse(text: &str) -> Option<ParsedCommand> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (word, args) = match rest.find(char::is_whitespace) {
        Some(i) => (&rest[..i], rest[i..].trim()),
        None => (rest, ""),
    };
    let name = word.split_once('@').map(|(n, _)| n).unwrap_or(word);
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-') {
        return None;
    }
    // Phones autocorrect `--` into dashes.
    let args = args.replace('—', "--").replace('–', "-");
    Some(ParsedCommand { name: name.to_lowercase(), args })
}

pub(crate) fn unknown_command_reply(name: &str) -> String {
    format!(
        "Unknown command `/{name}`. Type /commands to see what's available, or resend without the leading slash to send as a regular message."
    )
}

pub(crate) fn busy_refusal(name: &str) -> String {
    format!("⏳ Agent is running — `/{name}` can't run mid-turn. Wait for the current response or `/stop` first.")
}

/// One line of `/help` or `/commands`.
fn describe(spec: &CommandSpec) -> String {
    let mut line = format!("`/{}", spec.name);
    if !spec.args_hint.is_empty() {
        line.push(' ');
        line.push_str(spec.args_hint);
    }
    line.push('`');
    if !spec.aliases.is_empty() {
        let aliases: Vec<String> = spec.aliases.iter().map(|a| format!("/{a}")).collect();
        line.push_str(&format!(" ({})", aliases.join(", ")));
    }
    line.push_str(" — ");
    line.push_str(spec.description);
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_aliases_and_bot_suffix() {
        assert_eq!(parse("/help"), Some(ParsedCommand { name: "help".into(), args: "".into() }));
        assert_eq!(parse("/NEW@HermesBot  my title "), Some(ParsedCommand { name: "new".into(), args: "my title".into() }));
        assert_eq!(parse("/model gpt —global").map(|c| c.args), Some("gpt --global".into()));
        assert_eq!(parse("/usr/bin/python3 is broken"), None);
        assert_eq!(parse("/"), None);
        assert_eq!(parse("hello /help"), None);
    }

    #[test]
    fn registry_matches_exact_names_and_aliases_only() {
        let r = registry();
        assert_eq!(r.find("reset").map(|c| c.spec().name), Some("new"));
        assert_eq!(r.find("HELP").map(|c| c.spec().name), Some("help"));
        assert_eq!(r.find("q").map(|c| c.spec().name), Some("queue"));
        assert!(r.find("hel").is_none(), "no prefix matching");
        let names: Vec<&str> = r.specs().map(|s| s.name).collect();
        for required in [
            "help",
            "commands",
            "status",
            "new",
            "stop",
            "whoami",
            "queue",
            "steer",
            "background",
            "model",
            "usage",
            "retry",
            "undo",
            "title",
            "compress",
            "approve",
            "deny",
            "yolo",
            "voice",
            "undelivered",
            "resend",
            "drop",
            "reload-mcp",
        ] {
            assert!(names.contains(&required), "{required} missing");
        }
    }

    #[test]
    fn unknown_command_text_matches_hermes() {
        assert_eq!(
            unknown_command_reply("foo"),
            "Unknown command `/foo`. Type /commands to see what's available, or resend without the leading slash to send as a regular message."
        );
    }
}
