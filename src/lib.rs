//! hermes: a messaging gateway daemon that puts an LLM agent into the chat apps people already use.
//!
//! # Layers
//!
//! From the outside in (see `ARCHITECTURE.md` in the project's shared folder for the whole plan);
//! each layer imports only the ones below it:
//! - **Adapters** (crates under `adapters/`): one per platform, depending only on
//!   `hermes-adapter`, the contract (normalized events, capabilities, rendering and chunking).
//!   The core never branches on a platform's name; it reads [`hermes_adapter::Capabilities`]
//!   and the registration's [`hermes_adapter::PlatformFacts`].
//! - [`gateway`]: everything between the adapters and the agent, in wings (below).
//! - [`cron`]: jobs, schedules, the file-locked ticker and its run records; it reaches the
//!   gateway only through the [`cron::run::CronHost`] trait the gateway implements.
//! - [`agent`]: the model-calling loop ([`agent::run_loop`]), providers, tools, memory, skills,
//!   the prompt. It knows no gateway: the outward tools call a [`agent::tools::ToolHost`].
//! - [`media`]: speech to text, text to speech and image preparation, the engines the turn and
//!   delivery use for voice notes and pictures; it knows no gateway.
//! - [`store`]: sessions, messages with search, routing, inbox, outbox, usage and claims, as one
//!   trait per concern ([`store::Inbox`], [`store::Outbox`], …) with SQLite behind them. The
//!   only module that speaks SQL.
//! - [`config`] (the ground floor: it imports no domain module): `HERMES_HOME`, the typed
//!   `config.yaml`, `.env` and environment overrides. [`cli`]: one file per top-level command,
//!   the only place `main` reaches; [`observe`]: logging with secret redaction and metrics.
//!
//! # The gateway's wings
//!
//! Named by what happens to a message, top to bottom; a wing imports only wings below it:
//! - [`gateway::wiring`] builds every handle once, in an order without cycles; [`gateway::run`]
//!   starts the wings, waits for a signal and drains.
//! - [`gateway::session`]: the [`gateway::session::router`] starts one actor per session; the
//!   [`gateway::session::actor`] asks the pure [`gateway::session::decide::decide`] what an
//!   event means and carries out the [`gateway::session::decide::Action`] in one place.
//! - [`gateway::commands`]: slash commands, one file each; each takes only the handles it uses.
//! - [`gateway::cron`]: scheduled runs as agent turns, the ticker beside the adapters, owner
//!   checks.
//! - [`gateway::turn`]: one agent turn as a pipeline of steps; the session's running turn and
//!   queue ([`gateway::turn::queue`]), limits, approvals and clarify questions the turn waits on,
//!   the tool host; every failure a user is told about is a [`gateway::turn::error::TurnError`]
//!   that words its own reply.
//! - [`gateway::intake`]: the durable inbox, who may talk (by platform user id), pairing,
//!   session keys.
//! - [`gateway::conversation`]: the transcript and history cache, compaction, models and costs,
//!   message and prompt assembly.
//! - [`gateway::delivery`]: every message that leaves, through one door (below).
//! - [`gateway::ops`]: adapters built from their registrations and supervised, locks, health,
//!   the admin listener, the status file, systemd notifications, periodic chores.
//!
//! # The path of a message
//!
//! 1. An adapter's `run` turns a platform update into an [`hermes_adapter::InboundEvent`] and
//!    hands it to [`gateway::intake::inbox`] (`AdapterContext::accept`), which stores it durably
//!    and deduplicated *before* the adapter acknowledges the platform.
//! 2. [`gateway::session::router`] decides who may talk ([`gateway::intake::auth`]) and which
//!    session the event belongs to ([`gateway::intake::session_key`]), and hands it to that
//!    session's actor ([`gateway::session::actor`]): one event at a time per session.
//! 3. [`gateway::turn`] runs the turn as named steps, each taking only the handles it uses:
//!    admit (turn slot from [`gateway::turn::limits`], destination from
//!    [`gateway::delivery::deliverer`]) → prepare (store the message, history, frozen prompt
//!    and compaction from [`gateway::conversation::sessions`], the model from
//!    [`gateway::conversation::models`], the tool filter from [`gateway::turn::tool_access`]) →
//!    run the agent ([`agent::Agent`], tools from [`agent::tools`]) → settle (store the answer,
//!    deliver it through the output strategy the platform's capabilities choose) → close the
//!    inbox row.
//! 4. [`gateway::delivery::deliverer::Deliverer::send`] takes the answer as a
//!    [`gateway::delivery::reply::Reply`] under its [`gateway::delivery::reply::ReplyKey`]:
//!    [`gateway::delivery::plan::plan`] renders it into the platform's markup and chunks it into
//!    keyed parts (pure, no I/O), and the [`gateway::delivery::courier::Courier`] records each
//!    part in the outbox and delivers it per chat, through outages and restarts.
//!
//! # Where to add
//!
//! - An adapter: one crate plus one registration (see the `hermes-adapter` crate docs). The
//!   crate under `adapters/` implements [`hermes_adapter::PlatformAdapter`] and exports a
//!   [`hermes_adapter::Registration`] (its typed config block, environment variables,
//!   platform facts, documented example, build function); the line that adds it to
//!   [`registry::Registry::builtin`] sits behind a cargo feature of its own. Run
//!   `HERMES_BLESS=1 cargo test --lib generated_examples` to regenerate the example config and
//!   `.env.example`.
//! - A slash command: one file in `src/gateway/commands/` taking only the handles it uses, and
//!   its line in [`gateway::commands::registry`].
//! - A tool: one file in `src/agent/tools/` and its line in [`agent::tools::builtin`]; a tool
//!   that reaches outside the agent (a chat, the scheduler) goes through
//!   [`agent::tools::ToolHost`], implemented in [`gateway::turn::tool_host`].
//! - A kind of reply: a [`gateway::delivery::reply::ReplyKey`] variant (its rendered form is
//!   stored in the outbox and pinned by a test: never change an existing one) sent through
//!   [`gateway::delivery::deliverer::Deliverer::send`].
//! - A store concern: a trait in `src/store/backend/`, implemented by every backend and tested
//!   once for all of them by the store's shared suite; holders take that trait, not the store.

// `pub` is for what another crate (the binary, `tests/`, `benches/`) uses; everything else is
// `pub(crate)`, and this lint keeps it so.
#![warn(unreachable_pub)]

pub mod agent;
pub mod cli;
pub mod config;
pub mod cron;
pub(crate) mod fs_atomic;
pub mod gateway;
pub mod mcp;
pub mod media;
pub(crate) mod observe;
pub mod registry;
pub mod store;
pub(crate) mod tls;
