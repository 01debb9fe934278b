//! What an incoming event, or a turn's end, means for a session: a pure function of plain facts
//! ([`SessionView`]), the event's kind ([`Input`]) and the session's [`Behaviour`]. The actor
//! gathers the facts, asks [`decide`], and carries the [`Action`] out in one place.
//!
//! The rules, in the order they apply to a message:
//! - while a turn waits for a command's approval, a message is queued and its sender told an
//!   approval is pending: it never answers the approval and never interrupts the turn;
//! - while a turn runs, a pending `clarify` question takes the message as its answer;
//! - with no turn running, the message starts one (unless the gateway drains for a restart);
//! - otherwise the busy policy applies (interrupt, queue or steer), acknowledged at most every
//!   [`BUSY_ACK_EVERY`] on platforms that can receive messages later.
//!
//! A full queue (see `turn::queue::QUEUE_CAP`) refuses the message instead; an interrupt still
//! interrupts.

use crate::config::{BusyInputMode, Config};
use crate::gateway::turn::queue::QUEUE_CAP;
use std::time::Duration;

/// How a session treats its users' messages (`gateway.idle_session_secs`,
/// `gateway.memory.live_sessions`, `display.*`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Behaviour {
    /// An actor with nothing to do retires after this long.
    pub idle_after: Duration,
    /// Actors kept at most; beyond it the router asks the least recently used to retire when idle.
    pub live_sessions: usize,
    pub busy_input_mode: BusyInputMode,
    pub busy_ack_enabled: bool,
}

impl Behaviour {
    pub(crate) fn from_config(config: &Config) -> Self {
        Self {
            idle_after: Duration::from_secs(config.gateway.idle_session_secs.max(1)),
            live_sessions: config.gateway.memory.live_sessions.max(1),
            busy_input_mode: config.display.busy_input_mode,
            busy_ack_enabled: config.display.busy_ack_enabled,
        }
    }
}

/// Busy acknowledgements are sent at most this often per session.
pub(crate) const BUSY_ACK_EVERY: Duration = Duration::from_secs(30);

/// The facts about a session a decision needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SessionView {
    /// A turn runs (or waits for its slot).
    pub running: bool,
    /// The running turn waits for a command's approval.
    pub approval_pending: bool,
    /// Messages queued behind the running turn.
    pub queued: usize,
    /// The gateway is draining for a restart: no turn starts.
    pub draining: bool,
    /// Time since the last busy acknowledgement; `None` if none was sent.
    pub since_busy_ack: Option<Duration>,
}

/// What happened, as far as the decision is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    /// A slash command no command answers to.
    UnknownCommand,
    /// A known slash command.
    Command { runs_mid_turn: bool },
    /// A plain message (or the prompt a command asked to run).
    Message {
        /// Its platform can receive messages later (a busy acknowledgement makes sense there).
        reaches_later: bool,
        /// The session's pending `clarify` question did not take it (there was none).
        clarify_declined: bool,
    },
    /// A message taken off the queue, to run now.
    Dequeued,
    /// A turn ended (or a message was handled): time to see whether the next queued one runs.
    TurnFreed,
    /// The session had nothing to do for `idle_after`, or was asked to retire when idle.
    IdleTimer,
}

/// The busy policy's three ways with a message while a turn runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Busy {
    /// Queue it first and interrupt the turn.
    Interrupt,
    /// Queue it for after the turn.
    Queue,
    /// Inject it into the turn after its next tool call.
    Steer,
}

/// Why a message was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// The turn waits for an approval: the sender should answer it first.
    ApprovalPending,
    /// The busy policy queues: the sender should wait or `/stop`; `interrupt` still interrupts.
    Busy { interrupt: bool },
}

/// What the session does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Reply that no command has that name.
    ReplyUnknownCommand,
    /// Reply that this command cannot run while a turn runs.
    RefuseMidTurn,
    /// Run the command.
    RunCommand,
    /// Queue the message behind the turn and tell its sender an approval is pending.
    HoldForApproval,
    /// Offer the message to the pending `clarify` question (if none takes it, decide again).
    AnswerClarify,
    /// Start a turn for the message.
    StartTurn,
    /// Leave the message in the inbox as accepted: it runs after the restart.
    KeepForRestart,
    /// Apply the busy policy; `ack` tells the sender.
    Busy { how: Busy, ack: bool },
    /// The queue is full: reply so, and do nothing else (but interrupt when asked).
    RefuseQueueFull(Full),
    /// Take the next queued message and run it.
    StartNext,
    /// Tell the router this session is idle.
    ReportIdle,
    /// Nothing to do.
    Wait,
}

