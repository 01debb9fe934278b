//! Full-process tests: the built `hermes` binary with a temporary HERMES_HOME, talking to the
//! scripted fake LLM of `hermes-fakes` and to real HTTP clients on loopback. `external_adapter`
//! runs the gateway in-process instead, with an adapter registered by the test crate itself.

// Test helpers unwrap: a failed set-up step should fail the test on the spot (clippy.toml's
// allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

mod agent;
mod api_server;
mod commands;
mod config;
mod crash;
mod doctor;
mod external_adapter;
mod hermes_compat;
mod mcp_hostile;
mod mcp_lifecycle;
mod mcp_ops;
mod mcp_tools;
mod notify;
mod openai_python;
mod platform;
#[cfg(feature = "postgres")]
mod postgres;
mod real_model;
mod sandbox;
mod service;
mod support;
mod webhook;
