//! `hermes-discord`: the Discord adapter, on serenity's gateway client and REST client.
//!
//! * [`adapter`]: the [`hermes_adapter::PlatformAdapter`] implementation — sending (with a nonce
//!   Discord deduplicates on), editing, typing, buttons.
//! * [`gateway`]: the gateway connection: events taken in order, health from the shard's state,
//!   a connection that stays down rebuilt.
//! * [`commands`]: the command registry as native slash commands, answered in place.
//! * [`backfill`]: messages written while the bot had no session, read back after READY.
//! * [`inbound`]: messages and button presses → events (DMs, guild channels, threads, mention
//!   gating).
//! * [`media`]: users' attachments declared and (for allowed senders) downloaded; voice messages
//!   sent.
//! * [`errors`]: Discord failures → what the gateway does next.
//! * [`config`]: the `platforms.discord` block, its variables and the [`REGISTRATION`].
//! * [`allowlist`]: which allowlist entries can name a Discord user (ids only).

pub mod adapter;
pub mod allowlist;
pub(crate) mod backfill;
pub(crate) mod commands;
pub mod config;
pub mod errors;
pub mod gateway;
pub mod inbound;
pub(crate) mod media;
mod probe;
pub mod settings;
pub(crate) mod voice;

pub use adapter::{DiscordAdapter, DiscordError};
pub use config::{DiscordConfig, REGISTRATION};
pub use settings::{DiscordSendBudget, DiscordSettings};
