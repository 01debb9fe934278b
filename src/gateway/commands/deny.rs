//! `/deny [all] [reason]`: refuse the command the agent is waiting on; the reason is relayed to
//! the agent, which is told not to retry.

use super::approve::{Which, answer, split_id};
use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::turn::approvals::board::{Answer, ApprovalBoard};
use crate::gateway::turn::approvals::texts;
use async_trait::async_trait;

pub(super) struct Deny;

static SPEC: CommandSpec = CommandSpec {
    name: "deny",
    aliases: &[],
    args_hint: "[all] [reason]",
    description: "Refuse the command waiting for approval, optionally saying why",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for Deny {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        deny(&ctx.handles.approvals.board, ctx.session_key, args)
    }
}

fn deny(board: &ApprovalBoard, session_key: &str, args: &str) -> CommandOutcome {
    let words: Vec<&str> = args.split_whitespace().collect();
    let (id, mut rest) = split_id(&words);
    let all = rest.first().is_some_and(|w| w.eq_ignore_ascii_case("all"));
    if all {
        rest.remove(0);
    }
    let reason = Some(rest.join(" ")).filter(|r| !r.is_empty());
    let which = match (id, all) {
        (Some(id), _) => Which::Id(id),
        (None, true) => Which::All,
        (None, false) => Which::Oldest,
    };
    match answer(board, session_key, which, &Answer::Deny { reason: reason.clone() }) {
        Ok(answered) if answered.is_empty() => CommandOutcome::Reply(texts::NOTHING_TO_DENY.into()),
        Ok(answered) => CommandOutcome::Reply(texts::denied_reply(answered.len(), reason.as_deref())),
        Err(reply) => CommandOutcome::Reply(reply.to_string()),
    }
}
