//! hermes: a messaging gateway daemon that puts an LLM agent into the chat apps people already use.
//!
//! Map of the crate (see `ARCHITECTURE.md` in the project's shared folder for the whole plan):
//! - [`cli`]: one file per top-level command (`gateway`, `config`, `doctor`, `version`).
//! - [`config`]: `HERMES_HOME`, typed `config.yaml`, `.env` and environment overrides.
//! - [`store`]: sessions, messages with search, routing, inbox, outbox, usage and claims, as
//!   traits with SQLite behind them. The only module that speaks SQL.
//! - [`gateway`]: supervisor, inbox, router, session actors, commands, outbound delivery.
//! - [`agent`]: the turn loop, providers, tools, prompt assembly.
//! - [`observe`]: logging with secret redaction.
//!
//! Platform adapters live in their own crates under `adapters/` and depend only on
//! `hermes-adapter`.

pub mod agent;
pub mod cli;
pub mod config;
pub mod fs_atomic;
pub mod gateway;
pub mod observe;
pub mod store;
