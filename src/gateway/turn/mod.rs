//! One turn for a session, as a pipeline of named steps:
//!
//! 1. `admit`: wait for a turn slot; resolve where the answer goes (`admit::AnswerTo`).
//! 2. `prepare`: store the user's message once, load the history, freeze the session's
//!    prompt ([`crate::gateway::conversation::prompt`]), compress a conversation that outgrew
//!    the model.
//! 3. `agent_run`: ask the agent and follow its events; text and tool calls go to the
//!    turn's `output` strategy (chosen from the platform's capabilities), tool messages and
//!    usage to the store.
//! 4. `settle`: store the answer, compose and deliver what the user sees, and say how the
//!    turn ended.
//! 5. `run` closes the inbox row only when the turn really ended, so a turn cut off by a crash
//!    or a drain is replayed after the restart, and one that crashed stays parked.
//!
//! [`TurnHandles`] carries what a whole turn may touch; [`run`] hands each step only the handles
//! it uses, so a step's signature says what it reads and writes. A failure the user is told
//! about is a [`TurnError`], which words its own reply.
//!
//! Beside the pipeline, what a turn needs from the rest of the session: the session's running
//! turn and the messages queued or steered behind it ([`queue`]), the gateway-wide [`limits`]
//! and the count a drain waits on ([`running`]), `/background` slots, the typing indicator, the
//! [`approvals`] and [`clarify`] questions a turn waits on (the actor only routes the answers),
//! the tools' filter ([`tool_access`]) and the [`tool_host`] through which the agent's outward
//! tools (send_message, cronjob via [`cron_tool`], search) reach the gateway.

mod admit;
mod agent_run;
pub(crate) mod approvals;
pub(crate) mod background_slots;
pub(crate) mod clarify;
pub(crate) mod cron_tool;
pub(crate) mod error;
pub(crate) mod limits;
mod output;
pub(crate) mod perceive;
mod prepare;
pub(crate) mod queue;
pub(crate) mod running;
mod settle;
#[cfg(test)]
mod tests;
pub(crate) mod tool_access;
pub(crate) mod tool_host;
pub(crate) mod typing;

pub(crate) use agent_run::Ledger;
pub(crate) use error::TurnError;

use crate::agent::{Agent, SteeringInbox};
use crate::gateway::conversation::models::Models;
use crate::gateway::conversation::sessions::Sessions;
use crate::gateway::delivery::deliverer::Deliverer;
use crate::gateway::delivery::stream_edit::StreamSettings;
use crate::gateway::intake::auth::AuthPolicy;
use crate::gateway::turn::approvals::board::ApprovalBoard;
use crate::gateway::turn::limits::TurnLimits;
use crate::gateway::turn::tool_access::ToolAccess;
use crate::store::Inbox;
use agent_run::RunControls;
use hermes_adapter::InboundEvent;
use output::Output;
use settle::{Records, Settling};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use tokio_util::sync::CancellationToken;

/// Stored messages loaded as context for a turn.
const HISTORY_LIMIT: usize = 400;
/// How the fence names text an adapter marked as coming from outside the chat.
const OUTSIDE_TEXT: &str =
    "text from outside this conversation (a payload, a quoted or forwarded message, a voice note's automatic transcript)";

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
    fn stopped(limits: &TurnLimits) -> TurnEnd {
        if limits.aborting() { TurnEnd::Aborted } else { TurnEnd::Closed }
    }
}

/// What a turn may touch, built once at start-up and cloned per turn (every field is shared).
#[derive(Clone)]
pub(crate) struct TurnHandles {
    pub sessions: Arc<Sessions>,
    /// Where the turn's event waits: closed when the turn ended, parked when it crashed.
    pub inbox: Arc<dyn Inbox>,
    pub models: Arc<Models>,
    pub deliverer: Arc<Deliverer>,
    pub tools: Arc<ToolAccess>,
    pub agent: Arc<Agent>,
    pub limits: Arc<TurnLimits>,
    /// Whether the asking user is an admin (their tools may change what every user shares).
    pub auth: Arc<AuthPolicy>,
    pub stream: Arc<StreamSettings>,
    /// Approvals waiting for an answer: no typing indicator while the turn waits for one.
    pub approvals: Arc<ApprovalBoard>,
    /// Voice notes heard and pictures prepared before the message is stored.
    pub media: Arc<perceive::TurnMedia>,
    /// Answers spoken for `/voice on|only`.
    pub voice: Arc<crate::gateway::delivery::spoken::Voice>,
}

