//! `hermes-api-server`: the OpenAI-compatible HTTP API (`/v1/chat/completions`, `/v1/models`)
//! and the sessions REST API (`/api/sessions…`) as a hermes platform adapter (`api_server`).
//!
//! The crate translates HTTP to [`hermes_adapter`] types and back, nothing else: a request
//! becomes an [`hermes_adapter::InboundEvent`] handed to the gateway's inbox; the gateway's
//! answer comes back through [`hermes_adapter::PlatformAdapter::stream`] and
//! [`hermes_adapter::PlatformAdapter::send`] and is written out as JSON or Server-Sent Events.
//!
//! Modules:
//! - `config`: the `platforms.api_server` block, its variables and checks, the [`REGISTRATION`].
//! - `settings`: settings and the refusal to serve an unauthenticated public API.
//! - `adapter`: the `PlatformAdapter` implementation.
//! - `server`: routes, the order of the guards, health and discovery, serving until shutdown.
//! - `guard`: what web pages may not do (foreign Host names, unlisted origins, bodies that are
//!   not JSON) and CORS for the listed origins.
//! - `auth`: the bearer key and the lockout of peers that keep failing it.
//! - `chat`: OpenAI Chat Completions in and out.
//! - `sessions`: the sessions REST API.
//! - `conversation`: which conversation a request belongs to, and its `SessionSource`.
//! - `turn`: submitting a turn to the inbox and waiting for its answer.
//! - `pending`: requests waiting for answers, and what of a final answer is still unsent.
//! - `sse`: writing a pending answer as an SSE stream.
//! - `json_body`, `error`: request parsing and OpenAI-shaped errors.

mod adapter;
mod auth;
mod chat;
mod config;
mod conversation;
mod error;
mod guard;
mod json_body;
mod pending;
mod server;
mod sessions;
mod settings;
mod sse;
mod turn;

pub use adapter::ApiServerAdapter;
pub use config::{ApiServerConfig, REGISTRATION};
pub use settings::{ApiServerError, ApiServerSettings};
