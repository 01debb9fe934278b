//! `/approve [session|always|all] [#id]`: let a command the agent is waiting on run. Without an
//! id it answers this session's oldest pending approval; a button names its approval by id, and
//! an id from another session is refused. `always` is for admins: it writes the command to
//! `command_allowlist` (an MCP tool call is approved for the session instead).

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::intake::auth::AuthPolicy;
use crate::gateway::turn::approvals::ApprovalHandles;
use crate::gateway::turn::approvals::board::{Answer, Answered, ApprovalBoard, ById, Reach};
use crate::gateway::turn::approvals::texts;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;

pub(super) struct Approve;

static SPEC: CommandSpec = CommandSpec {
    name: "approve",
    aliases: &[],
    args_hint: "[session|always|all]",
    description: "Run the command waiting for approval (session: its pattern for this session; always: for ever)",
    runs_mid_turn: true,
};

/// What `/approve` and `/deny` were asked to answer.
pub(super) enum Which<'a> {
    Oldest,
    All,
    Id(&'a str),
}

/// The id (`#…`) among `words`, if any, and the other words.
pub(super) fn split_id<'a>(words: &[&'a str]) -> (Option<&'a str>, Vec<&'a str>) {
    let id = words.iter().copied().find(|w| w.starts_with('#') && w.len() > 1);
    (id, words.iter().copied().filter(|w| Some(*w) != id).collect())
}

#[async_trait]
impl SlashCommand for Approve {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        approve(&ctx.handles.approvals, &ctx.handles.auth, ctx.event, ctx.session_key, args)
    }
}

fn approve(approvals: &ApprovalHandles, auth: &AuthPolicy, event: &InboundEvent, session_key: &str, args: &str) -> CommandOutcome {
    let words: Vec<&str> = args.split_whitespace().collect();
    let (id, rest) = split_id(&words);
    let mut reach = Reach::Once;
    let mut all = false;
    for word in rest {
        match word.to_ascii_lowercase().as_str() {
            "session" => reach = Reach::Session,
            "always" | "permanent" => reach = Reach::Always,
            "all" => all = true,
            "once" => {}
            other => {
                return CommandOutcome::Reply(format!(
                    "`/approve {other}` is not understood. Use `/approve`, `/approve session`, `/approve always` or `/approve all`."
                ));
            }
        }
    }
    if reach == Reach::Always && !auth.is_admin(event) {
        return CommandOutcome::Reply(texts::ALWAYS_NEEDS_ADMIN.into());
    }
    let which = match (id, all) {
        (Some(id), _) => Which::Id(id),
        (None, true) => Which::All,
        (None, false) => Which::Oldest,
    };
    let answered = match answer(&approvals.board, session_key, which, &Answer::Approve(reach)) {
        Ok(answered) => answered,
        Err(reply) => return CommandOutcome::Reply(reply.to_string()),
    };
    if answered.is_empty() {
        return CommandOutcome::Reply(texts::NOTHING_TO_APPROVE.into());
    }
    if reach == Reach::Always {
        for command in answered.iter().filter_map(|a| a.command.as_deref()) {
            if let Err(e) = approvals.rules.allow_forever(command) {
                tracing::error!(error = %e, "could not write command_allowlist");
                return CommandOutcome::Reply(format!(
                    "✅ Command approved this once, but it could not be saved for ever: {e}. Fix the file, then approve again."
                ));
            }
        }
    }
    let mut reply = texts::approved(answered.len(), reach);
    if reach == Reach::Always && answered.iter().any(|a| a.command.is_none()) {
        reply.push_str(texts::TOOL_CALLS_FOR_SESSION);
    }
    CommandOutcome::Reply(reply)
}

/// Why an approval named by id cannot be answered; the text is the reply.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unanswerable {
    /// An approval of another chat.
    #[error("{}", texts::NOT_YOURS)]
    NotYours,
    #[error("{}", texts::STALE_APPROVE)]
    StaleApproval,
    #[error("{}", texts::STALE_DENY)]
    StaleDenial,
}

/// Answer the approvals `which` names in this session; `Err` when there is nothing this user may
/// answer (an approval of another chat, or one nobody waits for any more).
pub(super) fn answer(board: &ApprovalBoard, session_key: &str, which: Which<'_>, answer: &Answer) -> Result<Vec<Answered>, Unanswerable> {
    match which {
        Which::Oldest => Ok(board.answer_oldest(session_key, answer).into_iter().collect()),
        Which::All => Ok(board.answer_all(session_key, answer)),
        Which::Id(id) => match board.answer_id(session_key, id, answer) {
            ById::Answered(answered) => Ok(vec![answered]),
            ById::NotYours => {
                tracing::warn!(session_key = session_key, id, "an approval of another chat was answered; refused");
                Err(Unanswerable::NotYours)
            }
            ById::Stale => Err(match answer {
                Answer::Approve(_) => Unanswerable::StaleApproval,
                Answer::Deny { .. } => Unanswerable::StaleDenial,
            }),
        },
    }
}
