//! `hermes-telegram`: the Telegram adapter, on teloxide's typed Bot API client.
//!
//! * [`adapter`]: the [`hermes_adapter::PlatformAdapter`] implementation — sending, editing,
//!   typing, buttons — with the send budget and inline handling of short flood waits.
//! * [`poll`]: long polling whose offset advances only after the gateway's inbox accepted the
//!   updates; conflicts and stalls are survived.
//! * [`webhook`]: webhook mode — Telegram POSTs updates to any replica; stored like polled ones.
//! * [`inbound`]: updates → events (DMs, groups, forum topics, mention gating, button presses).
//! * [`budget`]: Telegram's flood limits kept on our side.
//! * [`media`]: inbound voice notes, audio, photos, videos and documents checked against the
//!   gateway's limits and saved to the cache.
//! * `files`: outbound photos, documents and voice notes (with a fallback for chats that refuse
//!   voice messages).
//! * [`errors`]: Telegram failures → what the gateway does next.
//! * [`config`]: the `platforms.telegram` block, its variables and the [`REGISTRATION`].
//! * [`allowlist`]: which allowlist entries can name a Telegram user (ids and usernames).
//!
//! Answers arrive already rendered to Telegram HTML and split by the gateway
//! ([`hermes_adapter::render::telegram_html`], [`hermes_adapter::chunk`]).

pub mod adapter;
pub mod allowlist;
pub mod budget;
pub mod config;
pub mod errors;
mod files;
pub mod inbound;
pub mod media;
pub mod poll;
mod probe;
pub mod settings;
pub mod webhook;

pub use adapter::{TelegramAdapter, TelegramError};
pub use config::{REGISTRATION, TelegramConfig};
pub use settings::{Mode, SendBudget, TelegramSettings, WebhookSettings};
