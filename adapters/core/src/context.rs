//! What the gateway hands an adapter while it runs: the durable inbox, a health reporter, a view
//! of the sessions (for HTTP surfaces that expose them), the sender policy, the fenced cursors
//! and the shutdown signal.

use crate::cursors::Cursors;
use crate::inbound::{AcceptOutcome, InboundEvent};
use crate::source::SessionSource;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

/// The inbox could not take the event; the adapter must not acknowledge the platform.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The gateway is stopping; the platform will redeliver the update to the next run.
    #[error("the gateway is shutting down and accepts no new work")]
    ShuttingDown,
    /// The store failed to write the event (the store's own error, as text).
    #[error("the inbox could not store the event: {0}")]
    Storage(String),
}

/// The durable inbox, as seen from an adapter.
#[async_trait]
pub trait InboundSink: Send + Sync + 'static {
    /// Store one event durably (or recognise it as a duplicate); the adapter acknowledges the
    /// platform only after this returns `Ok`.
    async fn accept(&self, event: InboundEvent) -> Result<AcceptOutcome, AcceptError>;

    /// Store several events, in order, all or none: what a platform delivered in one batch (a
    /// long poll's updates) is acknowledged together. Sinks that can store them in one write
    /// override this; by default they are accepted one by one.
    async fn accept_all(&self, events: Vec<InboundEvent>) -> Result<Vec<AcceptOutcome>, AcceptError> {
        let mut outcomes = Vec::with_capacity(events.len());
        for event in events {
            outcomes.push(self.accept(event).await?);
        }
        Ok(outcomes)
    }
}

/// A stored message of a conversation, as exposed by HTTP surfaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// Who wrote it, as the transcript records it (`user`, `assistant`, `tool`, ...).
    pub role: String,
    /// The message text as stored.
    pub content: String,
    /// For a tool result, the tool that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// When the message was stored.
    pub timestamp: DateTime<Utc>,
}

/// Why a [`SessionDirectory`] call failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionDirectoryError {
    /// The session store failed (its own error, as text); HTTP surfaces answer with a 5xx.
    #[error("session store failure: {0}")]
    Storage(String),
}

/// Conversations, addressed by the source an adapter would build for them. Only surfaces that
/// expose sessions to their clients (the API server's sessions REST API) need it.
#[async_trait]
pub trait SessionDirectory: Send + Sync + 'static {
    /// Create the conversation if needed and return its current session id.
    async fn open(&self, source: &SessionSource) -> Result<String, SessionDirectoryError>;
    /// The last `limit` messages, oldest first; `None` when the conversation does not exist.
    async fn history(&self, source: &SessionSource, limit: usize) -> Result<Option<Vec<StoredMessage>>, SessionDirectoryError>;
    /// End the conversation; `false` when it did not exist.
    async fn close(&self, source: &SessionSource) -> Result<bool, SessionDirectoryError>;
}

/// Whether a sender may use the bot, as the gateway's allowlists decide. Adapters ask it before
/// they spend anything on a message (downloading its attachments), so that strangers cost
/// nothing; the gateway still authorizes every accepted event itself. It sees only the
/// [`SessionSource`]: no session, no store.
pub trait SenderPolicy: Send + Sync + 'static {
    /// Whether the gateway's allowlists would let the sender of a message from `source` in.
    fn allows(&self, source: &SessionSource) -> bool;

    /// Whether a stranger's DM on `platform` is answered with a pairing code (the configuration
    /// names nobody there). An adapter that must accept something before a stranger can write
    /// at all (a Matrix DM invite) accepts it only then. Off unless the policy says so.
    fn offers_pairing(&self, _platform: &str) -> bool {
        false
    }
}

/// A closure is a policy (adapter tests).
impl<F: Fn(&SessionSource) -> bool + Send + Sync + 'static> SenderPolicy for F {
    fn allows(&self, source: &SessionSource) -> bool {
        self(source)
    }
}

/// What a context allows until the gateway hands it its policy: nobody. Failing closed means an
/// adapter run without a policy downloads nothing for anyone.
struct NobodyAllowed;

impl SenderPolicy for NobodyAllowed {
    fn allows(&self, _: &SessionSource) -> bool {
        false
    }
}

fn now_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

#[derive(Debug, Default)]
struct HealthInner {
    connected: AtomicBool,
    last_progress_ms: AtomicI64,
    degraded: Mutex<Option<String>>,
}

/// How an adapter tells the supervisor it is alive. Liveness is measured from real inbound
/// progress (a poll that returned, a heartbeat acknowledged, a request served), never from a side
/// call.
#[derive(Debug, Clone, Default)]
pub struct HealthReporter {
    inner: Arc<HealthInner>,
}

