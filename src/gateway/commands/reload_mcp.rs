//! `/reload-mcp [approve|always|cancel]`: an admin re-reads config.yaml (and `.env`), tears every
//! MCP server down and connects the configured set again, then is told what changed; the model is
//! told too, by a note appended to this conversation. Admins only: the reload changes the tools of
//! every chat. Unless `approvals.mcp_reload_confirm: false` (read from the file on every use), it
//! asks first, because new tools invalidate the provider's prompt cache: Approve Once, Always
//! Approve (which writes that setting) or Cancel, as buttons and as the commands they stand for.
//! Texts are Hermes' (reference `mcp.md` §1.5).

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::config::{Env, Home};
use crate::mcp::{McpHub, ReloadReport};
use crate::store::{NewMessage, Routes, SessionLog};
use async_trait::async_trait;
use hermes_adapter::Button;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(super) struct ReloadMcp;

static SPEC: CommandSpec = CommandSpec {
    name: "reload-mcp",
    aliases: &["reload_mcp"],
    args_hint: "",
    description: "Reload MCP servers from config.yaml (admins: it changes the tools of every chat)",
    // The note it appends must not land in the middle of a running turn's messages.
    runs_mid_turn: false,
};

/// How long a confirmation prompt can be answered (Hermes: 300 s).
const CONFIRM_TTL: Duration = Duration::from_secs(300);

const NOT_ADMIN: &str = "⛔ Only an admin can reload the MCP servers: it changes the tools of every chat.";
const CANCELLED: &str = "🟡 /reload-mcp cancelled. MCP tools unchanged.";
const ALWAYS_NOTE: &str =
    "ℹ️ Future `/reload-mcp` calls will run without confirmation. Re-enable via `approvals.mcp_reload_confirm: true` in config.yaml.";
const NOTHING_PENDING: &str = "No `/reload-mcp` is waiting for confirmation (it expires after 5 minutes). Send /reload-mcp again.";
const USAGE: &str = "Use `/reload-mcp`, then answer `/reload-mcp approve`, `/reload-mcp always` or `/reload-mcp cancel`.";

/// What `/reload-mcp` works with: the hub, where the configuration is read from, and the prompts
/// waiting for an answer.
pub(crate) struct McpCommandHandles {
    pub hub: Arc<McpHub>,
    pub home: Home,
    pub pending: PendingReloads,
}

/// Sessions asked to confirm a reload, and when. An answer without a prompt, or after it
/// expired, reloads nothing: a button pressed twice reloads once.
#[derive(Default)]
pub(crate) struct PendingReloads(Mutex<HashMap<String, Instant>>);

impl PendingReloads {
    fn ask(&self, session_key: &str) {
        let mut asked = self.0.lock().unwrap_or_else(|p| p.into_inner());
        asked.retain(|_, at| at.elapsed() < CONFIRM_TTL);
        asked.insert(session_key.to_string(), Instant::now());
    }

    /// Whether a prompt of this session was waiting (it no longer is).
    fn take(&self, session_key: &str) -> bool {
        let mut asked = self.0.lock().unwrap_or_else(|p| p.into_inner());
        asked.remove(session_key).is_some_and(|at| at.elapsed() < CONFIRM_TTL)
    }
}

/// What the user asked for: a reload, or an answer to its confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    Reload,
    Answer(Answer),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Once,
    Always,
    Cancel,
}

/// The words Hermes' text prompt accepts, after `/reload-mcp`.
fn parse(args: &str) -> Option<Ask> {
    let answer = match args.trim().to_ascii_lowercase().as_str() {
        "" => return Some(Ask::Reload),
        "approve" | "once" | "yes" | "ok" | "confirm" => Answer::Once,
        "always" | "remember" => Answer::Always,
        "cancel" | "no" | "deny" | "nevermind" => Answer::Cancel,
        _ => return None,
    };
    Some(Ask::Answer(answer))
}

#[async_trait]
impl SlashCommand for ReloadMcp {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        let h = ctx.handles;
        if !h.auth.is_admin(ctx.event) {
            return CommandOutcome::Reply(NOT_ADMIN.into());
        }
        let Some(ask) = parse(args) else { return CommandOutcome::Reply(USAGE.into()) };
        let transcript = Transcript { routes: h.routes.as_ref(), log: h.session_log.as_ref(), session_key: ctx.session_key };
        tracing::info!(by = ?ctx.event.source.user_id, platform = %ctx.event.source.platform, ?ask, "/reload-mcp");
        respond(&h.mcp, transcript, ask).await
    }
}

