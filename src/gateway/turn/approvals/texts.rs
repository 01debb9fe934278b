//! Every text of the approval flow in one place: what the agent is told (the reference's BLOCKED
//! results, which keep "denied", "timed out" and "could not ask" apart), the prompt the chat
//! gets, and the replies to `/approve` and `/deny`.

use super::board::Reach;
use crate::agent::approval::LEAVE_SANDBOX;
use hermes_adapter::Button;
use hermes_guard::Finding;

const NOT_CONSENTED: &str = " The user has NOT consented to this action. Do NOT retry this command, do NOT rephrase it, and do NOT \
     attempt the same outcome via a different command. Stop the current workflow and wait for the user to respond before taking any \
     further destructive or irreversible action.";

/// The tool result when the user denied the command (with their reason, if they gave one).
pub(crate) fn denied(reason: Option<&str>) -> String {
    let reason =
        reason.map(str::trim).filter(|r| !r.is_empty()).map(|r| format!(" Reason given by the user: \"{r}\".")).unwrap_or_default();
    format!("BLOCKED: Command denied by user.{reason}{NOT_CONSENTED}")
}

/// The tool result when nobody answered in time.
pub(crate) fn timed_out(after_secs: u64) -> String {
    format!("BLOCKED: The approval request timed out after {after_secs}s without a user response.{NOT_CONSENTED} Silence is not consent.")
}

/// The tool result when the turn was stopped (`/stop`, `/new`, shutdown) while waiting.
pub(crate) fn stopped() -> String {
    format!("BLOCKED: The turn was stopped while the command waited for approval, so it did not run.{NOT_CONSENTED}")
}

/// The tool result when the prompt could not be put in front of the user.
pub(crate) const UNDELIVERABLE: &str = "BLOCKED: Failed to send approval request to user. Do NOT retry.";

/// The tool result for a cron run under `approvals.cron_mode: deny`.
pub(crate) fn cron_denied(findings: &str) -> String {
    format!(
        "BLOCKED: this scheduled job tried a command that needs approval:{findings}\nScheduled jobs have nobody to ask, and \
         approvals.cron_mode is deny. Do NOT retry it; report that the job needs this command approved."
    )
}

/// The tool result for a command matching an `approvals.deny` rule.
pub(crate) fn deny_rule(rule: &str) -> String {
    format!(
        "BLOCKED: this command matches the operator's deny rule `{rule}` (approvals.deny) and can never run here. Do NOT retry it, \
         rephrase it, or reach the same outcome another way."
    )
}

/// The chat message for one pending approval; `place` is `(position, of)` when several wait.
pub(crate) fn prompt(
    command: &str,
    findings: &[Finding],
    leaves_sandbox: bool,
    smart_denied: bool,
    place: Option<(usize, usize)>,
) -> String {
    let mut text = String::from("⚠️ **Dangerous command requires approval");
    if let Some((n, of)) = place {
        text.push_str(&format!(" ({n}/{of})"));
    }
    text.push_str(":**\n```\n");
    text.push_str(&command.replace("```", "`\u{200b}``"));
    text.push_str("\n```\n");
    let reasons: Vec<String> = findings
        .iter()
        .map(|f| if f.key == LEAVE_SANDBOX { format!("{} — the agent says: {}", f.key, f.detail) } else { f.key.to_string() })
        .collect();
    text.push_str(&format!("Reason: {}\n", reasons.join("; ")));
    if leaves_sandbox {
        text.push_str("🔓 If approved, it runs **outside the sandbox**, with your user's full access.\n");
    }
    if smart_denied {
        text.push_str("The approval model judged it dangerous; approving overrides that for this one operation only.\n");
    }
    text.push_str(
        "Reply `/approve` to execute this one operation, `/approve session` to approve this pattern for the session, \
         `/approve always` to approve permanently, or `/deny` to cancel.",
    );
    text
}

/// The chat message for one MCP tool call waiting for approval: the server, the tool and its
/// (scrubbed, shortened) arguments, and that the server is not trusted.
pub(crate) fn tool_prompt(server: &str, tool: &str, arguments: &str, place: Option<(usize, usize)>) -> String {
    let mut text = String::from("⚠️ **MCP tool call requires approval");
    if let Some((n, of)) = place {
        text.push_str(&format!(" ({n}/{of})"));
    }
    text.push_str(&format!(":**\nServer `{}` wants to run `{}` with:\n```\n", inline(server), inline(tool)));
    text.push_str(&arguments.replace("```", "`\u{200b}``"));
    text.push_str("\n```\n");
    text.push_str(
        "The server is configured as untrusted (`trust: untrusted`) and does not declare this tool read-only: it may change or \
         send anything the tool reaches.\n",
    );
    text.push_str(
        "Reply `/approve` to run this one call, `/approve session` to allow this tool for the rest of the session, or `/deny` to \
         cancel.",
    );
    text
}

/// A name shown between backticks, unable to end them.
fn inline(name: &str) -> String {
    name.chars().filter(|c| *c != '`' && !c.is_control()).take(120).collect()
}

/// The tool result for a cron run's MCP call that needs approval under `approvals.cron_mode: deny`.
pub(crate) fn cron_tool_denied(tool: &str) -> String {
    format!(
        "BLOCKED: this scheduled job called `{tool}`, an MCP tool of an untrusted server that needs approval. Scheduled jobs have \
         nobody to ask, and approvals.cron_mode is deny. Do NOT retry it; report that the job needs this tool approved."
    )
}

