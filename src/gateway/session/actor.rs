//! Session actors: one per session key. An actor runs its session's events in order, one turn at
//! a time. What an event means (a command, a `clarify` answer, a new turn, a message for the
//! running turn under the busy policy or a pending approval) is decided by the pure
//! [`decide`](crate::gateway::session::decide); the actor gathers the facts it decides on,
//! and carries out the resulting [`Action`] in one place (`act`). The session's queue and running
//! turn are a [`SessionState`], which commands see too.
//! Every actor shares one [`ActorHandles`]: the turn's handles, the inbox, the commands', the
//! clarify and approval boards.

use crate::agent::SteeringInbox;
use crate::gateway::commands::{self, CommandContext, CommandHandles, CommandOutcome};
use crate::gateway::delivery::deliverer::Deliverer;
use crate::gateway::delivery::reply::Finish;
use crate::gateway::delivery::reply::{Reply, ReplyKey};
use crate::gateway::ops::lease::session_claims::SessionClaims;
use crate::gateway::session::decide::{Action, Behaviour, Busy, Full, Input, SessionView, decide};
use crate::gateway::turn::approvals::board::ApprovalBoard;
use crate::gateway::turn::approvals::texts;
use crate::gateway::turn::clarify::ClarifyBoard;
use crate::gateway::turn::queue::{QUEUE_CAP, RunningTurn, SessionState};
use crate::gateway::turn::{self, TurnHandles};
use crate::store::Inbox;
use hermes_adapter::{ChatTarget, InboundEvent};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What every session actor works with, built once at start-up.
pub(crate) struct ActorHandles {
    pub turns: TurnHandles,
    /// Where events are closed once handled (and a crashed turn's event is parked).
    pub inbox: Arc<dyn Inbox>,
    pub commands: CommandHandles,
    /// Questions the agent asked (`clarify`), answered by the session's next message.
    pub clarify: Arc<ClarifyBoard>,
    /// Commands waiting for approval: a message meanwhile is queued, not an answer.
    pub approvals: Arc<ApprovalBoard>,
    pub behaviour: Behaviour,
    /// With a store shared by replicas, the claims a turn of a platform served where accepted
    /// runs under (one session's turns run one at a time across replicas).
    pub session_claims: Option<Arc<SessionClaims>>,
}

/// An actor reporting that it is idle; `processed` lets the router check nothing is in flight.
pub(crate) struct ActorExit {
    pub session_key: String,
    pub processed: u64,
}

/// What the router sends an actor. Events travel boxed: a channel allocates its slots in blocks
/// of 32 when it is made, so an unboxed event (about 500 bytes) cost every idle actor 15 KB.
enum Mail {
    Event(Box<InboundEvent>),
    /// Too many actors are alive: retire as soon as nothing is running or queued.
    RetireIfIdle,
}

/// The router's end of an actor; the actor ends once every mailbox is dropped.
pub(crate) struct Mailbox {
    tx: mpsc::UnboundedSender<Mail>,
}

impl Mailbox {
    /// Hand `event` to the actor; it comes back when the actor has ended.
    pub(crate) fn send(&self, event: InboundEvent) -> Result<(), Box<InboundEvent>> {
        self.tx.send(Mail::Event(Box::new(event))).map_err(|mpsc::error::SendError(mail)| match mail {
            Mail::Event(event) => event,
            // SendError hands back exactly the mail that was sent, and that was an event.
            Mail::RetireIfIdle => unreachable!("an event was sent"),
        })
    }

    /// Ask the actor to report idle (an [`ActorExit`]) as soon as it has nothing to do, instead
    /// of after `idle_after`; a new event cancels the request.
    pub(crate) fn retire_if_idle(&self) {
        // An ended actor has nothing to retire.
        let _ = self.tx.send(Mail::RetireIfIdle);
    }
}

/// Start an actor for `session_key`; returns the mailbox the router feeds it through.
pub(crate) fn spawn(handles: Arc<ActorHandles>, session_key: String, idle: mpsc::UnboundedSender<ActorExit>) -> Mailbox {
    let (tx, rx) = mpsc::unbounded_channel();
    let actor =
        SessionActor { state: SessionState::new(handles.inbox.clone()), handles, session_key, idle, processed: 0, last_busy_ack: None };
    tokio::spawn(actor.run(rx));
    Mailbox { tx }
}

