//! `/status`: this conversation's session, model, usage, approvals (pending, `/yolo`), the
//! gateway's platforms, its MCP servers, the outbox's queues, the home channels and the cron ticker.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand, undelivered};
use crate::agent::ModelSpec;
use crate::gateway::conversation::models::Models;
use crate::gateway::cron::ticker::CronCommandHandles;
use crate::gateway::ops::health::{AdapterState, HealthBoard};
use crate::gateway::turn::approvals::board::ApprovalBoard;
use crate::gateway::turn::queue::SessionState;
use crate::mcp::{ServerState, ServerStatus};
use crate::observe::redact::redact_patterns;
use crate::store::{Outbox, RouteEntry, Routes, SessionLog, UsageLedger};
use async_trait::async_trait;

pub(super) struct Status;

static SPEC: CommandSpec = CommandSpec {
    name: "status",
    aliases: &[],
    args_hint: "",
    description: "Show this session's state, model, usage and connected platforms",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for Status {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, _args: &str) -> CommandOutcome {
        let h = ctx.handles;
        let reads = Reads {
            routes: h.routes.as_ref(),
            log: h.session_log.as_ref(),
            usage: h.usage.as_ref(),
            outbox: h.outbox.as_ref(),
            models: &h.models,
            health: &h.health,
            approvals: &h.approvals.board,
            cron: &h.cron,
        };
        status(reads, ctx.session, ctx.session_key).await
    }
}

/// What `/status` reads: nearly every handle, none of which it changes.
struct Reads<'a> {
    routes: &'a dyn Routes,
    log: &'a dyn SessionLog,
    usage: &'a dyn UsageLedger,
    outbox: &'a dyn Outbox,
    models: &'a Models,
    health: &'a HealthBoard,
    approvals: &'a ApprovalBoard,
    cron: &'a CronCommandHandles,
}

async fn status(reads: Reads<'_>, session: &SessionState, session_key: &str) -> CommandOutcome {
    let mut text = String::from("📊 **Hermes Gateway Status**\n\n");
    let route = reads.routes.route_get(session_key).await.ok().flatten();
    let model = reads.models.model_for(route.as_ref().map(|r| &r.overrides));
    match &route {
        Some(route) => {
            let stores = SessionStores { routes: reads.routes, log: reads.log, ledger: reads.usage };
            text.push_str(&session_lines(stores, reads.models, route, &model).await);
        }
        None => text.push_str("**Session:** none yet — send a message to start one\n"),
    }
    match &model.provider {
        Some(p) => text.push_str(&format!("**Model:** `{}` ({p})\n", model.model)),
        None => text.push_str(&format!("**Model:** `{}`\n", model.model)),
    }
    text.push_str(&turn_lines(session, reads.approvals, session_key));
    text.push_str(&format!("**Platforms:** {}\n", platforms(reads.health)));
    if let Some(cluster) = reads.health.snapshot().cluster {
        text.push_str(&format!("**Replicas:** {}\n", cluster.lines(chrono::Utc::now()).join("\n")));
    }
    if let Some(mcp) = mcp_line(&reads.health.mcp_servers()) {
        text.push_str(&format!("**MCP servers:** {mcp}\n"));
    }
    if let Some(outbox) = outbox_line(reads.outbox).await {
        text.push_str(&format!("**Outbox:** {outbox}\n"));
    }
    text.push_str(&format!("**Home channels:** {}\n", home_channels(reads.cron)));
    text.push_str(&format!("**Cron ticker:** {}", reads.cron.ticker.snapshot().line()));
    CommandOutcome::Reply(text)
}

/// The stores that know about one session.
struct SessionStores<'a> {
    routes: &'a dyn Routes,
    log: &'a dyn SessionLog,
    ledger: &'a dyn UsageLedger,
}

/// The stored session behind the route: identity, activity, token usage, cost and context fill.
/// A failed store read shows less (or zero tokens) rather than failing `/status`.
async fn session_lines(stores: SessionStores<'_>, models: &Models, route: &RouteEntry, model: &ModelSpec) -> String {
    let SessionStores { routes, log, ledger } = stores;
    let mut text = String::new();
    let session = routes.session_get(&route.session_id).await.ok().flatten();
    let usage = ledger.session_usage(&route.session_id).await.ok();
    text.push_str(&format!("**Session ID:** `{}`\n", route.session_id));
    if let Some(s) = &session {
        text.push_str(&format!("**Title:** {}\n", s.title.clone().unwrap_or_else(|| "(untitled)".into())));
        text.push_str(&format!("**Created:** {}\n", s.started_at.format("%Y-%m-%d %H:%M UTC")));
        text.push_str(&format!("**Messages:** {}\n", s.message_count));
    }
    text.push_str(&format!("**Last Activity:** {}\n", route.updated_at.format("%Y-%m-%d %H:%M UTC")));
    if let Some(u) = usage {
        text.push_str(&format!(
            "**Tokens:** {} in / {} out ({} cached), {} API call(s)\n",
            u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.api_calls
        ));
        text.push_str(&format!("**Cost:** {}\n", super::usage::format_cost(u.cost_usd, &u.models, models)));
    }
    let (last_prompt, _) = log.session_prompt_tokens(&route.session_id).await.unwrap_or((0, 0));
    let window = models.context_length(&model.model);
    text.push_str(&format!("**Context:** {last_prompt} / {window} tokens ({}%)\n", (last_prompt * 100).checked_div(window).unwrap_or(0)));
    text
}