/// Variations of a turn.
#[derive(Debug, Clone, Default)]
pub(crate) struct TurnMode {
    /// Put before the answer (a `/background` task's result names its task).
    pub answer_prefix: Option<String>,
}

/// How the session's model takes the pictures of this event: asked only when one arrives.
async fn perceive_sight(h: &TurnHandles, session_key: &str) -> crate::gateway::conversation::models::Sight {
    let route = h.sessions.routes.route_get(session_key).await.ok().flatten();
    let model = h.models.model_for(route.as_ref().map(|r| &r.overrides));
    h.models.learn_sight(&model).await;
    h.models.sight(&model)
}

/// Run the turn for `event` and close its inbox row unless it was aborted by shutdown.
pub(crate) async fn run(
    handles: TurnHandles,
    session_key: String,
    event: InboundEvent,
    interrupt: CancellationToken,
    started: Arc<AtomicBool>,
    steering: SteeringInbox,
    mode: TurnMode,
) {
    let _running = handles.limits.running.begin();
    let controls = RunControls { interrupt: &interrupt, started: &started, steering: &steering };
    let end = drive(&handles, &session_key, &event, controls, &mode).await;
    if end == TurnEnd::Closed
        && let Err(e) = handles.inbox.inbox_mark_done(&event.event_id).await
    {
        tracing::error!(error = %e, event_id = %event.event_id, "could not close the inbox row; the event may be replayed");
    }
}

/// The steps in order; each gets only the handles it uses.
async fn drive(h: &TurnHandles, session_key: &str, event: &InboundEvent, controls: RunControls<'_>, mode: &TurnMode) -> TurnEnd {
    let admitted = match admit::admit(&h.limits, &h.deliverer, event, controls.interrupt).await {
        Ok(admitted) => admitted,
        Err(end) => return end,
    };
    let answer = &admitted.answer;
    let sight = async || perceive_sight(h, session_key).await;
    let perceived = perceive::perceive(&h.media, event, sight, answer).await;
    let mut prepared =
        match prepare::prepare(&h.sessions, &h.models, &h.tools, session_key, event, &perceived, answer, controls.interrupt).await {
            Ok(prepared) => prepared,
            Err(end) => return end,
        };
    let voice = crate::gateway::delivery::spoken::VoiceMode::of(&prepared.route.overrides);
    let mut output = Output::choose(&h.deliverer, &h.stream, answer, voice.replaces_text());
    let waiting = {
        let (board, key) = (h.approvals.clone(), session_key.to_string());
        move || board.pending(&key) > 0
    };
    let _typing = crate::gateway::turn::typing::TypingGuard::start(answer.adapter.clone(), answer.target.clone(), waiting);
    let scope = agent_run::scope(event, &prepared.route, &answer.caps, h.auth.is_admin(event));
    let mut request = agent_run::request(&h.models, &h.tools, &h.sessions.compactor, scope, event, &mut prepared, &controls);
    if prepared.sight == crate::gateway::conversation::models::Sight::ThroughTool
        && let Some(tools) = request.tools.as_mut()
    {
        let cache = h.media.cache.root().to_path_buf();
        tools.context.vision = Some(crate::agent::tools::VisionAssist { agent: h.agent.clone(), model: h.models.vision_model(), cache });
    }
    let ledger =
        Ledger { turns: h.sessions.turns.as_ref(), models: &h.models, session_id: &prepared.route.session_id, event_id: &event.event_id };
    let mut ran = agent_run::run_agent(&h.agent, ledger, request, &prepared.route.session_key, answer, controls, &mut output).await;
    if perceived.transcribed_secs > 0.0 {
        ran.unrecorded.push(crate::store::CallUsage {
            model: h.media.stt_label.clone(),
            usage: Default::default(),
            cost_usd: perceived.stt_cost,
        });
    }
    let turn = Settling { session_key, event, mode, route: &prepared.route, voice: (voice, &h.voice) };
    let records = Records { turns: h.sessions.turns.as_ref(), routes: h.sessions.routes.as_ref(), inbox: h.inbox.as_ref() };
    settle::settle(records, &h.limits, &h.tools.settings.secrets, turn, answer, &mut output, ran).await
}
