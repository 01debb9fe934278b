//! `hermes-slack`: the Slack adapter, on slack-morphism's Web API client and event models, with
//! Socket Mode driven over tokio-tungstenite.
//!
//! * [`adapter`]: the [`hermes_adapter::PlatformAdapter`] implementation — sending (the
//!   idempotency key in message metadata), editing at a pace Slack tolerates, buttons, files.
//! * [`socket`]: the Socket Mode connection: envelopes acknowledged after the inbox, in order,
//!   once; pings, `disconnect` and dead sockets answered with a new socket; health.
//! * [`inbound`]: messages, slash commands and button presses → events (DMs, channels,
//!   threads, mention gating, `!` commands, Slack markup read back).
//! * [`media`]: users' shared files declared and (for allowed senders) downloaded with the bot
//!   token from Slack's file host only, through [`download`]'s streaming GET.
//! * [`web`]: the Web API client, its TLS setup and timeouts, and the lost-answer lookup.
//! * [`blocks`]: buttons as Block Kit.
//! * [`errors`]: Slack failures → what the gateway does next.
//! * [`config`]: the `platforms.slack` block, its variables and the [`REGISTRATION`].
//! * [`allowlist`]: which allowlist entries can name a Slack user (member ids only).

pub mod adapter;
pub mod allowlist;
pub(crate) mod blocks;
pub mod config;
pub(crate) mod download;
pub mod errors;
pub(crate) mod inbound;
pub(crate) mod media;
mod probe;
pub mod settings;
pub(crate) mod socket;
pub(crate) mod web;

pub use adapter::SlackAdapter;
pub use config::{REGISTRATION, SlackConfig};
pub use settings::{SlackSendBudget, SlackSettings};
pub use web::SlackError;
