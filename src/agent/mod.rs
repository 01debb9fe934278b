//! The agent core: given a [`TurnRequest`] it runs the model (and, from the next issue on, its
//! tools) and emits [`TurnEvent`]s. It knows no gateway, no adapter and no SQL: the caller hands it
//! the conversation and persists what comes back.

pub mod approval;
pub mod compress;
pub mod fence;
pub mod memory;
pub mod message;
pub mod prompt;
pub mod providers;
pub mod run_loop;
pub mod safety;
pub mod sandbox;
pub mod skills;
pub mod tool_protocol;
pub mod tools;

#[cfg(test)]
mod tests;

pub use message::{ChatMessage, Role, ToolCallRequest};
pub use providers::{ChatProvider, ModelSpec, ProviderError};
pub use run_loop::{Agent, SteeringInbox, TurnEvent, TurnOutcome, TurnRequest, TurnTools, is_silence};