/// The one decision: what `input` means for a session in `state` behaving as `behaviour` says.
pub(crate) fn decide(state: &SessionView, input: &Input, behaviour: &Behaviour) -> Action {
    let idle = !state.running && state.queued == 0;
    match *input {
        Input::UnknownCommand => Action::ReplyUnknownCommand,
        Input::Command { runs_mid_turn } if state.running && !runs_mid_turn => Action::RefuseMidTurn,
        Input::Command { .. } => Action::RunCommand,
        Input::Message { reaches_later, clarify_declined } => message(state, behaviour, reaches_later, clarify_declined),
        Input::Dequeued => start(state),
        Input::TurnFreed if !state.running && state.queued > 0 => Action::StartNext,
        Input::TurnFreed => Action::Wait,
        Input::IdleTimer if idle => Action::ReportIdle,
        Input::IdleTimer => Action::Wait,
    }
}

fn message(state: &SessionView, behaviour: &Behaviour, reaches_later: bool, clarify_declined: bool) -> Action {
    let full = state.queued >= QUEUE_CAP;
    if state.running && state.approval_pending {
        return if full { Action::RefuseQueueFull(Full::ApprovalPending) } else { Action::HoldForApproval };
    }
    if state.running && !clarify_declined {
        return Action::AnswerClarify;
    }
    if !state.running {
        return start(state);
    }
    let how = match behaviour.busy_input_mode {
        BusyInputMode::Interrupt => Busy::Interrupt,
        BusyInputMode::Queue => Busy::Queue,
        BusyInputMode::Steer => Busy::Steer,
    };
    if full && how != Busy::Steer {
        return Action::RefuseQueueFull(Full::Busy { interrupt: how == Busy::Interrupt });
    }
    let ack_due = state.since_busy_ack.is_none_or(|since| since >= BUSY_ACK_EVERY);
    Action::Busy { how, ack: behaviour.busy_ack_enabled && ack_due && reaches_later }
}

