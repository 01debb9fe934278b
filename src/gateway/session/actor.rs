//! Session actors: one per session key. An actor runs its session's events in order, one turn at
//! a time; while a turn runs it answers commands at once, hands the next message to a pending
//! `clarify` question, and applies the busy policy (interrupt, queue or steer) to new messages —
//! except while the turn waits for a command's approval: then a message is queued and its sender
//! told that an approval is pending (a plain "yes" never approves, and never interrupts).
//! Every actor shares one [`ActorHandles`]: the turn's handles, the commands', the clarify and
//! approval boards.

use crate::agent::SteeringInbox;
use crate::config::{BusyInputMode, Config};
use crate::gateway::commands::{self, CommandContext, CommandHandles, CommandOutcome};
use crate::gateway::delivery::deliverer::Deliverer;
use crate::gateway::delivery::outbound::{self, Finish};
use crate::gateway::turn::approvals::board::ApprovalBoard;
use crate::gateway::turn::approvals::texts;
use crate::gateway::turn::clarify::ClarifyBoard;
use crate::gateway::turn::{self, TurnHandles};
use crate::store::Store;
use hermes_adapter::{ChatTarget, InboundEvent};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Most messages a session holds while busy.
pub const QUEUE_CAP: usize = 32;
/// Busy acknowledgements are sent at most this often per session.
const BUSY_ACK_EVERY: Duration = Duration::from_secs(30);

/// What every session actor works with, built once at start-up.
pub struct ActorHandles {
    pub turns: TurnHandles,
    pub commands: CommandHandles,
    /// Questions the agent asked (`clarify`), answered by the session's next message.
    pub clarify: Arc<ClarifyBoard>,
    /// Commands waiting for approval: a message meanwhile is queued, not an answer.
    pub approvals: Arc<ApprovalBoard>,
    pub behaviour: Behaviour,
}

/// How a session treats its users' messages (`gateway.idle_session_secs`,
/// `gateway.memory.live_sessions`, `display.*`).
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    /// An actor with nothing to do retires after this long.
    pub idle_after: Duration,
    /// Actors kept at most; beyond it the router asks the least recently used to retire when idle.
    pub live_sessions: usize,
    pub busy_input_mode: BusyInputMode,
    pub busy_ack_enabled: bool,
}

impl Behaviour {
    pub fn from_config(config: &Config) -> Self {
        Self {
            idle_after: Duration::from_secs(config.gateway.idle_session_secs.max(1)),
            live_sessions: config.gateway.memory.live_sessions.max(1),
            busy_input_mode: config.display.busy_input_mode,
            busy_ack_enabled: config.display.busy_ack_enabled,
        }
    }
}

/// An actor reporting that it is idle; `processed` lets the router check nothing is in flight.
pub struct ActorExit {
    pub session_key: String,
    pub processed: u64,
}

struct RunningTurn {
    event_id: String,
    /// Where `/steer` and busy-mode `steer` put text for the running turn.
    steering: SteeringInbox,
    interrupt: CancellationToken,
    /// The agent was invoked (not just waiting for a concurrency slot).
    started: Arc<AtomicBool>,
}

/// A session's live state, as commands see it.
pub struct SessionState {
    /// The inbox, where dropped queued messages are closed.
    store: Store,
    running: Option<RunningTurn>,
    queue: VecDeque<InboundEvent>,
    /// Messages steered into the running turn, in order; the ones it did not take are queued
    /// when it ends.
    steered: Vec<InboundEvent>,
    last_busy_ack: Option<Instant>,
}

impl SessionState {
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    pub fn turn_started(&self) -> bool {
        self.running.as_ref().is_some_and(|r| r.started.load(Ordering::Acquire))
    }

    /// Interrupt the running turn, if any; it reports back when it has stopped.
    pub fn interrupt(&mut self) {
        if let Some(r) = &self.running {
            r.interrupt.cancel();
        }
    }

