//! `hermes-matrix`: the Matrix adapter, on matrix-sdk with its SQLite state and crypto stores
//! (end-to-end encrypted rooms work like any other).
//!
//! * [`adapter`]: the [`hermes_adapter::PlatformAdapter`] implementation — sending (the
//!   idempotency key as the transaction id), HTML from the Markdown, threads, approval prompts
//!   with reactions, files, paced edits, typing.
//! * [`sync`](crate::sync): the sync loop: our own `next_batch` token, saved only after the
//!   inbox took every event; invites; health; backoff.
//! * [`inbound`](crate::inbound): timeline events → events (DMs, rooms with mention gating,
//!   threads, replies fenced as untrusted, `!` commands, hostile content read as plain text).
//! * [`login`](crate::login): the client, its stores, password or token login kept as one
//!   device, cross-signing, key-backup recovery.
//! * [`reactions`](crate::reactions): buttons as reaction keys, prompts remembered across restarts.
//! * [`undecryptable`](crate::undecryptable): messages the bot cannot decrypt, reported once and
//!   answered when their key arrives.
//! * [`gaps`](crate::gaps): the events a limited sync left out, fetched with `/messages`.
//! * [`media`](crate::media): inbound attachments into the media cache, for allowed senders only,
//!   within the gateway's limits, streamed under a byte cap.
//! * [`voice`](crate::voice): the waveform a voice note the bot sends is shown with.
//! * [`state`](crate::state): the files of the private state folder.
//! * [`position`](crate::position): the sync token, fenced through the gateway when replicas
//!   share a store.
//! * [`errors`](crate::errors): matrix-sdk failures → what the gateway does next.
//! * [`config`]: the `platforms.matrix` block, its variables and the [`REGISTRATION`].
//! * [`allowlist`]: which allowlist entries can name a Matrix user (full mxids only).

pub mod adapter;
pub mod allowlist;
pub mod config;
pub(crate) mod errors;
pub(crate) mod gaps;
pub(crate) mod inbound;
pub(crate) mod login;
pub(crate) mod lookup;
pub(crate) mod media;
pub(crate) mod position;
mod probe;
pub(crate) mod reactions;
pub mod settings;
pub(crate) mod state;
pub(crate) mod sync;
pub(crate) mod undecryptable;
pub(crate) mod voice;

pub use adapter::MatrixAdapter;
pub use config::{MatrixConfig, REGISTRATION};
pub use settings::{Login, MatrixSendBudget, MatrixSettings};