/// The conversation the reload note goes to.
struct Transcript<'a> {
    routes: &'a dyn Routes,
    log: &'a dyn SessionLog,
    session_key: &'a str,
}

async fn respond(mcp: &McpCommandHandles, transcript: Transcript<'_>, ask: Ask) -> CommandOutcome {
    let answer = match ask {
        Ask::Reload => {
            return match confirm_needed(&mcp.home) {
                Ok(true) => {
                    mcp.pending.ask(transcript.session_key);
                    CommandOutcome::ReplyWithButtons(confirm_prompt(), confirm_buttons())
                }
                Ok(false) => CommandOutcome::Reply(reload(mcp, &transcript).await),
                Err(e) => CommandOutcome::Reply(failed(&e)),
            };
        }
        Ask::Answer(answer) => answer,
    };
    if !mcp.pending.take(transcript.session_key) {
        return CommandOutcome::Reply(NOTHING_PENDING.into());
    }
    CommandOutcome::Reply(match answer {
        Answer::Cancel => CANCELLED.into(),
        Answer::Once => reload(mcp, &transcript).await,
        Answer::Always => {
            let saved = crate::config::set_mcp_reload_confirm(&mcp.home.config_file(), false);
            let mut reply = reload(mcp, &transcript).await;
            match saved {
                Ok(()) => reply.push_str(&format!("\n\n{ALWAYS_NOTE}")),
                Err(e) => reply.push_str(&format!("\n\n⚠️ The choice could not be saved ({e}); the next /reload-mcp asks again.")),
            }
            reply
        }
    })
}

/// `approvals.mcp_reload_confirm` as config.yaml says now.
fn confirm_needed(home: &Home) -> Result<bool, String> {
    Ok(load(home)?.approvals.mcp_reload_confirm)
}

/// config.yaml and `.env` as they are now, validated like at start.
fn load(home: &Home) -> Result<crate::config::Config, String> {
    let env = Env::layered(&home.env_file(), Env::from_process()).map_err(|e| e.to_string())?;
    crate::config::load(home, &env).map(|loaded| loaded.config).map_err(|e| e.to_string())
}

/// Re-read the configuration and reload the hub with its servers; the reply. An invalid
/// configuration changes nothing.
async fn reload(mcp: &McpCommandHandles, transcript: &Transcript<'_>) -> String {
    let config = match load(&mcp.home) {
        Ok(config) => config,
        Err(e) => return failed(&e),
    };
    let report = mcp.hub.reload(config.mcp_servers).await;
    tracing::warn!(added = ?report.added, removed = ?report.removed, tools = report.tools, "MCP servers reloaded by an admin");
    append_note(transcript, &report).await;
    reloaded_reply(&report)
}

/// Tell the model, in this conversation, that its tools changed (a user-role message, as Hermes).
async fn append_note(transcript: &Transcript<'_>, report: &ReloadReport) {
    let Some(route) = transcript.routes.route_get(transcript.session_key).await.ok().flatten() else { return };
    let message = NewMessage { session_id: route.session_id, role: "user".into(), content: transcript_note(report), ..Default::default() };
    if let Err(e) = transcript.log.message_append(message).await {
        tracing::warn!(error = %e, "cannot append the MCP reload note to the conversation");
    }
}

fn failed(error: &str) -> String {
    format!("❌ MCP reload failed: {error}")
}

fn confirm_prompt() -> String {
    "⚠️ **Confirm /reload-mcp**\n\n\
     This re-reads config.yaml, reconnects every MCP server and changes the tools of every chat. New tools invalidate the \
     provider's prompt cache, so each conversation's next reply costs more.\n\n\
     Approve Once (`/reload-mcp approve`), Always Approve (`/reload-mcp always`: never ask again) or Cancel \
     (`/reload-mcp cancel`). This expires in 5 minutes."
        .into()
}

fn confirm_buttons() -> Vec<Vec<Button>> {
    let button = |label: &str, data: &str| Button { label: label.into(), data: data.into() };
    vec![vec![
        button("Approve Once", "/reload-mcp approve"),
        button("Always Approve", "/reload-mcp always"),
        button("Cancel", "/reload-mcp cancel"),
    ]]
}

