//! Configuration of the gateway: where the Hermes home is ([`Home`]), the environment snapshot
//! ([`Env`], `.env` + process), the typed `config.yaml` ([`Config`]) with Hermes' key names and
//! defaults, environment overrides, validation, and secret masking ([`Secret`]).
//!
//! Start-up sequence:
//! ```no_run
//! use hermes::config::{self, ConfigError, Env, Home, Loaded};
//!
//! fn start(explicit_home: Option<std::path::PathBuf>, profile: Option<&str>) -> Result<(), ConfigError> {
//!     let process = Env::from_process();
//!     let home = Home::resolve(explicit_home, profile, &process)?;
//!     let env = Env::layered(&home.env_file(), process)?;
//!     let Loaded { config, warnings } = config::load(&home, &env)?;
//!     # let _ = (config, warnings);
//!     Ok(())
//! }
//! ```

mod agent_sections;
pub(crate) mod audit;
mod auth;
mod de;
mod display;
mod env;
mod error;
#[cfg(test)]
pub(crate) mod examples;
mod extra;
mod gateway;
mod home;
mod load;
mod mcp;
mod mcp_serve;
mod media;
mod model;
mod overrides;
mod persist;
mod platforms;
mod schema;
mod secret;
mod sections;
mod store;
mod timezone;
mod toolsets;
mod validate;

#[cfg(all(test, feature = "telegram", feature = "webhook", feature = "api-server"))]
mod tests;

pub use agent_sections::{
    AuxiliaryConfig, AuxiliaryModel, CompressionConfig, FallbackProvider, MemoryConfig, PlatformToolsets, Price, SandboxSetting,
    TerminalConfig,
};
pub use hermes_adapter::values::split_list;

/// The gateway's own secret variables, the model providers' keys; each platform's come from its
/// registration (see [`Config::secret_env_names`]). None reaches a tool's subprocess (names
/// ending in `_API_KEY`, `_TOKEN`, `_SECRET`, `_PASSWORD` are removed too).
pub const CORE_SECRET_ENV_NAMES: &[&str] =
    &["OPENAI_API_KEY", "LLM_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "MCP_SERVE_KEY", "DATABASE_URL"];
pub use display::{BusyInputMode, DisplayConfig, ToolProgress};
pub use env::Env;
pub use error::ConfigError;
pub use extra::Extra;
pub use gateway::{GatewayConfig, MediaCacheConfig, MemoryBounds, StreamingConfig};
pub use hermes_adapter::Secret;
pub use home::Home;
pub use load::{Loaded, load, load_str, load_str_with, load_with, parse_yaml};
#[cfg(test)]
pub(crate) use mcp::check_mcp_servers as mcp_check;
pub use mcp::{McpBreakerConfig, McpServerConfig, McpServers, McpToolsConfig};
pub use mcp_serve::{DEFAULT_MCP_SERVE_PORT, MCP_SERVE_KEY_VAR, McpServeConfig, McpServeListen};
pub use media::{MediaSettings, SpeechProvider, SttConfig, TtsConfig, VisionConfig, VisionMode};
pub use model::{ModelConfig, ToolProtocol};
pub use overrides::CORE_ENV_VARS;
pub use persist::{
    PersistError, add_to_command_allowlist, remove_mcp_server, set_env_vars, set_mcp_reload_confirm, write_mcp_server, write_model_default,
};
pub use platforms::{PlatformConfig, Platforms};
pub use schema::Config;
pub use sections::{
    AgentConfig, ApprovalsConfig, CronConfig, DeliveryConfig, LogFormat, LoggingConfig, ResetMode, SecurityConfig, SessionResetConfig,
};
pub use store::{DATABASE_URL_VAR, DEFAULT_LEASE_TTL_SECS, DEFAULT_POOL_SIZE, PostgresConfig, StoreBackendName, StoreConfig};
pub use timezone::{UnknownZone, parse_zone};
#[cfg(test)]
pub(crate) use toolsets::QUIET_TOOLSETS;
pub use toolsets::{TOOLSETS, toolset_acts};
pub(crate) use toolsets::{ToolsetName, mcp_toolset, resolve_toolset};
