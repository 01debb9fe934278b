//! One turn for a session, as a pipeline of named steps:
//!
//! 1. `admit`: wait for a turn slot; resolve where the answer goes (`admit::AnswerTo`).
//! 2. `prepare`: store the user's message once, load the history, freeze the session's
//!    prompt (`prompt`), compress a conversation that outgrew the model.
//! 3. `agent_run`: ask the agent and follow its events; text and tool calls go to the
//!    turn's `output` strategy (chosen from the platform's capabilities), tool messages and
//!    usage to the store.
//! 4. `settle`: store the answer, compose and deliver what the user sees, and say how the
//!    turn ended.
//! 5. `run` closes the inbox row only when the turn really ended, so a turn cut off by a crash
//!    or a drain is replayed after the restart, and one that crashed stays parked.

mod admit;
mod agent_run;
mod messages;
mod output;
mod prepare;
mod prompt;
mod settle;
#[cfg(test)]
mod tests;

pub use messages::{new_message, to_chat_message};
pub use prompt::frozen_prompt;
pub use settle::is_silence;

use super::services::Services;
use crate::agent::SteeringInbox;
use agent_run::RunControls;
use hermes_adapter::InboundEvent;
use output::Output;
use settle::Settling;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use tokio_util::sync::CancellationToken;

/// Stored messages loaded as context for a turn.
const HISTORY_LIMIT: usize = 400;
/// How the fence names text an adapter marked as coming from outside the chat.
const OUTSIDE_TEXT: &str = "text from outside this conversation (a payload, a quoted or forwarded message)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TurnEnd {
    /// Done with (answered, interrupted by the user, or failed with a message to the user).
    Closed,
    /// Cut off by shutdown: stays in the inbox to be replayed.
    Aborted,
    /// It crashed: parked in the inbox, never replayed.
    Parked,
}

impl TurnEnd {
    /// A turn stopped before it ran: kept for replay when the gateway is shutting down,
    /// otherwise (the user stopped it) done with.
    fn stopped(services: &Services) -> TurnEnd {
        if services.turns_abort.is_cancelled() { TurnEnd::Aborted } else { TurnEnd::Closed }
    }
}

/// Variations of a turn.
#[derive(Debug, Clone, Default)]
pub struct TurnMode {
    /// Put before the answer (a `/background` task's result names its task).
    pub answer_prefix: Option<String>,
}

/// Run the turn for `event` and close its inbox row unless it was aborted by shutdown.
pub async fn run(
    services: Arc<Services>,
    session_key: String,
    event: InboundEvent,
    interrupt: CancellationToken,
    started: Arc<AtomicBool>,
    steering: SteeringInbox,
    mode: TurnMode,
) {
    let _running = services.turns.begin();
    let controls = RunControls { interrupt: &interrupt, started: &started, steering: &steering };
    let end = drive(&services, &session_key, &event, controls, &mode).await;
    if end == TurnEnd::Closed
        && let Err(e) = services.store.inbox_mark_done(&event.event_id).await
    {
        tracing::error!(error = %e, event_id = %event.event_id, "could not close the inbox row; the event may be replayed");
    }
}

async fn drive(services: &Arc<Services>, session_key: &str, event: &InboundEvent, controls: RunControls<'_>, mode: &TurnMode) -> TurnEnd {
    let admitted = match admit::admit(services, event, controls.interrupt).await {
        Ok(admitted) => admitted,
        Err(end) => return end,
    };
    let answer = &admitted.answer;
    let mut prepared = match prepare::prepare(services, session_key, event, answer, controls.interrupt).await {
        Ok(prepared) => prepared,
        Err(end) => return end,
    };
    let mut output = Output::choose(services, answer);
    let _typing = super::typing::TypingGuard::start(answer.adapter.clone(), answer.target.clone());
    let ran = agent_run::run_agent(services, event, &mut prepared, answer, controls, &mut output).await;
    let turn = Settling { session_key, event, mode, route: &prepared.route };
    settle::settle(services, turn, answer, &mut output, ran).await
}
