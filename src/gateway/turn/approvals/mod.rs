//! Dangerous-command approval from chat. [`ChatApprovals`] is the gateway's approval policy: the
//! classifier judges each command ([`GuardPolicy::judge`]); hardline never runs; the operator's
//! rules ([`rules`]) refuse or allow what they name; `/yolo`, session approvals and smart mode
//! ([`smart`]) may spare a prompt; everything else becomes a pending approval — recorded in the
//! store, shown in the chat with buttons ([`texts`]), and waited for on the [`board`] until an
//! allowed user of that chat answers, the timeout passes or the turn is stopped. Only an explicit
//! `/approve` (or its button) approves; every other ending denies, and the agent is told which.
//! A call to an MCP tool of an untrusted server goes through the same flow ([`Question`]).

pub(crate) mod board;
pub(crate) mod rules;
pub(crate) mod smart;
pub(crate) mod texts;

use crate::agent::approval::{
    ApprovalPolicy, CommandDecision, CommandRequest, GuardPolicy, Judgement, ToolCallDecision, ToolCallRequest, describe_findings,
    leaves_sandbox, unanswerable_message, unanswerable_tool_call,
};
use crate::agent::tools::SessionScope;
use crate::gateway::delivery::deliverer::Deliverer;
use crate::gateway::delivery::outbound::Delivery;
use crate::gateway::delivery::reply::{Reply, ReplyKey};
use crate::observe::secret_forms::SecretScrubber;
use crate::store::{Approvals, PendingApproval};
use async_trait::async_trait;
use board::{Answer, ApprovalBoard};
use hermes_adapter::{ChatTarget, Platform};
use hermes_guard::Finding;
use rules::{ApprovalRules, Mode};
use smart::{SmartJudge, SmartVerdict};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// How long a session's approvals must stop arriving before its prompts go out: the commands of
/// one model answer are checked together, microseconds to milliseconds apart.
const SIBLINGS_QUIET: std::time::Duration = std::time::Duration::from_millis(150);
/// The longest a prompt waits for its siblings (a slow approval judge spaces them out).
const SIBLINGS_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// What the approval commands and the session actors share with the policy.
#[derive(Clone)]
pub(crate) struct ApprovalHandles {
    pub board: Arc<ApprovalBoard>,
    pub rules: Arc<ApprovalRules>,
}

/// The gateway's approval policy.
pub(crate) struct ChatApprovals {
    guard: Arc<GuardPolicy>,
    handles: ApprovalHandles,
    smart: Option<SmartJudge>,
    /// Where pending approvals are recorded, so a restart can deny what it left open.
    approvals: Arc<dyn Approvals>,
    deliverer: Arc<Deliverer>,
    /// Masks the gateway's secrets in the command the chat is shown.
    secrets: Arc<SecretScrubber>,
}

/// How a wait for an answer ended.
enum Ending {
    /// The prompt never reached the chat.
    Undeliverable,
    Answered(Answer),
    TimedOut,
    Stopped,
}

impl ChatApprovals {
    pub(crate) fn new(
        guard: Arc<GuardPolicy>,
        handles: ApprovalHandles,
        smart: Option<SmartJudge>,
        approvals: Arc<dyn Approvals>,
        deliverer: Arc<Deliverer>,
        secrets: Arc<SecretScrubber>,
    ) -> Self {
        Self { guard, handles, smart, approvals, deliverer, secrets }
    }

    fn rules(&self) -> &ApprovalRules {
        &self.handles.rules
    }