/// Hermes' reply: the title, what changed, and how many tools are available now.
fn reloaded_reply(report: &ReloadReport) -> String {
    let mut lines = vec!["🔄 **MCP Servers Reloaded**".to_string()];
    for (mark, label, names) in
        [("♻️", "Reconnected", &report.reconnected), ("➕", "Added", &report.added), ("➖", "Removed", &report.removed)]
    {
        if !names.is_empty() {
            lines.push(format!("{mark} {label}: {}", names.join(", ")));
        }
    }
    if report.servers == 0 {
        lines.push("No MCP servers connected.".into());
    } else {
        lines.push(format!("🔧 {} tool(s) available from {} server(s)", report.tools, report.servers));
    }
    lines.join("\n")
}

/// The note the model reads before its next turn.
fn transcript_note(report: &ReloadReport) -> String {
    let mut parts = vec!["[IMPORTANT: MCP servers have been reloaded.".to_string()];
    for (label, names) in [("Added", &report.added), ("Removed", &report.removed), ("Reconnected", &report.reconnected)] {
        if !names.is_empty() {
            parts.push(format!("{label} servers: {}.", names.join(", ")));
        }
    }
    parts.push(format!("{} MCP tool(s) now available.", report.tools));
    parts.push("The tool list for this conversation has been updated accordingly.]".into());
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(added: &[&str], removed: &[&str], reconnected: &[&str], tools: usize, servers: usize) -> ReloadReport {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect();
        ReloadReport { added: names(added), removed: names(removed), reconnected: names(reconnected), tools, servers }
    }

    #[test]
    fn the_reply_lists_what_changed_and_the_tools_now_available() {
        let cases = [
            (report(&[], &[], &[], 0, 0), "🔄 **MCP Servers Reloaded**\nNo MCP servers connected."),
            (
                report(&["fs"], &["old"], &["everything", "gh"], 17, 3),
                "🔄 **MCP Servers Reloaded**\n♻️ Reconnected: everything, gh\n➕ Added: fs\n➖ Removed: old\n🔧 17 tool(s) available from 3 server(s)",
            ),
            (report(&[], &["old"], &[], 0, 0), "🔄 **MCP Servers Reloaded**\n➖ Removed: old\nNo MCP servers connected."),
        ];
        for (report, expected) in cases {
            assert_eq!(reloaded_reply(&report), expected);
        }
    }

    #[test]
    fn the_transcript_note_tells_the_model_what_changed() {
        assert_eq!(
            transcript_note(&report(&["fs"], &[], &["everything"], 14, 2)),
            "[IMPORTANT: MCP servers have been reloaded. Added servers: fs. Reconnected servers: everything. 14 MCP tool(s) now \
             available. The tool list for this conversation has been updated accordingly.]"
        );
        assert_eq!(
            transcript_note(&report(&[], &[], &[], 0, 0)),
            "[IMPORTANT: MCP servers have been reloaded. 0 MCP tool(s) now available. The tool list for this conversation has been \
             updated accordingly.]"
        );
    }

    #[test]
    fn answers_and_their_words() {
        let cases = [
            ("", Some(Ask::Reload)),
            ("approve", Some(Ask::Answer(Answer::Once))),
            (" YES ", Some(Ask::Answer(Answer::Once))),
            ("always", Some(Ask::Answer(Answer::Always))),
            ("remember", Some(Ask::Answer(Answer::Always))),
            ("cancel", Some(Ask::Answer(Answer::Cancel))),
            ("nevermind", Some(Ask::Answer(Answer::Cancel))),
            ("now please", None),
        ];
        for (args, expected) in cases {
            assert_eq!(parse(args), expected, "{args:?}");
        }
    }

    #[test]
    fn a_confirmation_is_answered_once_and_only_in_its_session() {
        let pending = PendingReloads::default();
        assert!(!pending.take("s1"), "nothing asked");
        pending.ask("s1");
        assert!(!pending.take("s2"), "another session's prompt");
        assert!(pending.take("s1"));
        assert!(!pending.take("s1"), "a second press reloads nothing");
    }

    #[test]
    fn the_prompt_has_hermes_title_and_three_buttons_matching_its_text() {
        let prompt = confirm_prompt();
        assert!(prompt.starts_with("⚠️ **Confirm /reload-mcp**"), "{prompt}");
        let buttons = confirm_buttons();
        let labels: Vec<&str> = buttons[0].iter().map(|b| b.label.as_str()).collect();
        assert_eq!(labels, ["Approve Once", "Always Approve", "Cancel"]);
        for b in &buttons[0] {
            assert!(prompt.contains(&format!("`{}", b.data)), "the text offers {} too: {prompt}", b.data);
            assert!(b.data.len() <= 64, "fits Telegram's callback data");
        }
    }

    /// `/reload-mcp <args>` from `user` in the rig's chat, through the command's `run`.
    async fn ask(wiring: &crate::gateway::tests::support::Wiring, user: &str, args: &str) -> CommandOutcome {
        use hermes_adapter::{ChatType, InboundEvent, Platform, SessionSource};
        let mut source = SessionSource::new(Platform::new("chat"), "c1", ChatType::Dm);
        source.user_id = Some(user.into());
        let event = InboundEvent::text("e1", source, format!("/reload-mcp {args}"));
        let handles = &wiring.actors.commands;
        let mut session = crate::gateway::turn::queue::SessionState::new(wiring.store.clone());
        let mut ctx = CommandContext { handles, event: &event, session_key: "chat:c1", session: &mut session };
        ReloadMcp.run(&mut ctx, args).await
    }

    fn text(outcome: &CommandOutcome) -> &str {
        match outcome {
            CommandOutcome::Reply(text) | CommandOutcome::ReplyWithButtons(text, _) => text,
            CommandOutcome::ReplyAndRun { .. } => "",
        }
    }

    #[tokio::test]
    async fn only_admins_reload_and_a_reload_waits_for_one_confirmation() {
        let (_dir, wiring, _chat) = crate::gateway::tests::support::rig().await;
        assert_eq!(text(&ask(&wiring, "guest", "").await), NOT_ADMIN);
        assert_eq!(text(&ask(&wiring, "guest", "approve").await), NOT_ADMIN, "a guest cannot answer the prompt either");
        let prompt = ask(&wiring, "boss", "").await;
        assert!(
            matches!(&prompt, CommandOutcome::ReplyWithButtons(t, b) if t.starts_with("⚠️ **Confirm /reload-mcp**") && b[0].len() == 3)
        );
        let reloaded = ask(&wiring, "boss", "approve").await;
        assert!(text(&reloaded).starts_with("🔄 **MCP Servers Reloaded**"), "{reloaded:?}");
        assert_eq!(text(&ask(&wiring, "boss", "approve").await), NOTHING_PENDING, "a second press reloads nothing");
        ask(&wiring, "boss", "").await;
        assert_eq!(text(&ask(&wiring, "boss", "cancel").await), CANCELLED);
        assert_eq!(text(&ask(&wiring, "boss", "approve").await), NOTHING_PENDING, "cancelled means answered");
        assert!(text(&ask(&wiring, "boss", "now").await).starts_with("Use `/reload-mcp`"));
    }

    #[tokio::test]
    async fn always_saves_the_choice_and_later_reloads_do_not_ask() {
        let (dir, wiring, _chat) = crate::gateway::tests::support::rig().await;
        std::fs::write(dir.path().join("config.yaml"), "approvals:\n  mode: manual\n").unwrap();
        ask(&wiring, "boss", "").await;
        let always = ask(&wiring, "boss", "always").await;
        assert!(text(&always).starts_with("🔄 **MCP Servers Reloaded**") && text(&always).ends_with(ALWAYS_NOTE), "{always:?}");
        let saved = std::fs::read_to_string(dir.path().join("config.yaml")).unwrap();
        assert!(saved.contains("mcp_reload_confirm: false") && saved.contains("mode: manual"), "{saved}");
        let direct = ask(&wiring, "boss", "").await;
        assert!(matches!(&direct, CommandOutcome::Reply(t) if t.starts_with("🔄 **MCP Servers Reloaded**")), "{direct:?}");
    }

    #[tokio::test]
    async fn an_invalid_config_reloads_nothing_and_says_why() {
        let (dir, wiring, _chat) = crate::gateway::tests::support::rig().await;
        let config = dir.path().join("config.yaml");
        std::fs::write(&config, "approvals:\n  mcp_reload_confirm: false\nmcp_servers:\n  bad:\n    command: x\n    url: http://y\n")
            .unwrap();
        let failed = ask(&wiring, "boss", "").await;
        assert!(text(&failed).starts_with("❌ MCP reload failed: ") && text(&failed).contains("mcp_servers.bad"), "{failed:?}");
        assert!(wiring.mcp.status().is_empty(), "the hub kept its servers: {:?}", wiring.mcp.status());
        std::fs::write(&config, "mcp_servers: [not, a, mapping]\n").unwrap();
        let failed = ask(&wiring, "boss", "").await;
        assert!(text(&failed).starts_with("❌ MCP reload failed: "), "before the prompt, too: {failed:?}");
    }
}
