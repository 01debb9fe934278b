//! Protocol-faithful fake servers for hermes tests and benchmarks.
//!
//! * [`FakeLlm`]: a scripted OpenAI-compatible Chat Completions server
//!   (JSON and SSE streaming, tool calls, errors, hangs, delays), with OpenAI's
//!   audio transcription and speech routes.
//! * [`Receiver`]: a webhook callback sink that records every POST and can
//!   inject failures.
//!
//! * [`telegram`]: the Telegram Bot API (long polling, sends, edits, files) with a control API
//!   and fault knobs.
//! * [`inbox`]: a recording inbox and an empty session directory for running one adapter alone.
//! * [`discord`]: Discord's REST API and gateway WebSocket (sessions, resume, heartbeats) with a
//!   control API and fault knobs.
//! * [`slack`]: Slack's Web API and Socket Mode WebSocket (tickets, envelopes, acks and retries,
//!   disconnects) with a control API, fault knobs, and how Slack displays mrkdwn.
//!
//! * [`limits`]: published rate limits a fake enforces with 429s (buckets or sliding windows).
//! * [`proxy`]: an HTTP proxy in front of a real server (Synapse) that refuses chosen requests,
//!   replays a recorded answer and cuts every connection on demand.
//! * [`smtp_proxy`]: a relay in front of a real SMTP server (Postfix) that answers for it with a
//!   chosen refusal of every recipient (a 4xx to try again later, a 5xx for good).
//! * [`stall_proxy`]: a TCP relay in front of a real server (Dovecot) that, on demand, stops
//!   answering without closing anything (a peer that went silent).
//! * [`media`]: real test media: espeak-ng voice notes (OGG/Opus), PNG and JPEG pictures, and a
//!   voice note's length as `opusinfo` reports it.
//! * [`synapse`]: the real Synapse of `tests/peers/run.sh` — its address, unique account names
//!   and shared-secret registration.
//!
//! All listen on real HTTP on `127.0.0.1`, so the code under test exercises
//! its actual HTTP client stack rather than a mock trait.

pub mod discord;
mod faults;
pub mod inbox;
pub mod limits;
mod llm;
pub mod media;
pub mod proxy;
mod receiver;
mod serve;
mod shared;
pub mod slack;
pub mod smtp_proxy;
pub mod stall_proxy;
pub mod synapse;
pub mod telegram;

pub use llm::{DEFAULT_TRANSCRIPT, FakeLlm, LlmConfig, RecordedRequest, RecordedSpeech, RecordedTranscription, Reply, ToolCall};
pub use receiver::{Received, Receiver};