    /// What may decide without a person, in the reference's order: deny rules first (even
    /// `/yolo` cannot pass them), then the standing approvals, then who is asking.
    async fn decide(&self, scope: &SessionScope, request: &CommandRequest<'_>, cancel: &CancellationToken) -> CommandDecision {
        let judged = self.guard.judge(request);
        if let Judgement::Hardline(why) = judged {
            return CommandDecision::Deny(why);
        }
        if let Some(rule) = self.rules().denied_by(request.command) {
            return CommandDecision::Deny(texts::deny_rule(rule));
        }
        let Judgement::NeedsApproval(findings) = judged else { return CommandDecision::CONFINED };
        let outside = leaves_sandbox(&findings);
        let keys: Vec<&'static str> = findings.iter().map(|f| f.key).collect();
        // Leaving the sandbox is never automatic: only standing approvals or a person grant it.
        if !outside && self.handles.board.yolo(&scope.session_key) {
            return CommandDecision::CONFINED;
        }
        if !outside && self.rules().mode == Mode::Off && request.sandboxed {
            return CommandDecision::CONFINED;
        }
        if self.rules().allowlisted(request.command) || self.handles.board.session_allows(&scope.session_key, &keys) {
            return CommandDecision::Run { confined: !outside };
        }
        if scope.scheduled {
            return match self.rules().cron_approves {
                true => CommandDecision::Run { confined: !outside },
                false => CommandDecision::Deny(texts::cron_denied(&describe_findings(&findings))),
            };
        }
        if !scope.interactive || !self.deliverer.reaches_later(&scope.platform) {
            return CommandDecision::Deny(unanswerable_message(&findings, false));
        }
        let mut smart_denied = false;
        // The judge may spare a prompt only where the sandbox still holds what it approves.
        if let (Mode::Smart, Some(judge), false, true) = (self.rules().mode, &self.smart, outside, request.sandboxed) {
            match judge.judge(request.command, &findings, cancel).await {
                SmartVerdict::Approve => return CommandDecision::CONFINED,
                SmartVerdict::Deny => smart_denied = true,
                SmartVerdict::Escalate => {}
            }
        }
        let question = Question::Command { command: request.command, findings: &findings, smart_denied };
        match self.ask(scope, &question, cancel).await {
            Ok(()) => CommandDecision::Run { confined: !outside },
            Err(why) => CommandDecision::Deny(why),
        }
    }

    /// What may decide about an MCP tool call without a person: the session's approval of this
    /// tool, then who is asking. Neither `/yolo` nor `approvals.mode: off` spares the prompt: they
    /// rely on the sandbox, which does not reach into an MCP server.
    async fn decide_tool_call(&self, scope: &SessionScope, request: &ToolCallRequest<'_>, cancel: &CancellationToken) -> ToolCallDecision {
        let key = tool_key(request.tool);
        if self.handles.board.session_allows(&scope.session_key, &[key.as_str()]) {
            return ToolCallDecision::Allow;
        }
        if scope.scheduled {
            return match self.rules().cron_approves {
                true => ToolCallDecision::Allow,
                false => ToolCallDecision::Deny(texts::cron_tool_denied(request.tool)),
            };
        }
        if !scope.interactive || !self.deliverer.reaches_later(&scope.platform) {
            return ToolCallDecision::Deny(unanswerable_tool_call(request.tool));
        }
        match self.ask(scope, &Question::ToolCall(request), cancel).await {
            Ok(()) => ToolCallDecision::Allow,
            Err(why) => ToolCallDecision::Deny(why),
        }
    }