/// Whether a turn runs, what waits behind it, and what it may do without asking.
fn turn_lines(session: &SessionState, approvals: &ApprovalBoard, session_key: &str) -> String {
    let running = if session.is_running() { "Yes ⚡" } else { "No" };
    let mut text = format!("**Agent Running:** {running}\n");
    text.push_str(&format!("**Queued:** {}\n", session.queued()));
    let pending = approvals.pending(session_key);
    if pending > 0 {
        text.push_str(&format!("**Awaiting approval:** {pending} command(s) — `/approve` or `/deny`\n"));
    }
    let yolo = if approvals.yolo(session_key) { "on ⚡ (flagged commands run without asking)" } else { "off" };
    text.push_str(&format!("**YOLO:** {yolo}\n"));
    text
}

/// Each adapter with its connection state ("telegram ✅, discord (reconnecting)").
fn platforms(health: &HealthBoard) -> String {
    let snapshot = health.snapshot();
    let platforms: Vec<String> = snapshot
        .adapters
        .iter()
        .map(|a| match a.state {
            AdapterState::Connected => format!("{} ✅", a.platform),
            other => format!("{} ({})", a.platform, other.as_str()),
        })
        .collect();
    if platforms.is_empty() { "none".to_string() } else { platforms.join(", ") }
}

/// Each MCP server with its state and tools ("github ✅ 12 tools, fs down (3 tools): connection
/// refused"); `None` when none is configured. Errors are masked again: they may quote a URL.
fn mcp_line(servers: &[ServerStatus]) -> Option<String> {
    if servers.is_empty() {
        return None;
    }
    let parts: Vec<String> = servers
        .iter()
        .map(|s| match (s.state, &s.last_error) {
            (ServerState::Connected, _) => format!("{} ✅ {} tools", s.name, s.tools),
            (ServerState::Disabled, _) => format!("{} (disabled)", s.name),
            (state, Some(error)) => format!("{} {} ({} tools): {}", s.name, state.as_str(), s.tools, redact_patterns(error)),
            (state, None) => format!("{} {} ({} tools)", s.name, state.as_str(), s.tools),
        })
        .collect();
    Some(parts.join(", "))
}

fn home_channels(cron: &CronCommandHandles) -> String {
    let homes: Vec<String> = cron.homes.targets().into_iter().map(|(p, t)| format!("{p} `{}`", t.chat_id)).collect();
    if homes.is_empty() { "none (send /sethome in a chat)".to_string() } else { homes.join(", ") }
}

/// Each platform's waiting and undelivered messages ("telegram 3 waiting (oldest 4 min), 1
/// undelivered; discord 1 undelivered"); `None` when nothing waits and nothing was given up.
async fn outbox_line(outbox: &dyn Outbox) -> Option<String> {
    let summary = match outbox.outbox_summary().await {
        Ok(summary) => summary,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the outbox's queues for /status");
            return None;
        }
    };
    let now = undelivered::now_ms();
    let queues: Vec<String> = summary.iter().filter_map(|s| undelivered::queue_line(s, now)).collect();
    (!queues.is_empty()).then(|| queues.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::tests::support::{dead_letter, queued, rig};

    #[tokio::test]
    async fn the_outbox_line_counts_waiting_and_undelivered_messages_and_is_absent_when_both_are_zero() {
        let (_dir, wiring, _chat) = rig().await;
        let store = &wiring.store;
        assert_eq!(outbox_line(store.as_ref()).await, None, "nothing queued, nothing said");
        dead_letter(store, "k1", "c1", "lost").await;
        queued(store, "k2", "c2", "on its way").await;
        let line = outbox_line(store.as_ref()).await.unwrap_or_default();
        assert!(line.starts_with("chat 1 waiting (oldest ") && line.ends_with(" s), 1 undelivered"), "{line}");
    }

    #[test]
    fn the_mcp_line_shows_each_servers_state_tools_and_masked_error() {
        let server = |name: &str, state, tools, error: Option<&str>| ServerStatus {
            name: name.into(),
            state,
            tools,
            last_error: error.map(str::to_string),
        };
        let leak = "GET https://mcp.example/sse?token=abcdef0123456789 failed";
        let cases: [(Vec<ServerStatus>, Option<&str>); 4] = [
            (vec![], None),
            (vec![server("everything", ServerState::Connected, 13, Some("old error"))], Some("everything ✅ 13 tools")),
            (
                vec![server("off", ServerState::Disabled, 0, None), server("slow", ServerState::Connecting, 0, None)],
                Some("off (disabled), slow connecting (0 tools)"),
            ),
            (vec![server("gh", ServerState::Down, 4, Some("connection refused"))], Some("gh down (4 tools): connection refused")),
        ];
        for (servers, expected) in cases {
            assert_eq!(mcp_line(&servers).as_deref(), expected, "{servers:?}");
        }
        let masked = mcp_line(&[server("gh", ServerState::Down, 0, Some(leak))]).unwrap_or_default();
        assert!(masked.starts_with("gh down (0 tools): GET https://mcp.example") && !masked.contains("abcdef0123456789"), "{masked}");
    }
}
