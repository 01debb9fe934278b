//! Configuration of the agent core beyond the model itself: fallback models, context
//! compression and its auxiliary model, the terminal tool, memory budgets, per-platform toolsets,
//! and prices for cost accounting.

use super::secret::{self, Secret};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One entry of `fallback_providers`: used, in order, when the model before it fails with an
/// auth error, a rate limit or an outage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FallbackProvider {
    pub provider: Option<String>,
    pub model: String,
    /// Defaults to the primary model's base URL.
    pub base_url: Option<String>,
    #[serde(deserialize_with = "secret::optional")]
    pub api_key: Option<Secret>,
    /// Name of an environment variable holding the key (read at start-up).
    pub api_key_env: Option<String>,
}

/// `compression.*`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompressionConfig {
    pub enabled: bool,
    /// Fraction of the context window at which the middle of the conversation is summarized.
    pub threshold: f64,
    /// Size of the summary relative to what it replaces.
    pub target_ratio: f64,
    pub protect_first_n: usize,
    pub protect_last_n: usize,
    /// A stored transcript this long is compressed before the next turn whatever its tokens.
    pub hygiene_hard_message_limit: usize,
}

impl Default for CompressionConfig {
    fn default() -> Self {
        Self { enabled: true, threshold: 0.5, target_ratio: 0.2, protect_first_n: 3, protect_last_n: 20, hygiene_hard_message_limit: 5000 }
    }
}

/// A model used for side jobs (`auxiliary.compression`); unset fields fall back to `model.*`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuxiliaryModel {
    pub model: Option<String>,
    pub provider: Option<String>,
    pub base_url: Option<String>,
    #[serde(deserialize_with = "secret::optional")]
    pub api_key: Option<Secret>,
}

/// `auxiliary.*`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuxiliaryConfig {
    pub compression: AuxiliaryModel,
    /// Judges flagged commands in `approvals.mode: smart`.
    pub approval: AuxiliaryModel,
    /// Looks at images for a model that cannot (`vision_analyze`).
    pub vision: AuxiliaryModel,
}

/// `terminal.*`: the local terminal tool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TerminalConfig {
    /// Working directory; defaults to `HERMES_HOME/workspace`.
    pub cwd: Option<String>,
    /// Seconds a command may run.
    pub timeout: u64,
    /// Characters of output returned to the model.
    pub output_cap: usize,
    /// The OS sandbox every command runs in (Landlock).
    pub sandbox: SandboxSetting,
}

impl Default for TerminalConfig {
    fn default() -> Self {
        Self { cwd: None, timeout: 180, output_cap: 50_000, sandbox: SandboxSetting::WorkspaceWrite }
    }
}

/// `terminal.sandbox`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxSetting {
    /// Writes only in the workspace and a private temp dir; HERMES_HOME unreadable.
    #[default]
    WorkspaceWrite,
    /// No writes at all (but /dev/null and friends).
    ReadOnly,
    /// No sandbox: commands can do whatever this user can.
    Off,
}

/// `memory.*`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryConfig {
    /// Show `MEMORY.md` / `USER.md` in the prompt and offer the memory tool.
    pub enabled: bool,
    pub memory_char_limit: usize,
    pub user_char_limit: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self { enabled: true, memory_char_limit: 2200, user_char_limit: 1375 }
    }
}

/// USD per million tokens (`model.pricing.<model>`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Cached prompt tokens read (defaults to `input`).
    pub cache_read: Option<f64>,
    /// Prompt tokens written to the cache (defaults to `input`).
    pub cache_write: Option<f64>,
}

impl Price {
    /// Cost of one call. `prompt` includes the cached and cache-written tokens.
    pub fn cost(&self, prompt: u64, completion: u64, cache_read: u64, cache_write: u64) -> f64 {
        let plain = prompt.saturating_sub(cache_read + cache_write) as f64;
        (plain * self.input
            + cache_read as f64 * self.cache_read.unwrap_or(self.input)
            + cache_write as f64 * self.cache_write.unwrap_or(self.input)
            + completion as f64 * self.output)
            / 1_000_000.0
    }
}

/// Toolsets per platform (`platform_toolsets.<platform>: [terminal, file, …]`); a platform not
/// listed gets every toolset not disabled in `agent.disabled_toolsets`.
pub type PlatformToolsets = BTreeMap<String, Vec<String>>;
