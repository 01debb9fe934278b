//! `/yolo`: admins switch auto-approval on or off for this session. Flagged commands then run
//! without a prompt, still inside the sandbox; hardline commands, `approvals.deny` rules and
//! leaving the sandbox are untouched by it. `/new` switches it off.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::intake::auth::AuthPolicy;
use crate::gateway::turn::approvals::board::ApprovalBoard;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;

pub(super) struct Yolo;

static SPEC: CommandSpec = CommandSpec {
    name: "yolo",
    aliases: &[],
    args_hint: "[on|off]",
    description: "Auto-approve flagged commands in this session (admins; hardline still blocks)",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for Yolo {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        yolo(&ctx.handles.approvals.board, &ctx.handles.auth, ctx.event, ctx.session_key, args)
    }
}

fn yolo(board: &ApprovalBoard, auth: &AuthPolicy, event: &InboundEvent, session_key: &str, args: &str) -> CommandOutcome {
    if !auth.is_admin(event) {
        return CommandOutcome::Reply("⛔ Only an admin can switch auto-approval on.".into());
    }
    let on = match args.trim().to_ascii_lowercase().as_str() {
        "" => !board.yolo(session_key),
        "on" => true,
        "off" => false,
        other => return CommandOutcome::Reply(format!("`/yolo {other}` is not understood. Use `/yolo`, `/yolo on` or `/yolo off`.")),
    };
    board.set_yolo(session_key, on);
    tracing::warn!(session_key = session_key, on, "auto-approval switched by an admin");
    CommandOutcome::Reply(if on {
        "⚡ YOLO on for this session: flagged commands run without asking (still inside the sandbox). Hardline commands stay \
         blocked. `/yolo` again turns it off."
            .into()
    } else {
        "🛡️ YOLO off: flagged commands ask for approval again.".into()
    })
}
