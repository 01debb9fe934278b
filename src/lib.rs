//! hermes: a messaging gateway daemon that puts an LLM agent into the chat apps people already use.
//!
//! # Layers
//!
//! From the outside in (see `ARCHITECTURE.md` in the project's shared folder for the whole plan):
//! - **Adapters** (crates under `adapters/`): one per platform, depending only on
//!   `hermes-adapter`, the contract (normalized events, capabilities, rendering and chunking).
//!   The core never branches on a platform's name; it reads [`hermes_adapter::Capabilities`].
//! - [`gateway`]: supervision, the durable inbox, who may talk ([`gateway::intake::auth`]), sessions,
//!   slash commands, the turn pipeline and outbound delivery.
//! - [`agent`]: the model-calling loop, providers, tools, memory, skills, the prompt.
//! - [`store`]: sessions, messages with search, routing, inbox, outbox, usage and claims, as
//!   traits with SQLite behind them. The only module that speaks SQL.
//! - [`config`]: `HERMES_HOME`, the typed `config.yaml`, `.env` and environment overrides;
//!   [`cli`]: one file per top-level command; [`observe`]: logging with secret redaction.
//!
//! # The path of a message
//!
//! 1. An adapter's `run` turns a platform update into an [`hermes_adapter::InboundEvent`] and
//!    hands it to [`gateway::intake::inbox`] (`AdapterContext::accept`), which stores it durably and
//!    deduplicated *before* the adapter acknowledges the platform.
//! 2. [`gateway::session::router`] decides who may talk ([`gateway::intake::auth`]) and which session the event
//!    belongs to ([`gateway::intake::session_key`]), and hands it to that session's actor
//!    ([`gateway::session::actor`]): one at a time per session, commands ([`gateway::commands`]) first.
//! 3. [`gateway::turn`] runs the turn as named steps, each taking only the handles it uses:
//!    admit (turn slot from [`gateway::turn::limits`], destination from
//!    [`gateway::delivery::deliverer`]) → prepare (store the message, history, frozen prompt and
//!    compaction from [`gateway::conversation::sessions`], the model from [`gateway::conversation::models`], the tool filter
//!    from [`gateway::turn::tool_access`]) → run the agent ([`agent::Agent`], tools from
//!    [`agent::tools`]) → settle (store the answer, deliver it through the output strategy the
//!    platform's capabilities choose) → close the inbox row.
//! 4. [`gateway::delivery::deliverer::Deliverer::send`] takes the answer as a
//!    [`gateway::delivery::reply::Reply`] under its [`gateway::delivery::reply::ReplyKey`]:
//!    [`gateway::delivery::plan::plan`] renders it into the platform's markup and chunks it into
//!    keyed parts, and the [`gateway::delivery::courier::Courier`] records each part in the outbox
//!    and sends it through the platform's adapter.
//!
//! # The gateway's handles
//!
//! [`gateway::wiring`] builds each handle once at start-up, in an order without cycles, and hands
//! out only what each part uses; nothing holds a back-pointer to the whole.
//! - [`gateway::conversation::models::Models`]: the configured model, the `/model --global` choice, fallbacks,
//!   the compression model, context window and prices.
//! - [`gateway::delivery::deliverer::Deliverer`]: the adapters by platform, the outbox, the folders files
//!   may be attached from.
//! - [`gateway::conversation::sessions::Sessions`]: the store, the recent-history cache, frozen prompts and
//!   compaction.
//! - [`gateway::turn::tool_access::ToolAccess`]: tool filters per platform, the agent's folders and
//!   limits, the approval policy and the [`gateway::turn::tool_host`] the outward tools call.
//! - [`gateway::turn::limits::TurnLimits`]: turn slots, the drain abort and count, background
//!   slots.
//! - Bundles of these for those that need several: `turn::TurnHandles` (a whole turn),
//!   `commands::CommandHandles` (slash commands), `actor::ActorHandles` (session actors).
//!
//! # Where to add
//!
//! - An adapter: one crate plus one registration. The crate under `adapters/` implements
//!   [`hermes_adapter::PlatformAdapter`] and exports a [`hermes_adapter::Registration`] (its
//!   typed config block, environment variables, documented example, build function); the line
//!   that adds it to [`registry::Registry::builtin`] sits behind a cargo feature of its own. Run
//!   `HERMES_BLESS=1 cargo test --lib generated_examples` to regenerate the example config and
//!   `.env.example`.
//! - A slash command: one file in `src/gateway/commands/` and its line in `commands::registry`.
//! - A tool: one file in `src/agent/tools/` and its line in `tools::builtin`.

pub mod agent;
pub mod cli;
pub mod config;
pub mod cron;
pub mod fs_atomic;
pub mod gateway;
pub mod observe;
pub mod registry;
pub mod store;
