//! `hermes-adapter`: the contract between a chat platform and the hermes gateway.
//!
//! An adapter crate depends on this crate and on its own platform client only. It turns platform
//! updates into [`InboundEvent`]s (handed to the gateway through [`AdapterContext::accept`]) and
//! carries [`OutboundMessage`]s back. Everything the core needs to know about a platform is in its
//! [`Capabilities`]; the core never branches on a platform's name.
//!
//! Modules:
//! - [`source`]: where a message came from ([`SessionSource`], [`Platform`], [`ChatType`]).
//! - [`inbound`]: the normalized inbound event and the accept outcome.
//! - [`outbound`]: targets, outbound messages, receipts, send errors, stream events.
//! - [`pacing`]: token buckets and 429 blocks that keep sends under a platform's limits.
//! - [`capabilities`]: what a platform can do (limits, edits, buttons, markdown dialect).
//! - [`credential`]: which account an adapter connects as (one gateway per credential).
//! - [`context`]: what the gateway hands an adapter while it runs (inbox, health, sender policy,
//!   cursors, shutdown).
//! - [`cursors`]: how far a connection has read, recorded under the connection's lease so a
//!   replica that lost it can move no cursor.
//! - [`error`]: how a `run` ends (retry or park).
//! - [`render`] and [`chunk`]: pure functions that render the agent's Markdown into a platform's
//!   dialect and split it into messages that fit, losing nothing.
//! - [`media`]: `MEDIA:<path>` tags in answers, and the files they become.
//! - [`untrusted`]: marks for text from outside (payloads, quoted messages) inside an event.
//! - [`media_cache`]: the private, bounded folder inbound attachments are saved in.
//! - [`registration`]: what the gateway knows of an adapter before it exists (its config block,
//!   environment variables, documentation, how to build it); each adapter crate exports one.
//! - [`secret`] and [`values`]: the value types of configuration blocks ([`Secret`], which never
//!   prints; lenient lists and ids; the free-form [`Extra`] map).
//!
//! # Adding an adapter
//!
//! One crate under `adapters/` plus one registration line in the gateway:
//! 1. Implement [`PlatformAdapter`]: `run` turns platform updates into [`InboundEvent`]s and hands
//!    each to [`AdapterContext::accept`] *before* acknowledging the platform (the gateway's inbox
//!    is durable; an event it has not stored must be redelivered); `send` delivers one
//!    [`OutboundMessage`] and says whether a failure is worth retrying ([`SendError`]); a
//!    platform that can look a sent message up implements `find_sent`, so an attempt cut off
//!    mid-send is not blindly repeated.
//! 2. Describe the platform in [`Capabilities`] (limits, dialect, edits, buttons) and in the
//!    [`Registration`]'s [`PlatformFacts`] (who its users are, its home-channel and pairing
//!    facts, its environment variables): the core reads these, never the platform's name.
//! 3. Export a `REGISTRATION` and add it, behind a cargo feature of its own, to the gateway's
//!    registry (`hermes::registry::Registry::builtin`); add the platform to the conformance
//!    suite (`tests/conformance/`) with a fake written from the platform's published API.

// This crate is the contract adapter authors write against, so every public item says what it
// is for. The lint lives here rather than in `[lints]` because a member using
// `[lints] workspace = true` cannot add lints of its own, and copying the whole workspace table
// into this Cargo.toml would let the two drift apart.
#![warn(missing_docs)]

pub mod attachment;
pub mod capabilities;
pub mod chunk;
pub mod context;
pub mod credential;
pub mod cursors;
pub mod error;
pub mod inbound;
pub mod media;
pub mod media_cache;
pub mod outbound;
pub mod pacing;
pub mod registration;
pub mod render;
pub mod secret;
pub mod source;
pub mod untrusted;
pub mod values;

pub use attachment::{Attachment, CappedWriter, MediaLimits, Refusal, SaveError, save_capped};
pub use capabilities::{Capabilities, LengthUnit, MarkdownDialect, StreamStyle};
pub use context::{
    AcceptError, AdapterContext, HealthReporter, InboundSink, SenderPolicy, SessionDirectory, SessionDirectoryError, StoredMessage,
};
pub use credential::CredentialId;
pub use cursors::{CursorError, CursorStore, CursorWrite, Cursors, MemoryCursors};
pub use error::AdapterError;
pub use inbound::{AcceptOutcome, ContextMessage, InboundEvent, MessageKind};
pub use media::{FileKind, OutboundFile};
pub use media_cache::{CacheLimits, MediaCache};
pub use outbound::{Button, ChatTarget, ChatTargetError, Lookup, OutboundMessage, SendError, SendReceipt, StreamEvent, Usage};
pub use registration::{
    AdapterConfig, BuildContext, BuildError, EnvKind, EnvValueError, EnvVar, ErasedConfig, HomeVars, PairingOffer, PlatformFacts,
    Registration, SettingError,
};
pub use secret::Secret;
pub use source::{ChatType, Platform, SessionSource};
pub use values::Extra;

