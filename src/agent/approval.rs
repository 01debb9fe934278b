//! The approval-policy hook every terminal command passes through. [`GuardPolicy`] judges the
//! command with `hermes-guard`'s classifier (its syntax tree, after undoing disguises): hardline
//! commands never run; flagged ones are refused with their pattern keys until approvals from
//! chat land (a later issue), except with `approvals.mode: off` *and* an enforced sandbox; safe
//! ones run (inside the sandbox).

use crate::agent::tools::SessionScope;
use async_trait::async_trait;
use hermes_guard::{ClassifyContext, Finding, Verdict, classify};
use std::fmt::Write as _;
use std::path::Path;

/// The policy's answer about one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandDecision {
    Allow,
    /// Refused; the reason goes back to the model, which is told not to retry.
    Deny(String),
}

/// One command the terminal tool is about to run.
#[derive(Debug, Clone, Copy)]
pub struct CommandRequest<'a> {
    pub command: &'a str,
    /// Where it starts.
    pub workdir: &'a Path,
    /// Whether it will run under an enforced OS sandbox.
    pub sandboxed: bool,
}

#[async_trait]
pub trait ApprovalPolicy: Send + Sync + 'static {
    async fn check_command(&self, scope: &SessionScope, request: &CommandRequest<'_>) -> CommandDecision;
}

/// The classifier's verdict turned into a decision.
pub struct GuardPolicy {
    /// `approvals.mode: off`: flagged commands may run, but only inside an enforced sandbox.
    approvals_off: bool,
    /// The workspace, home, `HERMES_HOME` and writable dirs the classifier judges paths by.
    context: ClassifyContext,
}

impl GuardPolicy {
    pub fn new(approvals_off: bool, context: ClassifyContext) -> Self {
        GuardPolicy { approvals_off, context }
    }

    /// The classifier's context for a workspace: `~` is `$HOME` (or `/` without one).
    pub fn context_for(workspace: &Path, hermes_home: &Path, private_tmp: Option<&Path>) -> ClassifyContext {
        let home = std::env::var_os("HOME").filter(|home| !home.is_empty()).unwrap_or_else(|| "/".into());
        let context = ClassifyContext::new(workspace, home).with_hermes_home(hermes_home);
        match private_tmp {
            Some(tmp) => context.with_writable_dir(tmp),
            None => context,
        }
    }

    /// The decision for `request`, synchronously.
    pub fn decide(&self, request: &CommandRequest<'_>) -> CommandDecision {
        let context = self.context.clone().with_working_dir(request.workdir);
        // A panic in the classifier (third-party parsing code) must neither end the turn nor
        // let the command through.
        let verdict = std::panic::catch_unwind(|| classify(request.command, &context));
        let Ok(verdict) = verdict else {
            return CommandDecision::Deny(
                "BLOCKED: this command could not be judged safely; do not retry it. Write it more simply.".into(),
            );
        };
        match verdict {
            Verdict::Safe => CommandDecision::Allow,
            Verdict::Hardline(finding) => CommandDecision::Deny(hardline_message(&finding)),
            Verdict::Flagged(_) if self.approvals_off && request.sandboxed => CommandDecision::Allow,
            Verdict::Flagged(findings) => CommandDecision::Deny(flagged_message(&findings, self.approvals_off)),
        }
    }
}

#[async_trait]
impl ApprovalPolicy for GuardPolicy {
    async fn check_command(&self, _scope: &SessionScope, request: &CommandRequest<'_>) -> CommandDecision {
        self.decide(request)
    }
}

fn hardline_message(finding: &Finding) -> String {
    format!(
        "BLOCKED (hardline): {} ({}). This command can never run, whatever the approval settings. Do NOT retry it, rephrase it, or \
         reach the same outcome another way; if the user really wants it, they must run it themselves.",
        finding.key, finding.detail
    )
}

fn flagged_message(findings: &[Finding], approvals_off: bool) -> String {
    let mut out = String::from("BLOCKED: this command needs approval:");
    for finding in findings {
        let _ = write!(out, "\n- {} ({})", finding.key, finding.detail);
    }
    out.push('\n');
    if approvals_off {
        out.push_str(
            "Approvals are off, but flagged commands only run inside the OS sandbox, and the sandbox is not active on this gateway \
             (Landlock is unavailable or terminal.sandbox is off). ",
        );
    } else {
        out.push_str("Approving commands from the chat arrives with a later release, so flagged commands are refused for now. ");
    }
    out.push_str(
        "Do NOT retry it or rephrase it to get around the check. Find a way that stays inside the workspace and destroys nothing, or \
         ask the user to run it themselves.",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(approvals_off: bool) -> GuardPolicy {
        GuardPolicy::new(approvals_off, ClassifyContext::new("/work/ws", "/home/u").with_hermes_home("/home/u/.hermes"))
    }

    fn decide(policy: &GuardPolicy, command: &str, sandboxed: bool) -> CommandDecision {
        policy.decide(&CommandRequest { command, workdir: Path::new("/work/ws"), sandboxed })
    }

    #[test]
    fn hardline_is_refused_in_every_mode() {
        for (approvals_off, sandboxed) in [(false, false), (false, true), (true, false), (true, true)] {
            let decision = decide(&policy(approvals_off), "r''m -rf /", sandboxed);
            assert!(
                matches!(&decision, CommandDecision::Deny(why) if why.starts_with("BLOCKED (hardline): recursive delete of root filesystem")),
                "{decision:?}"
            );
        }
    }

    #[test]
    fn flagged_runs_only_with_approvals_off_inside_the_sandbox() {
        let command = "rm -rf /tmp/victim";
        let refused = decide(&policy(false), command, true);
        assert!(
            matches!(&refused, CommandDecision::Deny(why) if why.contains("- recursive delete (") && why.contains("later release")),
            "{refused:?}"
        );
        let unsandboxed = decide(&policy(true), command, false);
        assert!(matches!(&unsandboxed, CommandDecision::Deny(why) if why.contains("sandbox is not active")), "{unsandboxed:?}");
        assert_eq!(decide(&policy(true), command, true), CommandDecision::Allow);
    }

    #[test]
    fn safe_commands_run() {
        for command in ["ls -la", "git status", "cargo build", "echo hi > out.txt", "grep -r foo ."] {
            assert_eq!(decide(&policy(false), command, false), CommandDecision::Allow, "{command}");
        }
    }
}
