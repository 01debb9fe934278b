//! The agent core: given a [`TurnRequest`] it runs the model (and, from the next issue on, its
//! tools) and emits [`TurnEvent`]s. It knows no gateway, no adapter and no SQL: the caller hands it
//! the conversation and persists what comes back.

pub(crate) mod approval;
pub(crate) mod compress;
pub(crate) mod fence;
pub(crate) mod memory;
pub(crate) mod message;
pub(crate) mod prompt;
pub mod providers;
pub mod run_loop;
pub(crate) mod safety;
pub(crate) mod sandbox;
pub(crate) mod skills;
pub(crate) mod tool_protocol;
pub mod tools;

#[cfg(test)]
mod tests;

pub use message::{ChatMessage, ImagePart, Role, ToolCallRequest};
pub use providers::{ChatProvider, ModelSpec, ProviderError};
pub use run_loop::{Agent, SteeringInbox, TurnEvent, TurnOutcome, TurnRequest, TurnTools, is_silence};