use async_trait::async_trait;

/// One chat platform. The supervisor calls [`PlatformAdapter::run`] in its own task and restarts
/// it with backoff when it returns a retryable error; the gateway calls the send side from
/// session actors concurrently.
#[async_trait]
pub trait PlatformAdapter: Send + Sync + 'static {
    /// The platform this adapter speaks for; it names the sessions it creates and picks the
    /// adapter when the gateway delivers to a [`ChatTarget`].
    fn platform(&self) -> &Platform;
    /// What the platform can do; the core renders, splits and streams by these instead of
    /// branching on the platform's name.
    fn capabilities(&self) -> &Capabilities;

    /// Connect and receive until the connection ends or `ctx.shutdown` fires. Every update goes
    /// through `ctx.accept` before the platform is acknowledged. `Ok(())` means a clean stop.
    async fn run(&self, ctx: AdapterContext) -> Result<(), AdapterError>;

    /// Send one already rendered and chunked message.
    async fn send(&self, msg: &OutboundMessage) -> Result<SendReceipt, SendError>;

    /// A send of `msg` was cut off between its request and its answer (the gateway restarted, or
    /// the answer was lost) `since` ago: does the platform hold it? The gateway resends a part the
    /// platform does not hold, or whose resend it deduplicates, as it is; one it cannot tell
    /// about, once, marked as a possible repeat. The default cannot tell.
    async fn find_sent(&self, _msg: &OutboundMessage, _since: std::time::Duration) -> Result<Lookup, SendError> {
        Ok(Lookup::CannotTell)
    }

    /// Replace the text of a message this adapter sent earlier (edit-in-place streaming).
    async fn edit(&self, _target: &ChatTarget, _message_id: &str, _text: &str) -> Result<(), SendError> {
        Err(SendError::Unsupported("edit"))
    }

    /// How long the connection may go without progress (see [`HealthReporter::progress`]) before
    /// the supervisor reports it degraded; after twice this long it is torn down and rebuilt.
    /// `None` for listeners that are idle whenever their clients are.
    fn liveness_timeout(&self) -> Option<std::time::Duration> {
        None
    }

    /// The account this adapter connects as, when two gateways on one machine must not share it
    /// (a bot token, an account login). The supervisor holds a machine-wide lock on it while the
    /// adapter runs; `None` for listeners, whose port already admits only one.
    fn credential(&self) -> Option<CredentialId> {
        None
    }

    /// Whether a replica that does not lead may run this adapter, beside the one that does, when
    /// several share the store: it only takes events in, answers its caller as soon as an event
    /// is stored (never waits for the turn on the same request), and holds no connection only
    /// one process may (no [`credential`](Self::credential)). Such a replica stores what it
    /// accepts and the leading replica runs the turns. A signed webhook listener qualifies; the
    /// API server, which answers on the request, does not (see
    /// [`answers_on_the_request`](Self::answers_on_the_request)). `false` unless an adapter says
    /// so.
    fn takes_events_on_any_replica(&self) -> bool {
        false
    }

    /// For an adapter whose answers go back on the request that brought the event, held open by
    /// the process that accepted it (the API server): how long a request waits for its answer,
    /// after which no part is worth delivering. With a store shared by replicas, every replica
    /// runs such an adapter behind a load balancer; an event's turn runs in the replica that
    /// accepted it, and its parts are delivered only where their request waits
    /// ([`delivers_here`](Self::delivers_here)). Such an adapter holds no connection only one
    /// process may (no [`credential`](Self::credential)). `None` unless an adapter says so.
    fn answers_on_the_request(&self) -> Option<std::time::Duration> {
        None
    }

    /// Whether this process can deliver `message`: for an adapter that
    /// [answers on the request](Self::answers_on_the_request), whether the request it answers
    /// waits here. `true` unless an adapter says otherwise.
    fn delivers_here(&self, _message: &OutboundMessage) -> bool {
        true
    }

    /// Who this adapter is on its platform, asked of the platform with the configured
    /// credentials and endpoint (Telegram's `getMe`, Slack's `auth.test`, an IMAP login…) without
    /// receiving or sending a message: `hermes doctor` runs it. `Ok(None)` when there is nothing
    /// to ask (a listener waits for its clients). A rejected credential is
    /// [`AdapterError::Fatal`] whose message names the setting to fix; an unreachable endpoint is
    /// [`AdapterError::Retryable`].
    async fn probe(&self) -> Result<Option<String>, AdapterError> {
        Ok(None)
    }

    /// Show "typing…" in the chat.
    async fn typing(&self, _target: &ChatTarget) -> Result<(), SendError> {
        Ok(())
    }

    /// Deliver one incremental stream event, for adapters whose [`Capabilities::streaming`] is
    /// [`StreamStyle::Events`] (an HTTP client reading SSE, for instance).
    async fn stream(&self, _target: &ChatTarget, _reply_to: Option<&str>, _event: &StreamEvent) -> Result<(), SendError> {
        Err(SendError::Unsupported("stream"))
    }
}