impl HealthReporter {
    /// A reporter for a connection that is not up yet and has made no progress.
    pub fn new() -> Self {
        Self::default()
    }
    /// The connection is up and receiving.
    pub fn mark_connected(&self) {
        self.inner.connected.store(true, Ordering::Release);
        self.progress();
    }
    /// The connection dropped; the supervisor reports the adapter down until it reconnects.
    pub fn mark_disconnected(&self) {
        self.inner.connected.store(false, Ordering::Release);
    }
    /// Something real happened on the connection.
    pub fn progress(&self) {
        self.inner.last_progress_ms.store(now_millis(), Ordering::Release);
    }
    /// The connection is up but impaired (heartbeats unanswered, throttled); `None` clears it.
    pub fn set_degraded(&self, reason: Option<String>) {
        if let Ok(mut slot) = self.inner.degraded.lock() {
            *slot = reason;
        }
    }
    /// Whether the adapter last said its connection was up.
    pub fn is_connected(&self) -> bool {
        self.inner.connected.load(Ordering::Acquire)
    }
    /// Milliseconds since the Unix epoch of the last progress, 0 if none yet.
    pub fn last_progress_ms(&self) -> i64 {
        self.inner.last_progress_ms.load(Ordering::Acquire)
    }
    /// Why the connection is impaired, if the adapter said it is (see [`Self::set_degraded`]).
    pub fn degraded_reason(&self) -> Option<String> {
        self.inner.degraded.lock().ok().and_then(|slot| slot.clone())
    }
}

/// Everything an adapter's `run` receives.
#[derive(Clone)]
pub struct AdapterContext {
    inbox: Arc<dyn InboundSink>,
    sessions: Arc<dyn SessionDirectory>,
    senders: Arc<dyn SenderPolicy>,
    cursors: Cursors,
    /// Where the adapter reports connection state and progress to the supervisor.
    pub health: HealthReporter,
    /// Cancelled when the gateway stops; `run` returns `Ok(())` soon after.
    pub shutdown: CancellationToken,
}

impl AdapterContext {
    /// A context that admits no sender until [`Self::with_sender_policy`] gives it a policy.
    pub fn new(
        inbox: Arc<dyn InboundSink>,
        sessions: Arc<dyn SessionDirectory>,
        health: HealthReporter,
        shutdown: CancellationToken,
    ) -> Self {
        Self { inbox, sessions, senders: Arc::new(NobodyAllowed), cursors: Cursors::local(), health, shutdown }
    }

    /// The cursors [`AdapterContext::cursors`] returns; without, [`Cursors::local`] (one process:
    /// the adapter's own files are its cursors).
    pub fn with_cursors(mut self, cursors: Cursors) -> Self {
        self.cursors = cursors;
        self
    }

    /// Where this run records how far it has read. With a shared store a saved cursor is fenced
    /// by the run's connection lease (see [`crate::cursors`]).
    pub fn cursors(&self) -> &Cursors {
        &self.cursors
    }

    /// The policy [`AdapterContext::sender_allowed`] asks; without one, nobody is allowed.
    pub fn with_sender_policy(mut self, senders: Arc<dyn SenderPolicy>) -> Self {
        self.senders = senders;
        self
    }

    /// Whether the gateway would let this sender in. Ask before fetching anything for a message
    /// (attachments): a `false` means the event will be denied, so fetch nothing.
    pub fn sender_allowed(&self, source: &SessionSource) -> bool {
        self.senders.allows(source)
    }

    /// Whether strangers may pair on `platform` (see [`SenderPolicy::offers_pairing`]).
    pub fn offers_pairing(&self, platform: &str) -> bool {
        self.senders.offers_pairing(platform)
    }

    /// Store the event durably. Acknowledge the platform only after this returns `Ok`.
    pub async fn accept(&self, event: InboundEvent) -> Result<AcceptOutcome, AcceptError> {
        let outcome = self.inbox.accept(event).await?;
        self.health.progress();
        Ok(outcome)
    }

    /// Store a batch of events durably, in order. Acknowledge the platform only after this
    /// returns `Ok`.
    pub async fn accept_all(&self, events: Vec<InboundEvent>) -> Result<Vec<AcceptOutcome>, AcceptError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let outcomes = self.inbox.accept_all(events).await?;
        self.health.progress();
        Ok(outcomes)
    }

    /// The conversations, for surfaces that let their clients open, read and close them.
    pub fn sessions(&self) -> &Arc<dyn SessionDirectory> {
        &self.sessions
    }
}