    /// Inject `event`'s text into the running turn after its next tool call; false when no turn
    /// runs.
    pub fn steer(&mut self, event: InboundEvent) -> bool {
        let Some(running) = &self.running else { return false };
        running.steering.push(event.text.clone());
        self.steered.push(event);
        true
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Drop queued input; each dropped message is closed in the inbox so it is not replayed.
    pub async fn clear_queue(&mut self) -> usize {
        let dropped: Vec<InboundEvent> = self.queue.drain(..).collect();
        for ev in &dropped {
            if let Err(e) = self.store.inbox_mark_done(&ev.event_id).await {
                tracing::warn!(error = %e, "could not close a dropped queued message");
            }
        }
        dropped.len()
    }

    /// Queue for after the running turn; `Err(cap)` when full.
    pub fn enqueue_back(&mut self, event: InboundEvent) -> Result<usize, usize> {
        if self.queue.len() >= QUEUE_CAP {
            return Err(QUEUE_CAP);
        }
        self.queue.push_back(event);
        Ok(self.queue.len())
    }

    fn enqueue_front(&mut self, event: InboundEvent) -> Result<usize, usize> {
        if self.queue.len() >= QUEUE_CAP {
            return Err(QUEUE_CAP);
        }
        self.queue.push_front(event);
        Ok(self.queue.len())
    }
}

/// What the router sends an actor. Events travel boxed: a channel allocates its slots in blocks
/// of 32 when it is made, so an unboxed event (about 500 bytes) cost every idle actor 15 KB.
enum Mail {
    Event(Box<InboundEvent>),
    /// Too many actors are alive: retire as soon as nothing is running or queued.
    RetireIfIdle,
}

/// The router's end of an actor; the actor ends once every mailbox is dropped.
pub struct Mailbox {
    tx: mpsc::UnboundedSender<Mail>,
}

impl Mailbox {
    /// Hand `event` to the actor; it comes back when the actor has ended.
    pub fn send(&self, event: InboundEvent) -> Result<(), Box<InboundEvent>> {
        self.tx.send(Mail::Event(Box::new(event))).map_err(|mpsc::error::SendError(mail)| match mail {
            Mail::Event(event) => event,
            // SendError hands back exactly the mail that was sent, and that was an event.
            Mail::RetireIfIdle => unreachable!("an event was sent"),
        })
    }

    /// Ask the actor to report idle (an [`ActorExit`]) as soon as it has nothing to do, instead
    /// of after `idle_after`; a new event cancels the request.
    pub fn retire_if_idle(&self) {
        // An ended actor has nothing to retire.
        let _ = self.tx.send(Mail::RetireIfIdle);
    }
}

/// Start an actor for `session_key`; returns the mailbox the router feeds it through.
pub fn spawn(handles: Arc<ActorHandles>, session_key: String, idle: mpsc::UnboundedSender<ActorExit>) -> Mailbox {
    let (tx, rx) = mpsc::unbounded_channel();
    let store = handles.turns.sessions.store.clone();
    let actor = SessionActor {
        state: SessionState { store, running: None, queue: VecDeque::new(), steered: Vec::new(), last_busy_ack: None },
        handles,
        session_key,
        idle,
    };
    tokio::spawn(actor.run(rx));
    Mailbox { tx }
}

struct SessionActor {
    handles: Arc<ActorHandles>,
    session_key: String,
    state: SessionState,
    idle: mpsc::UnboundedSender<ActorExit>,
}

impl SessionActor {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Mail>) {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<String>();
        let idle_after = self.handles.behaviour.idle_after;
        let mut processed: u64 = 0;
        let mut retire_asked = false;
        loop {
            let idle = self.state.running.is_none() && self.state.queue.is_empty();
            let wait = if retire_asked { Duration::ZERO } else { idle_after };
            tokio::select! {
                Some(finished) = done_rx.recv() => {
                    if self.state.running.as_ref().is_some_and(|r| r.event_id == finished)
                        && let Some(done) = self.state.running.take()
                    {
                        Box::pin(self.settle_steered(&done.steering)).await;
                    }
                    self.start_next(&done_tx);
                }
                mail = rx.recv() => match mail {
                    None => break,
                    Some(Mail::Event(event)) => {
                        processed += 1;
                        retire_asked = false;
                        // Boxed: the handling of one event is large, and an idle actor should
                        // not carry its space while it waits.
                        Box::pin(self.on_event(*event, &done_tx)).await;
                    }
                    Some(Mail::RetireIfIdle) => retire_asked = true,
                },
                _ = tokio::time::sleep(wait), if idle => {
                    retire_asked = false;
                    let _ = self.idle.send(ActorExit { session_key: self.session_key.clone(), processed });
                }
            }
        }
    }