fn start(state: &SessionView) -> Action {
    if state.draining { Action::KeepForRestart } else { Action::StartTurn }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn behaviour(mode: BusyInputMode, ack: bool) -> Behaviour {
        Behaviour { idle_after: Duration::from_secs(900), live_sessions: 8, busy_input_mode: mode, busy_ack_enabled: ack }
    }

    const IDLE: SessionView = SessionView { running: false, approval_pending: false, queued: 0, draining: false, since_busy_ack: None };
    const BUSY: SessionView = SessionView { running: true, ..IDLE };
    const MSG: Input = Input::Message { reaches_later: true, clarify_declined: false };
    /// A message no clarify question took (the busy policy's input).
    const PLAIN: Input = Input::Message { reaches_later: true, clarify_declined: true };

    #[test]
    fn every_input_in_every_state_gets_its_action() {
        use BusyInputMode::{Interrupt, Queue, Steer};
        let full = QUEUE_CAP;
        let secs = Duration::from_secs;
        let rows: Vec<(&str, SessionView, Input, Behaviour, Action)> = vec![
            ("unknown command", BUSY, Input::UnknownCommand, behaviour(Queue, true), Action::ReplyUnknownCommand),
            ("command, idle", IDLE, Input::Command { runs_mid_turn: false }, behaviour(Queue, true), Action::RunCommand),
            ("mid-turn command, busy", BUSY, Input::Command { runs_mid_turn: true }, behaviour(Queue, true), Action::RunCommand),
            ("idle-only command, busy", BUSY, Input::Command { runs_mid_turn: false }, behaviour(Queue, true), Action::RefuseMidTurn),
            ("message, idle", IDLE, MSG, behaviour(Interrupt, true), Action::StartTurn),
            ("message, idle, draining", SessionView { draining: true, ..IDLE }, MSG, behaviour(Queue, true), Action::KeepForRestart),
            ("message, idle, queue full", SessionView { queued: full, ..IDLE }, MSG, behaviour(Queue, true), Action::StartTurn),
            (
                "message, approval pending",
                SessionView { approval_pending: true, ..BUSY },
                MSG,
                behaviour(Interrupt, true),
                Action::HoldForApproval,
            ),
            (
                "message, approval pending, queue full",
                SessionView { approval_pending: true, queued: full, ..BUSY },
                MSG,
                behaviour(Interrupt, true),
                Action::RefuseQueueFull(Full::ApprovalPending),
            ),
            (
                "message, approval pending, no clarify took it",
                SessionView { approval_pending: true, ..BUSY },
                PLAIN,
                behaviour(Steer, true),
                Action::HoldForApproval,
            ),
            (
                "message, approval left over, idle",
                SessionView { approval_pending: true, ..IDLE },
                MSG,
                behaviour(Queue, true),
                Action::StartTurn,
            ),
            ("message, busy: offered to clarify", BUSY, MSG, behaviour(Queue, true), Action::AnswerClarify),
            ("interrupt", BUSY, PLAIN, behaviour(Interrupt, true), Action::Busy { how: Busy::Interrupt, ack: true }),
            ("queue", BUSY, PLAIN, behaviour(Queue, true), Action::Busy { how: Busy::Queue, ack: true }),
            ("steer", BUSY, PLAIN, behaviour(Steer, true), Action::Busy { how: Busy::Steer, ack: true }),
            ("queue, acks off", BUSY, PLAIN, behaviour(Queue, false), Action::Busy { how: Busy::Queue, ack: false }),
            (
                "queue, platform cannot receive later",
                BUSY,
                Input::Message { reaches_later: false, clarify_declined: true },
                behaviour(Queue, true),
                Action::Busy { how: Busy::Queue, ack: false },
            ),
            (
                "queue, acked 29 s ago",
                SessionView { since_busy_ack: Some(secs(29)), ..BUSY },
                PLAIN,
                behaviour(Queue, true),
                Action::Busy { how: Busy::Queue, ack: false },
            ),
            (
                "queue, acked 30 s ago",
                SessionView { since_busy_ack: Some(secs(30)), ..BUSY },
                PLAIN,
                behaviour(Queue, true),
                Action::Busy { how: Busy::Queue, ack: true },
            ),
            (
                "queue, 31 waiting",
                SessionView { queued: full - 1, ..BUSY },
                PLAIN,
                behaviour(Queue, true),
                Action::Busy { how: Busy::Queue, ack: true },
            ),
            (
                "queue, full",
                SessionView { queued: full, ..BUSY },
                PLAIN,
                behaviour(Queue, true),
                Action::RefuseQueueFull(Full::Busy { interrupt: false }),
            ),
            (
                "interrupt, full",
                SessionView { queued: full, ..BUSY },
                PLAIN,
                behaviour(Interrupt, true),
                Action::RefuseQueueFull(Full::Busy { interrupt: true }),
            ),
            (
                "steer, full: steering never queues",
                SessionView { queued: full, ..BUSY },
                PLAIN,
                behaviour(Steer, true),
                Action::Busy { how: Busy::Steer, ack: true },
            ),
            ("dequeued", IDLE, Input::Dequeued, behaviour(Queue, true), Action::StartTurn),
            ("dequeued, draining", SessionView { draining: true, ..IDLE }, Input::Dequeued, behaviour(Queue, true), Action::KeepForRestart),
            ("turn freed, nothing queued", IDLE, Input::TurnFreed, behaviour(Queue, true), Action::Wait),
            ("turn freed, one queued", SessionView { queued: 1, ..IDLE }, Input::TurnFreed, behaviour(Queue, true), Action::StartNext),
            ("turn freed, another runs", SessionView { queued: 1, ..BUSY }, Input::TurnFreed, behaviour(Queue, true), Action::Wait),
            ("idle timer, idle", IDLE, Input::IdleTimer, behaviour(Queue, true), Action::ReportIdle),
            ("idle timer, running", BUSY, Input::IdleTimer, behaviour(Queue, true), Action::Wait),
            ("idle timer, queued", SessionView { queued: 1, ..IDLE }, Input::IdleTimer, behaviour(Queue, true), Action::Wait),
        ];
        for (name, state, input, behaviour, expected) in rows {
            assert_eq!(decide(&state, &input, &behaviour), expected, "{name}");
        }
    }
}