struct SessionActor {
    handles: Arc<ActorHandles>,
    session_key: String,
    state: SessionState,
    idle: mpsc::UnboundedSender<ActorExit>,
    /// Events taken from the mailbox, reported with [`ActorExit`].
    processed: u64,
    /// When the last busy acknowledgement went out (see [`crate::gateway::session::decide::BUSY_ACK_EVERY`]).
    last_busy_ack: Option<Instant>,
}

/// A decision that follows an action: the input, and the event it is about (if any).
type FollowUp = Option<(Input, Option<InboundEvent>)>;

impl SessionActor {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Mail>) {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<String>();
        let idle_after = self.handles.behaviour.idle_after;
        let mut retire_asked = false;
        loop {
            let idle = self.decide(&Input::IdleTimer) == Action::ReportIdle;
            let wait = if retire_asked { Duration::ZERO } else { idle_after };
            tokio::select! {
                Some(finished) = done_rx.recv() => {
                    if let Some(done) = self.state.end(&finished) {
                        Box::pin(self.settle_steered(done.steering())).await;
                    }
                    Box::pin(self.handle(Input::TurnFreed, None, &done_tx)).await;
                }
                mail = rx.recv() => match mail {
                    None => break,
                    Some(Mail::Event(event)) => {
                        self.processed += 1;
                        retire_asked = false;
                        // Boxed: the handling of one event is large, and an idle actor should
                        // not carry its space while it waits.
                        Box::pin(self.on_event(*event, &done_tx)).await;
                    }
                    Some(Mail::RetireIfIdle) => retire_asked = true,
                },
                _ = tokio::time::sleep(wait), if idle => {
                    retire_asked = false;
                    Box::pin(self.handle(Input::IdleTimer, None, &done_tx)).await;
                }
            }
        }
    }

    /// The facts [`decide`] needs about this session, now.
    fn view(&self) -> SessionView {
        let running = self.state.is_running();
        SessionView {
            running,
            approval_pending: running && self.handles.approvals.pending(&self.session_key) > 0,
            queued: self.state.queued(),
            draining: self.handles.turns.limits.running.is_draining(),
            since_busy_ack: self.last_busy_ack.map(|at| at.elapsed()),
        }
    }

    fn decide(&self, input: &Input) -> Action {
        decide(&self.view(), input, &self.handles.behaviour)
    }

    async fn on_event(&mut self, event: InboundEvent, done: &mpsc::UnboundedSender<String>) {
        let input = match commands::parse(&event.text) {
            None => self.message(&event, false),
            Some(parsed) => match self.handles.commands.registry.find(&parsed.name) {
                None => Input::UnknownCommand,
                Some(command) => Input::Command { runs_mid_turn: command.spec().runs_mid_turn },
            },
        };
        self.handle(input, Some(event), done).await;
    }

    /// `event` as a plain message; `clarify_declined` once no `clarify` question took it.
    fn message(&self, event: &InboundEvent, clarify_declined: bool) -> Input {
        let reaches_later = self.deliverer().reaches_later(event.answer_target().platform.as_str());
        Input::Message { reaches_later, clarify_declined }
    }

    /// Decide what `input` means and carry it out, then whatever follows from it.
    async fn handle(&mut self, input: Input, event: Option<InboundEvent>, done: &mpsc::UnboundedSender<String>) {
        let mut next = Some((input, event));
        while let Some((input, event)) = next.take() {
            let action = self.decide(&input);
            next = self.act(action, event, done).await;
        }
    }

    /// Carry out `action`, the one place where a decision turns into effects.
    async fn act(&mut self, action: Action, event: Option<InboundEvent>, done: &mpsc::UnboundedSender<String>) -> FollowUp {
        match action {
            Action::Wait => return None,
            Action::ReportIdle => {
                // The router may be gone during shutdown; nobody to tell then.
                let _ = self.idle.send(ActorExit { session_key: self.session_key.clone(), processed: self.processed });
                return None;
            }
            Action::StartNext => return self.state.pop_next().map(|next| (Input::Dequeued, Some(next))),
            _ => {}
        }
        // Every other action is about an event: `decide` gives them only for an event's input.
        let event = event?;
        match action {
            Action::ReplyUnknownCommand | Action::RefuseMidTurn => {
                let name = commands::parse(&event.text).map(|p| p.name).unwrap_or_default();
                let text =
                    if action == Action::RefuseMidTurn { commands::busy_refusal(&name) } else { commands::unknown_command_reply(&name) };
                self.reply_and_close(&event, &text).await;
            }
            Action::RunCommand => return self.run_command(event).await,
            Action::HoldForApproval => self.hold_while_approval_pending(event).await,
            Action::AnswerClarify => {
                if !self.handles.clarify.answer(&self.session_key, &event.text) {
                    return Some((self.message(&event, true), Some(event)));
                }
                self.close(&event).await;
            }
            Action::StartTurn => self.start_turn(event, done),
            // Left in the inbox as accepted: it runs after the restart.
            Action::KeepForRestart => tracing::info!(event_id = %event.event_id, "draining: message kept for after the restart"),
            Action::Busy { how, ack } => self.busy(event, how, ack).await,
            Action::RefuseQueueFull(full) => self.refuse_queue_full(&event, full).await,
            Action::Wait | Action::ReportIdle | Action::StartNext => {}
        }
        None
    }

    /// Run the command `event` names; a command that asks for a prompt to run hands it back as
    /// a message.
    async fn run_command(&mut self, event: InboundEvent) -> FollowUp {
        // `decide` chose this for an event that parsed as a known command; both are pure lookups.
        let parsed = commands::parse(&event.text)?;
        let command = self.handles.commands.registry.find(&parsed.name)?;
        let handles = self.handles.clone();
        let outcome = {
            let mut ctx =
                CommandContext { handles: &handles.commands, event: &event, session_key: &self.session_key, session: &mut self.state };
            command.run(&mut ctx, &parsed.args).await
        };
        match outcome {
            CommandOutcome::Reply(text) => self.reply_and_close(&event, &text).await,
            CommandOutcome::ReplyWithButtons(text, buttons) => {
                let target = event.answer_target();
                let reply = Reply::markdown(target, text).replying_to(event.answer_reply_to()).with_buttons(buttons);
                let reply = reply.finishing(Some(Finish::stop()));
                self.deliverer().queue(reply, ReplyKey::CommandReply(event.event_id.clone())).await;
                self.close(&event).await;
            }
            CommandOutcome::ReplyAndRun { reply, prompt } => {
                if let Some(text) = reply {
                    let target = event.answer_target();
                    self.deliverer().queue(Reply::markdown(target, text), ReplyKey::Notice(event.event_id.clone())).await;
                }
                let mut as_prompt = event;
                as_prompt.text = prompt;
                return Some((self.message(&as_prompt, false), Some(as_prompt)));
            }
        }
        None
    }

    /// Answer an event with a system text (command reply, refusal) and close it in the inbox.
    async fn reply_and_close(&self, event: &InboundEvent, text: &str) {
        let target = event.answer_target();
        // Queued, not awaited: an outage must not hold up the session's other events.
        let reply = Reply::markdown(target, text).replying_to(event.answer_reply_to()).finishing(Some(Finish::stop()));
        self.deliverer().queue(reply, ReplyKey::CommandReply(event.event_id.clone())).await;
        self.close(event).await;
    }

    fn deliverer(&self) -> &Deliverer {
        &self.handles.turns.deliverer
    }

    async fn close(&self, event: &InboundEvent) {
        if let Err(e) = self.handles.inbox.inbox_mark_done(&event.event_id).await {
            tracing::warn!(error = %e, event_id = %event.event_id, "could not mark an inbox row done");
        }
    }

    /// After a turn: steered messages it took are done; the rest run as the next turns.
    async fn settle_steered(&mut self, steering: &SteeringInbox) {
        let left = steering.take().len();
        let steered = self.state.take_steered();
        let taken = steered.len().saturating_sub(left);
        for (i, event) in steered.into_iter().enumerate() {
            if i < taken {
                self.close(&event).await;
            } else if self.state.enqueue_back(event.clone()).is_err() {
                self.reply_and_close(&event, "⚠️ Too many messages are waiting. This one was not queued — send it again later.").await;
            }
        }
    }

    /// The busy policy, for a message the queue has room for (`decide` checked).
    async fn busy(&mut self, event: InboundEvent, how: Busy, ack: bool) {
        let (queued, text) = match how {
            Busy::Interrupt => {
                let queued = self.state.enqueue_front(event.clone());
                self.state.interrupt();
                (queued, "⚡ Interrupting current task. I'll respond to your message shortly.")
            }
            Busy::Queue => {
                (self.state.enqueue_back(event.clone()), "⏳ Queued for the next turn. I'll respond once the current task finishes.")
            }
            Busy::Steer => {
                self.state.steer(event.clone());
                (Ok(0), "⏩ Steered into current run. Your message arrives after the next tool call.")
            }
        };
        if queued.is_err() {
            // Only if the queue filled since `decide` looked, which nothing in between does.
            self.refuse_queue_full(&event, Full::Busy { interrupt: false }).await;
            return;
        }
        if ack {
            self.busy_ack(&event, text).await;
        }
    }

    /// Refuse a message the queue has no room for (the interrupt mode still interrupts).
    async fn refuse_queue_full(&mut self, event: &InboundEvent, full: Full) {
        let then = match full {
            Full::ApprovalPending => "answer the pending approval first",
            Full::Busy { interrupt } => {
                if interrupt {
                    self.state.interrupt();
                }
                "wait for the current task or /stop it"
            }
        };
        let text = format!("⚠️ Too many messages are waiting ({QUEUE_CAP}). This one was not queued — {then}.");
        self.reply_and_close(event, &text).await;
    }

    /// A message while a command waits for approval: it must not answer the approval (only
    /// `/approve` does) nor interrupt the turn (that would deny it), so it waits for the turn and
    /// its sender learns why nothing happens yet.
    async fn hold_while_approval_pending(&mut self, event: InboundEvent) {
        if self.state.enqueue_back(event.clone()).is_err() {
            // Only if the queue filled since `decide` looked, which nothing in between does.
            self.refuse_queue_full(&event, Full::ApprovalPending).await;
            return;
        }
        let target = event.answer_target();
        let notice = Reply::markdown(target, texts::PENDING_NOTICE).replying_to(event.answer_reply_to());
        self.deliverer().queue(notice, ReplyKey::ApprovalPending(event.event_id.clone())).await;
    }

    /// Tell the user their message was seen (`decide` said when: at most once per 30 s, on chat
    /// platforms only, as a request/response client gets its answer, not an ack).
    async fn busy_ack(&mut self, event: &InboundEvent, text: &str) {
        let target = event.answer_target();
        self.last_busy_ack = Some(Instant::now());
        self.deliverer().queue(Reply::markdown(target, text), ReplyKey::Ack(event.event_id.clone())).await;
    }

    fn start_turn(&mut self, event: InboundEvent, done: &mpsc::UnboundedSender<String>) {
        let interrupt = self.handles.turns.limits.abort.child_token();
        let started = Arc::new(AtomicBool::new(false));
        let steering = SteeringInbox::default();
        self.state.begin(RunningTurn::new(event.event_id.clone(), steering.clone(), interrupt.clone(), started.clone()));
        let turns = self.handles.turns.clone();
        let inbox = self.handles.inbox.clone();
        let key = self.session_key.clone();
        let done = done.clone();
        let claims = self.handles.session_claims.clone();
        tokio::spawn(async move {
            let event_id = event.event_id.clone();
            let target = event.answer_target();
            let deliverer = turns.deliverer.clone();
            // Another replica may run a turn of this session: this one waits for it. Stopped
            // meanwhile, the turn does not run; its event stays unfinished.
            let platform = event.source.platform.as_str();
            let Ok(claim) = SessionClaims::hold_for(claims.as_ref(), platform, &key, &turns.limits.abort).await else {
                let _ = done.send(event_id);
                return;
            };
            let turn = tokio::spawn(turn::run(turns, key, event, interrupt, started, steering, turn::TurnMode::default()));
            if let Err(crash) = turn.await
                && crash.is_panic()
            {
                crashed_turn(inbox.as_ref(), &deliverer, &event_id, &target, crash.into_panic()).await;
            }
            if let Some(claim) = claim {
                claim.release().await;
            }
            // The actor may be gone during shutdown; nothing to tell then.
            let _ = done.send(event_id);
        });
    }
}

/// A turn panicked: the session stays usable (the actor hears the turn ended), the user hears
/// of an internal error with an incident id the log also carries, and the event is parked so it
/// is never replayed into the same panic.
async fn crashed_turn(inbox: &dyn Inbox, deliverer: &Deliverer, event_id: &str, target: &ChatTarget, panic: Box<dyn std::any::Any + Send>) {
    let incident = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let message =
        panic.downcast_ref::<String>().map(String::as_str).or_else(|| panic.downcast_ref::<&str>().copied()).unwrap_or("(no message)");
    tracing::error!(incident, event_id, panic = %crate::observe::redact::redact_patterns(message), "a turn panicked");
    let reason = format!("poisoned: the turn panicked (incident {incident})");
    if let Err(e) = inbox.inbox_mark_poisoned(event_id, &reason).await {
        tracing::warn!(error = %e, event_id, "could not park the event");
    }
    let text = crate::gateway::turn::TurnError::Crashed { incident }.reply();
    let reply = Reply::markdown(target.clone(), text).finishing(Some(Finish::stop()));
    deliverer.send(reply, ReplyKey::Incident(event_id.to_string())).await;
}
