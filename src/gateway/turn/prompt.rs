//! The session's system prompt: assembled on its first turn (instructions, memory, skills, the
//! platform's hints) and frozen in the store, so every later turn of the session sends the same
//! prompt and the provider's prompt cache keeps working.

use crate::agent::memory::MemoryStore;
use crate::agent::prompt::{PromptInputs, assemble};
use crate::gateway::services::Services;

/// The session's frozen system prompt: built and stored on the session's first turn, read back
/// on every later one.
pub async fn frozen_prompt(
    services: &Services,
    session_id: &str,
    source: &hermes_adapter::SessionSource,
    toolsets: &[String],
) -> Result<String, crate::store::StoreError> {
    if let Some(stored) = services.store.session_prompt(session_id).await? {
        return Ok(stored);
    }
    freeze_prompt(services, session_id, source, toolsets).await
}

/// Build the session's system prompt and store it, unless another turn stored one first (then
/// that one is returned).
pub(super) async fn freeze_prompt(
    services: &Services,
    session_id: &str,
    source: &hermes_adapter::SessionSource,
    toolsets: &[String],
) -> Result<String, crate::store::StoreError> {
    let memory = services.config.memory.enabled.then(|| {
        let limits = &services.config.memory;
        MemoryStore::new(&services.paths.memories, limits.memory_char_limit, limits.user_char_limit).for_session(
            services.tool_settings.per_user_profiles,
            source.platform.as_str(),
            source.user_id.as_deref(),
        )
    });
    let connected: Vec<String> =
        services.adapters.iter().filter(|(_, a)| a.capabilities().supports_async_delivery).map(|(n, _)| n.clone()).collect();
    let built = assemble(&PromptInputs {
        paths: &services.paths,
        operator_prompt: services.config.agent.system_prompt.as_deref(),
        source,
        memory: memory.as_ref(),
        toolsets,
        connected_platforms: &connected,
    });
    services.store.session_prompt_freeze(session_id, &built).await
}
