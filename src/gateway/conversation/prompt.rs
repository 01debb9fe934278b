//! The session's system prompt: assembled on its first turn (instructions, memory, skills, the
//! platform's hints) and frozen in the store, so every later turn of the session sends the same
//! prompt and the provider's prompt cache keeps working. [`Prompts`] holds what assembling takes.

use crate::agent::memory::MemoryStore;
use crate::agent::prompt::{PromptInputs, assemble};
use crate::agent::tools::AgentPaths;
use crate::config::MemoryConfig;
use crate::store::{SessionLog, StoreError};
use hermes_adapter::SessionSource;
use std::sync::Arc;

/// What a session's system prompt is assembled from, and the session log it is frozen in.
pub(crate) struct Prompts {
    log: Arc<dyn SessionLog>,
    paths: Arc<AgentPaths>,
    memory: MemoryConfig,
    /// Each user of a shared gateway has their own memory profile.
    per_user_profiles: bool,
    /// `agent.system_prompt`: the operator's instructions.
    operator_prompt: Option<String>,
    /// The platforms `send_message` can reach, named in the prompt.
    chat_platforms: Vec<String>,
}

impl Prompts {
    pub(crate) fn new(
        log: Arc<dyn SessionLog>,
        paths: Arc<AgentPaths>,
        memory: MemoryConfig,
        per_user_profiles: bool,
        operator_prompt: Option<String>,
        chat_platforms: Vec<String>,
    ) -> Self {
        Self { log, paths, memory, per_user_profiles, operator_prompt, chat_platforms }
    }

    /// The session's frozen system prompt: built and stored on the session's first turn, read
    /// back on every later one.
    pub(crate) async fn frozen(&self, session_id: &str, source: &SessionSource, toolsets: &[String]) -> Result<String, StoreError> {
        if let Some(stored) = self.log.session_prompt(session_id).await? {
            return Ok(stored);
        }
        self.freeze(session_id, source, toolsets).await
    }

    /// A scheduled run's system prompt: built for that one run, without memory (cron runs
    /// neither read nor write it).
    pub(crate) fn scheduled(&self, source: &SessionSource, toolsets: &[String]) -> String {
        assemble(&PromptInputs {
            paths: &self.paths,
            operator_prompt: self.operator_prompt.as_deref(),
            source,
            memory: None,
            toolsets,
            connected_platforms: &self.chat_platforms,
        })
    }

    /// Build the session's system prompt and store it, unless another turn stored one first
    /// (then that one is returned).
    pub(crate) async fn freeze(&self, session_id: &str, source: &SessionSource, toolsets: &[String]) -> Result<String, StoreError> {
        let memory = self.memory.enabled.then(|| {
            MemoryStore::new(&self.paths.memories, self.memory.memory_char_limit, self.memory.user_char_limit).for_session(
                self.per_user_profiles,
                source.platform.as_str(),
                source.user_id.as_deref(),
            )
        });
        let built = assemble(&PromptInputs {
            paths: &self.paths,
            operator_prompt: self.operator_prompt.as_deref(),
            source,
            memory: memory.as_ref(),
            toolsets,
            connected_platforms: &self.chat_platforms,
        });
        self.log.session_prompt_freeze(session_id, &built).await
    }
}