/// The buttons of an MCP tool call's prompt: no "always", which a tool call cannot have.
pub(crate) fn tool_buttons(id: &str) -> Vec<Vec<Button>> {
    let button = |label: &str, data: String| Button { label: label.to_string(), data };
    vec![
        vec![button("✅ Approve once", format!("/approve {id}")), button("✅ This session", format!("/approve session {id}"))],
        vec![button("❌ Deny", format!("/deny {id}"))],
    ]
}

/// The prompt's buttons; each names its approval so a press answers exactly this one.
pub(crate) fn buttons(id: &str) -> Vec<Vec<Button>> {
    let button = |label: &str, data: String| Button { label: label.to_string(), data };
    vec![
        vec![button("✅ Approve once", format!("/approve {id}")), button("✅ This session", format!("/approve session {id}"))],
        vec![button("✅ Always", format!("/approve always {id}")), button("❌ Deny", format!("/deny {id}"))],
    ]
}

/// What a chat is told when an approval it was asked for ended without an answer.
pub(crate) fn expired_notice(command: &str, why: &str) -> String {
    format!("⏱ {why}, so this command was denied and did not run:\n```\n{}\n```", command.replace("```", "`\u{200b}``"))
}

pub(crate) const NOTHING_TO_APPROVE: &str = "No pending command to approve.";
pub(crate) const NOTHING_TO_DENY: &str = "No pending command to deny.";
pub(crate) const STALE_APPROVE: &str = "⚠️ Approval expired (agent is no longer waiting). Ask the agent to try again.";
pub(crate) const STALE_DENY: &str = "❌ Command denied (approval was stale).";
pub(crate) const NOT_YOURS: &str = "⛔ Not allowed: only an allowed user of the chat that was asked can answer this approval.";
pub(crate) const ALWAYS_NEEDS_ADMIN: &str =
    "⛔ Only an admin can approve a command permanently. Use `/approve` for this once or `/approve session` for this session.";
pub(crate) const PENDING_NOTICE: &str = "⏳ A command is waiting for your approval: answer it with `/approve` or `/deny` (or the buttons on \
     the prompt). A plain reply does not approve anything. Your message will be handled after that.";

/// The reply to a successful `/approve`.
pub(crate) fn approved(count: usize, reach: Reach) -> String {
    let suffix = match reach {
        Reach::Session => " (pattern approved for this session)",
        Reach::Always => " (pattern approved permanently)",
        Reach::Once => "",
    };
    if count > 1 {
        format!("✅ {count} commands approved{suffix}. The agent is resuming...")
    } else {
        format!("✅ Command approved{suffix}. The agent is resuming...")
    }
}

/// Added to `/approve always` when it answered an MCP tool call.
pub(crate) const TOOL_CALLS_FOR_SESSION: &str =
    " MCP tool calls are never approved permanently: this tool is approved for the rest of this session only.";

/// The reply to a successful `/deny`.
pub(crate) fn denied_reply(count: usize, reason: Option<&str>) -> String {
    let what = if count > 1 { format!("❌ {count} commands denied.") } else { "❌ Command denied.".to_string() };
    match reason.map(str::trim).filter(|r| !r.is_empty()) {
        Some(r) => format!("{what} Reason relayed to the agent: \"{r}\""),
        None => what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_timeout_and_undeliverable_are_told_apart() {
        let deny = denied(Some("too risky"));
        assert!(deny.starts_with("BLOCKED: Command denied by user. Reason given by the user: \"too risky\"."), "{deny}");
        assert!(deny.contains("Do NOT retry"));
        assert!(!deny.contains("Silence"));
        let timeout = timed_out(60);
        assert!(timeout.contains("timed out") && timeout.ends_with("Silence is not consent."), "{timeout}");
        assert!(!UNDELIVERABLE.contains("denied by user"));
    }

    #[test]
    fn the_prompt_keeps_a_fence_in_the_command_from_closing_its_block() {
        let findings = [Finding { key: "recursive delete", detail: "rm -rf x".into() }];
        let text = prompt("echo ```\nrm -rf x", &findings, true, false, Some((2, 2)));
        assert_eq!(text.matches("```").count(), 2, "{text}");
        assert!(text.contains("(2/2)") && text.contains("outside the sandbox"));
    }

    #[test]
    fn a_tool_prompt_names_server_tool_and_arguments_and_cannot_be_broken_out_of() {
        let text = tool_prompt("fs`x", "mcp__fs__write_file", "{\"content\": \"```\\nhi\"}", None);
        assert!(text.contains("Server `fsx` wants to run `mcp__fs__write_file`"), "{text}");
        assert_eq!(text.matches("```").count(), 2, "{text}");
        assert!(text.contains("untrusted") && !text.contains("/approve always"), "{text}");
        assert!(tool_buttons("#abcdefgh").concat().iter().all(|b| !b.data.contains("always")));
    }

    #[test]
    fn buttons_fit_telegrams_callback_limit() {
        for row in buttons("#abcdefgh").into_iter().chain(tool_buttons("#abcdefgh")) {
            for b in row {
                assert!(b.data.len() <= 64, "{}", b.data);
                assert!(b.data.starts_with("/approve") || b.data.starts_with("/deny"));
            }
        }
    }
}