    /// Put `question` to the chat and wait for the answer: record it, prompt, wait, conclude.
    /// `Err` holds what the agent is told when it was not approved.
    async fn ask(&self, scope: &SessionScope, question: &Question<'_>, cancel: &CancellationToken) -> Result<(), String> {
        let target = ChatTarget {
            platform: Platform::new(scope.platform.as_str()),
            chat_id: scope.chat_id.clone(),
            thread_id: scope.thread_id.clone(),
        };
        let id = new_id();
        let pending = PendingApproval {
            id: id.clone(),
            session_key: scope.session_key.clone(),
            target,
            command: question.shown(&self.secrets),
            created_at: chrono::Utc::now(),
        };
        if let Err(e) = self.approvals.approval_open(&pending).await {
            tracing::error!(error = %e, "could not record a pending approval; it is refused");
            return Err(texts::UNDELIVERABLE.into());
        }
        let answer = self.handles.board.open(&pending, question.command(), question.keys());
        // A stopped turn drops this future mid-wait: the guard then withdraws the approval.
        let mut waiting = Waiting { board: &self.handles.board, approvals: &self.approvals, id: &id, open: true };
        let ending = match self.prompt(&pending, question).await {
            Delivery::Failed => Ending::Undeliverable,
            // Queued: the prompt may still arrive before the timeout (it is never shown after).
            Delivery::Delivered | Delivery::Queued | Delivery::InDoubt => tokio::select! {
                answer = answer => Ending::Answered(answer.unwrap_or(Answer::Deny { reason: None })),
                _ = tokio::time::sleep(self.rules().timeout) => Ending::TimedOut,
                _ = cancel.cancelled() => Ending::Stopped,
            },
        };
        self.handles.board.close(&id);
        let (outcome, decision) = self.conclude(&pending, ending).await;
        waiting.open = false;
        if let Err(e) = self.approvals.approval_close(&id, outcome).await {
            tracing::warn!(error = %e, id, "could not record an approval's outcome");
        }
        tracing::info!(id, outcome, session_key = %scope.session_key, "approval ended");
        crate::observe::metrics::global().approval_decided(outcome);
        decision
    }

    /// Show `pending` in its chat, with its place when others wait too. The commands of one
    /// model answer ask at once: waiting until the session's approvals stop arriving lets the
    /// first prompt say "(1/3)" too, not only the later ones.
    async fn prompt(&self, pending: &PendingApproval, question: &Question<'_>) -> Delivery {
        let gathering = tokio::time::Instant::now();
        while let Some(quiet) = self.handles.board.quiet_for(&pending.id) {
            if quiet >= SIBLINGS_QUIET || gathering.elapsed() >= SIBLINGS_WAIT_MAX {
                break;
            }
            tokio::time::sleep(SIBLINGS_QUIET - quiet).await;
        }
        let place = self.handles.board.place(&pending.id).filter(|(_, of)| *of > 1);
        let (text, buttons) = match question {
            Question::Command { findings, smart_denied, .. } => {
                (texts::prompt(&pending.command, findings, leaves_sandbox(findings), *smart_denied, place), texts::buttons(&pending.id))
            }
            Question::ToolCall(request) => (
                texts::tool_prompt(request.server, request.tool, &self.secrets.scrub(request.arguments), place),
                texts::tool_buttons(&pending.id),
            ),
        };
        let prompt = Reply::markdown(pending.target.clone(), text).with_buttons(buttons);
        self.deliverer.send_prompt(prompt, ReplyKey::ApprovalPrompt(pending.id.clone()), self.rules().timeout).await
    }

    /// The outcome to record and whether it was approved (`Err`: what the agent is told); a
    /// timeout is also told to the chat.
    async fn conclude(&self, pending: &PendingApproval, ending: Ending) -> (&'static str, Result<(), String>) {
        match ending {
            Ending::Undeliverable => ("undeliverable", Err(texts::UNDELIVERABLE.into())),
            Ending::Answered(Answer::Approve(reach)) => (reach.word(), Ok(())),
            Ending::Answered(Answer::Deny { reason }) => ("denied", Err(texts::denied(reason.as_deref()))),
            Ending::TimedOut => {
                let secs = self.rules().timeout.as_secs();
                let notice = texts::expired_notice(&pending.command, &format!("Nobody answered within {secs}s"));
                let key = ReplyKey::ApprovalTimeout(pending.id.clone());
                self.deliverer.send(Reply::markdown(pending.target.clone(), notice), key).await;
                ("timed_out", Err(texts::timed_out(secs)))
            }
            Ending::Stopped => ("stopped", Err(texts::stopped())),
        }
    }
}

/// What is put to a person: a command the classifier flagged, or a call to an untrusted MCP tool.
enum Question<'a> {
    Command { command: &'a str, findings: &'a [Finding], smart_denied: bool },
    ToolCall(&'a ToolCallRequest<'a>),
}

