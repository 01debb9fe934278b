//! The approval-policy hook every terminal command passes through, and the classifier's part of
//! it. [`GuardPolicy`] judges a command with `hermes-guard`'s classifier (its syntax tree, after
//! undoing disguises): hardline commands never run; flagged ones, and any request to run outside
//! the sandbox, need a person's approval. The gateway's policy (`gateway::turn::approvals`) asks that
//! person in the chat; [`GuardPolicy`] on its own, where nobody can be asked, refuses them
//! (except flagged commands with `approvals.mode: off` inside an enforced sandbox).

use crate::agent::tools::SessionScope;
use async_trait::async_trait;
use hermes_guard::{ClassifyContext, Finding, Verdict, classify, keys};
use std::fmt::Write as _;
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// The policy's answer about one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandDecision {
    /// Run it: inside the sandbox, unless a person approved running it outside (`confined: false`).
    Run { confined: bool },
    /// Refused; the reason goes back to the model, which is told not to retry.
    Deny(String),
}

impl CommandDecision {
    /// Run inside the sandbox.
    pub const CONFINED: CommandDecision = CommandDecision::Run { confined: true };
}

/// One command the terminal tool is about to run.
#[derive(Debug, Clone, Copy)]
pub struct CommandRequest<'a> {
    pub command: &'a str,
    /// Where it starts.
    pub workdir: &'a Path,
    /// Whether it will run under an enforced OS sandbox.
    pub sandboxed: bool,
    /// The model asks to run it outside the sandbox, for this reason.
    pub leave_sandbox: Option<&'a str>,
}

/// One MCP tool call about to reach a server that is not trusted to act unasked
/// (`trust: untrusted`, a tool not declared read-only).
#[derive(Debug, Clone, Copy)]
pub struct ToolCallRequest<'a> {
    /// The configured server.
    pub server: &'a str,
    /// The tool as the model names it (`mcp__<server>__<tool>`).
    pub tool: &'a str,
    /// The arguments as a person is shown them: secrets masked, shortened.
    pub arguments: &'a str,
}

/// The policy's answer about one MCP tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolCallDecision {
    /// Send it.
    Allow,
    /// Refused; the reason goes back to the model and nothing reaches the server.
    Deny(String),
}

#[async_trait]
pub trait ApprovalPolicy: Send + Sync + 'static {
    /// Whether `request` may run, and where. May wait for a person's answer; `cancel` (the turn
    /// was stopped) ends the wait with a refusal.
    async fn check_command(&self, scope: &SessionScope, request: &CommandRequest<'_>, cancel: &CancellationToken) -> CommandDecision;

    /// Whether the MCP tool call `request` may be sent. May wait for a person's answer, like
    /// [`ApprovalPolicy::check_command`]. Where nobody can be asked (the default), it is refused.
    async fn check_tool_call(&self, _scope: &SessionScope, request: &ToolCallRequest<'_>, _cancel: &CancellationToken) -> ToolCallDecision {
        ToolCallDecision::Deny(unanswerable_tool_call(request.tool))
    }
}

/// Why an MCP tool call that needs approval is refused where nobody can approve it.
pub(crate) fn unanswerable_tool_call(tool: &str) -> String {
    format!(
        "BLOCKED: `{tool}` belongs to an MCP server marked untrusted, so every call that may change something needs a person's \
         approval, and nobody can approve it from this conversation. Nothing was sent to the server. Do NOT retry it or reach the \
         same outcome another way (the terminal included); tell the user it needs their approval in a chat."
    )
}

/// What the classifier makes of a command, before anyone is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Judgement {
    /// Runs without asking (inside the sandbox).
    Safe,
    /// Never runs; the text tells the model why.
    Hardline(String),
    /// Runs only once a person approves every finding. Never empty.
    NeedsApproval(Vec<Finding>),
}

/// The pattern key of a request to leave the sandbox (approved like any other key).
pub(crate) const LEAVE_SANDBOX: &str = "run outside the sandbox";