    /// Answer an event with a system text (command reply, refusal) and close it in the inbox.
    async fn reply_and_close(&self, event: &InboundEvent, text: &str) {
        let target = event.answer_target();
        // Queued, not awaited: an outage must not hold up the session's other events.
        outbound::queue(
            self.deliverer(),
            &target,
            event.answer_reply_to(),
            text,
            &[],
            &format!("{}:reply", event.event_id),
            Some(Finish::stop()),
        )
        .await;
        self.close(event).await;
    }

    fn deliverer(&self) -> &Deliverer {
        &self.handles.turns.deliverer
    }

    async fn close(&self, event: &InboundEvent) {
        if let Err(e) = self.state.store.inbox_mark_done(&event.event_id).await {
            tracing::warn!(error = %e, event_id = %event.event_id, "could not mark an inbox row done");
        }
    }

    async fn on_event(&mut self, event: InboundEvent, done: &mpsc::UnboundedSender<String>) {
        let Some(parsed) = commands::parse(&event.text) else {
            self.on_message(event, done).await;
            return;
        };
        let Some(command) = self.handles.commands.registry.find(&parsed.name) else {
            self.reply_and_close(&event, &commands::unknown_command_reply(&parsed.name)).await;
            return;
        };
        if self.state.is_running() && !command.spec().runs_mid_turn {
            self.reply_and_close(&event, &commands::busy_refusal(&parsed.name)).await;
            return;
        }
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
                let reply_to = event.answer_reply_to();
                let key = format!("{}:reply", event.event_id);
                outbound::queue(self.deliverer(), &target, reply_to, &text, &buttons, &key, Some(Finish::stop())).await;
                self.close(&event).await;
            }
            CommandOutcome::Silent => self.close(&event).await,
            CommandOutcome::ReplyAndRun { reply, prompt } => {
                if let Some(text) = reply {
                    let target = event.answer_target();
                    outbound::queue(self.deliverer(), &target, None, &text, &[], &format!("{}:notice", event.event_id), None).await;
                }
                let mut as_prompt = event;
                as_prompt.text = prompt;
                self.on_message(as_prompt, done).await;
            }
        }
    }

    /// After a turn: steered messages it took are done; the rest run as the next turns.
    async fn settle_steered(&mut self, steering: &SteeringInbox) {
        let left = steering.take().len();
        let steered = std::mem::take(&mut self.state.steered);
        let taken = steered.len().saturating_sub(left);
        for (i, event) in steered.into_iter().enumerate() {
            if i < taken {
                self.close(&event).await;
            } else if self.state.enqueue_back(event.clone()).is_err() {
                self.reply_and_close(&event, "⚠️ Too many messages are waiting. This one was not queued — send it again later.").await;
            }
        }
    }

    async fn on_message(&mut self, event: InboundEvent, done: &mpsc::UnboundedSender<String>) {
        if self.state.is_running() && self.handles.approvals.pending(&self.session_key) > 0 {
            self.hold_while_approval_pending(event).await;
            return;
        }
        // A question the agent asked (`clarify`) takes the next message as its answer.
        if self.state.is_running() && self.handles.clarify.answer(&self.session_key, &event.text) {
            self.close(&event).await;
            return;
        }
        if !self.state.is_running() {
            self.start_turn(event, done);
            return;
        }
        let mode = self.handles.behaviour.busy_input_mode;
        let (queued, ack) = match mode {
            BusyInputMode::Interrupt => {
                let queued = self.state.enqueue_front(event.clone());
                self.state.interrupt();
                (queued, "⚡ Interrupting current task. I'll respond to your message shortly.")
            }
            BusyInputMode::Queue => {
                (self.state.enqueue_back(event.clone()), "⏳ Queued for the next turn. I'll respond once the current task finishes.")
            }
            BusyInputMode::Steer => {
                self.state.steer(event.clone());
                (Ok(0), "⏩ Steered into current run. Your message arrives after the next tool call.")
            }
        };
        if let Err(cap) = queued {
            let text =
                format!("⚠️ Too many messages are waiting ({cap}). This one was not queued — wait for the current task or /stop it.");
            self.reply_and_close(&event, &text).await;
            return;
        }
        self.busy_ack(&event, ack).await;
    }

    /// A message while a command waits for approval: it must not answer the approval (only
    /// `/approve` does) nor interrupt the turn (that would deny it), so it waits for the turn and
    /// its sender learns why nothing happens yet.
    async fn hold_while_approval_pending(&mut self, event: InboundEvent) {
        if let Err(cap) = self.state.enqueue_back(event.clone()) {
            let text = format!("⚠️ Too many messages are waiting ({cap}). This one was not queued — answer the pending approval first.");
            self.reply_and_close(&event, &text).await;
            return;
        }
        let target = event.answer_target();
        let key = format!("{}:approval-pending", event.event_id);
        outbound::queue(self.deliverer(), &target, event.answer_reply_to(), texts::PENDING_NOTICE, &[], &key, None).await;
    }

    /// Tell the user their message was seen, at most once per 30 s, on chat platforms only (a
    /// request/response client gets its answer, not an ack).
    async fn busy_ack(&mut self, event: &InboundEvent, text: &str) {
        if !self.handles.behaviour.busy_ack_enabled {
            return;
        }
        if self.state.last_busy_ack.is_some_and(|t| t.elapsed() < BUSY_ACK_EVERY) {
            return;
        }
        let target = event.answer_target();
        if !self.deliverer().reaches_later(target.platform.as_str()) {
            return;
        }
        self.state.last_busy_ack = Some(Instant::now());
        outbound::queue(self.deliverer(), &target, None, text, &[], &format!("{}:ack", event.event_id), None).await;
    }

    fn start_next(&mut self, done: &mpsc::UnboundedSender<String>) {
        if self.state.running.is_some() {
            return;
        }
        if let Some(next) = self.state.queue.pop_front() {
            self.start_turn(next, done);
        }
    }

    fn start_turn(&mut self, event: InboundEvent, done: &mpsc::UnboundedSender<String>) {
        if self.handles.turns.limits.running.is_draining() {
            // Left in the inbox as accepted: it runs after the restart.
            tracing::info!(event_id = %event.event_id, "draining: message kept for after the restart");
            return;
        }
        let interrupt = self.handles.turns.limits.abort.child_token();
        let started = Arc::new(AtomicBool::new(false));
        let steering = SteeringInbox::default();
        self.state.running = Some(RunningTurn {
            event_id: event.event_id.clone(),
            steering: steering.clone(),
            interrupt: interrupt.clone(),
            started: started.clone(),
        });
        let turns = self.handles.turns.clone();
        let key = self.session_key.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let event_id = event.event_id.clone();
            let target = event.answer_target();
            let (store, deliverer) = (turns.sessions.store.clone(), turns.deliverer.clone());
            let turn = tokio::spawn(turn::run(turns, key, event, interrupt, started, steering, turn::TurnMode::default()));
            if let Err(crash) = turn.await
                && crash.is_panic()
            {
                crashed_turn(&store, &deliverer, &event_id, &target, crash.into_panic()).await;
            }
            // The actor may be gone during shutdown; nothing to tell then.
            let _ = done.send(event_id);
        });
    }
}

/// A turn panicked: the session stays usable (the actor hears the turn ended), the user hears
/// of an internal error with an incident id the log also carries, and the event is parked so it
/// is never replayed into the same panic.
async fn crashed_turn(store: &Store, deliverer: &Deliverer, event_id: &str, target: &ChatTarget, panic: Box<dyn std::any::Any + Send>) {
    let incident = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let message =
        panic.downcast_ref::<String>().map(String::as_str).or_else(|| panic.downcast_ref::<&str>().copied()).unwrap_or("(no message)");
    tracing::error!(incident, event_id, panic = %crate::observe::redact::redact_patterns(message), "a turn panicked");
    let reason = format!("poisoned: the turn panicked (incident {incident})");
    if let Err(e) = store.inbox_mark_poisoned(event_id, &reason).await {
        tracing::warn!(error = %e, event_id, "could not park the event");
    }
    let text = format!("⚠️ Internal error (incident {incident}). Your message was not processed; please try again or rephrase it.");
    outbound::deliver(deliverer, target, None, &text, &format!("{event_id}:internal-error"), Some(Finish::stop())).await;
}