impl Question<'_> {
    /// What the store records and the chat is shown, secrets masked.
    fn shown(&self, secrets: &SecretScrubber) -> String {
        match self {
            Question::Command { command, .. } => secrets.scrub(command),
            Question::ToolCall(request) => secrets.scrub(&format!("{} {}", request.tool, request.arguments)),
        }
    }

    /// The command as the agent asked it, for `/approve always` (a tool call has none).
    fn command(&self) -> Option<&str> {
        match self {
            Question::Command { command, .. } => Some(command),
            Question::ToolCall(_) => None,
        }
    }

    /// What `/approve session` approves for the rest of the session.
    fn keys(&self) -> Vec<String> {
        match self {
            Question::Command { findings, .. } => findings.iter().map(|f| f.key.to_string()).collect(),
            Question::ToolCall(request) => vec![tool_key(request.tool)],
        }
    }
}

/// The session approval key of MCP tool `tool` (`/approve session` allows the tool, whatever the
/// arguments).
fn tool_key(tool: &str) -> String {
    format!("MCP tool {tool}")
}

#[async_trait]
impl ApprovalPolicy for ChatApprovals {
    async fn check_command(&self, scope: &SessionScope, request: &CommandRequest<'_>, cancel: &CancellationToken) -> CommandDecision {
        self.decide(scope, request, cancel).await
    }

    async fn check_tool_call(&self, scope: &SessionScope, request: &ToolCallRequest<'_>, cancel: &CancellationToken) -> ToolCallDecision {
        self.decide_tool_call(scope, request, cancel).await
    }
}

/// An approval being waited for. Dropped before it was answered — the turn was stopped and its
/// future dropped with it — it leaves the board at once (a later `/approve` finds nothing) and
/// is closed in the store as stopped.
struct Waiting<'a> {
    board: &'a ApprovalBoard,
    approvals: &'a Arc<dyn Approvals>,
    id: &'a str,
    /// Not yet closed in the store.
    open: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.board.close(self.id);
        if !self.open {
            return;
        }
        let (approvals, id) = (self.approvals.clone(), self.id.to_string());
        // Without a runtime (the process is ending) the next start closes it as a restart's.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = approvals.approval_close(&id, "stopped").await {
                    tracing::warn!(error = %e, id, "could not record a stopped approval");
                }
            });
        }
    }
}

/// Approvals a crash left open (of `platform`'s chats, when a replica takes it over; all of them
/// alone on a store): nobody waits for them now, so each is closed as denied — before any
/// replayed turn can open a new one — and its chat is told in the background (once: the
/// notice's outbox key is the approval's), so a platform that is down does not hold up start.
pub(crate) async fn deny_left_open(approvals: &dyn Approvals, deliverer: Arc<Deliverer>, platform: Option<&str>) {
    let orphans = match approvals.approval_close_orphans("denied_by_restart", platform).await {
        Ok(orphans) => orphans,
        Err(e) => {
            tracing::error!(error = %e, "could not read approvals left open by the last run");
            return;
        }
    };
    if orphans.is_empty() {
        return;
    }
    tokio::spawn(async move {
        for pending in orphans {
            tracing::info!(id = %pending.id, session_key = %pending.session_key, "approval denied by the restart");
            let notice = texts::expired_notice(&pending.command, "The gateway restarted while this waited for approval");
            let key = ReplyKey::ApprovalRestart(pending.id.clone());
            deliverer.send(Reply::markdown(pending.target.clone(), notice), key).await;
        }
    });
}

/// A short id for buttons and `/approve <id>`: 8 characters, unguessable enough that a press
/// cannot be forged for an approval one has not seen (and it is checked against the session).
fn new_id() -> String {
    let raw = uuid::Uuid::new_v4().simple().to_string();
    format!("#{}", &raw[..8])
}

#[cfg(test)]
mod tests;