/// Keys about a place outside the workspace: approving one means the command must run outside
/// the sandbox to do what it was approved for, since the sandbox would stop exactly that part.
const OUTSIDE_KEYS: [&str; 20] = [
    LEAVE_SANDBOX,
    keys::WRITE_OUTSIDE_WORKSPACE,
    keys::MOVE_OUTSIDE_WORKSPACE,
    keys::DELETE_OUTSIDE_WORKSPACE,
    keys::PERMISSIONS_OUTSIDE_WORKSPACE,
    keys::DELETE_IN_ROOT_PATH,
    keys::OVERWRITE_SYSTEM_CONFIG,
    keys::SYSTEM_FILE_VIA_TEE,
    keys::SYSTEM_FILE_VIA_REDIRECT,
    keys::COPY_INTO_SYSTEM_CONFIG,
    keys::COPY_INTO_SENSITIVE,
    keys::EDIT_SENSITIVE,
    keys::EDIT_SENSITIVE_LONG,
    keys::EDIT_SENSITIVE_PERL,
    keys::EDIT_SYSTEM_CONFIG,
    keys::EDIT_SYSTEM_CONFIG_LONG,
    keys::EDIT_HERMES_CONFIG,
    keys::EDIT_HERMES_CONFIG_LONG,
    keys::EDIT_HERMES_CONFIG_PERL,
    keys::CHOWN_ROOT,
];

/// Whether approving `findings` means running outside the sandbox.
pub(crate) fn leaves_sandbox(findings: &[Finding]) -> bool {
    findings.iter().any(|f| OUTSIDE_KEYS.contains(&f.key))
}

/// The classifier's verdict turned into a decision.
pub(crate) struct GuardPolicy {
    /// `approvals.mode: off`: flagged commands may run, but only inside an enforced sandbox.
    approvals_off: bool,
    /// The workspace, home, `HERMES_HOME` and writable dirs the classifier judges paths by.
    context: ClassifyContext,
}

impl GuardPolicy {
    pub(crate) fn new(approvals_off: bool, context: ClassifyContext) -> Self {
        GuardPolicy { approvals_off, context }
    }

    /// The classifier's context for a workspace: `~` is `$HOME` (or `/` without one).
    pub(crate) fn context_for(workspace: &Path, hermes_home: &Path, private_tmp: Option<&Path>) -> ClassifyContext {
        let home = std::env::var_os("HOME").filter(|home| !home.is_empty()).unwrap_or_else(|| "/".into());
        let context = ClassifyContext::new(workspace, home).with_hermes_home(hermes_home);
        match private_tmp {
            Some(tmp) => context.with_writable_dir(tmp),
            None => context,
        }
    }

    /// What the classifier says about `request`; a request to leave the sandbox is one more
    /// finding to approve.
    pub(crate) fn judge(&self, request: &CommandRequest<'_>) -> Judgement {
        let context = self.context.clone().with_working_dir(request.workdir);
        // A panic in the classifier (third-party parsing code) must neither end the turn nor
        // let the command through.
        let verdict = std::panic::catch_unwind(|| classify(request.command, &context));
        let Ok(verdict) = verdict else {
            return Judgement::Hardline("BLOCKED: this command could not be judged safely; do not retry it. Write it more simply.".into());
        };
        let mut findings = match verdict {
            Verdict::Hardline(finding) => return Judgement::Hardline(hardline_message(&finding)),
            Verdict::Safe => Vec::new(),
            Verdict::Flagged(findings) => findings,
        };
        if let Some(reason) = request.leave_sandbox {
            findings.push(Finding { key: LEAVE_SANDBOX, detail: reason.trim().chars().take(300).collect() });
        }
        if findings.is_empty() { Judgement::Safe } else { Judgement::NeedsApproval(findings) }
    }

    /// The decision for `request` where nobody can be asked.
    pub(crate) fn decide(&self, request: &CommandRequest<'_>) -> CommandDecision {
        match self.judge(request) {
            Judgement::Safe => CommandDecision::CONFINED,
            Judgement::Hardline(why) => CommandDecision::Deny(why),
            Judgement::NeedsApproval(findings) if self.approvals_off && request.sandboxed && !leaves_sandbox(&findings) => {
                CommandDecision::CONFINED
            }
            Judgement::NeedsApproval(findings) => CommandDecision::Deny(unanswerable_message(&findings, self.approvals_off)),
        }
    }
}

#[async_trait]
impl ApprovalPolicy for GuardPolicy {
    async fn check_command(&self, _scope: &SessionScope, request: &CommandRequest<'_>, _cancel: &CancellationToken) -> CommandDecision {
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

/// The findings as a list, one `- key (detail)` line each.
pub(crate) fn describe_findings(findings: &[Finding]) -> String {
    let mut out = String::new();
    for finding in findings {
        let _ = write!(out, "\n- {} ({})", finding.key, finding.detail);
    }
    out
}

/// Why a command that needs approval is refused where nobody can approve it.
pub(crate) fn unanswerable_message(findings: &[Finding], approvals_off: bool) -> String {
    let mut out = format!("BLOCKED: this command needs approval:{}\n", describe_findings(findings));
    if approvals_off && !leaves_sandbox(findings) {
        out.push_str(
            "Approvals are off, but flagged commands only run inside the OS sandbox, and the sandbox is not active on this gateway \
             (Landlock is unavailable or terminal.sandbox is off). ",
        );
    } else {
        out.push_str("Nobody can approve commands from this conversation (there is no chat to ask). ");
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
        policy.decide(&CommandRequest { command, workdir: Path::new("/work/ws"), sandboxed, leave_sandbox: None })
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
        let command = "rm -rf build";
        let refused = decide(&policy(false), command, true);
        assert!(
            matches!(&refused, CommandDecision::Deny(why) if why.contains("- recursive delete (") && why.contains("Nobody can approve")),
            "{refused:?}"
        );
        let unsandboxed = decide(&policy(true), command, false);
        assert!(matches!(&unsandboxed, CommandDecision::Deny(why) if why.contains("sandbox is not active")), "{unsandboxed:?}");
        assert_eq!(decide(&policy(true), command, true), CommandDecision::CONFINED);
        let outside = decide(&policy(true), "rm -rf /tmp/victim", true);
        assert!(
            matches!(&outside, CommandDecision::Deny(why) if why.contains("Nobody can approve")),
            "approvals off never leaves the sandbox"
        );
    }

    #[test]
    fn safe_commands_run() {
        for command in ["ls -la", "git status", "cargo build", "echo hi > out.txt", "grep -r foo ."] {
            assert_eq!(decide(&policy(false), command, false), CommandDecision::CONFINED, "{command}");
        }
    }

    #[test]
    fn leaving_the_sandbox_is_one_more_thing_to_approve_and_never_automatic() {
        let request =
            CommandRequest { command: "ls /srv", workdir: Path::new("/work/ws"), sandboxed: true, leave_sandbox: Some("read /srv") };
        let judged = policy(true).judge(&request);
        let Judgement::NeedsApproval(findings) = &judged else { panic!("{judged:?}") };
        assert!(leaves_sandbox(findings), "{findings:?}");
        assert!(matches!(policy(true).decide(&request), CommandDecision::Deny(why) if why.contains("run outside the sandbox (read /srv)")));
        let Judgement::NeedsApproval(findings) = policy(false).judge(&CommandRequest {
            command: "rm -f /srv/data/x",
            workdir: Path::new("/work/ws"),
            sandboxed: true,
            leave_sandbox: None,
        }) else {
            panic!("an absolute delete outside the workspace needs approval");
        };
        assert!(leaves_sandbox(&findings), "approving it means running it outside: {findings:?}");
        let Judgement::NeedsApproval(inside) = policy(false).judge(&CommandRequest {
            command: "rm -rf build",
            workdir: Path::new("/work/ws"),
            sandboxed: true,
            leave_sandbox: None,
        }) else {
            panic!("a recursive delete needs approval");
        };
        assert!(!leaves_sandbox(&inside), "{inside:?}");
    }
}
