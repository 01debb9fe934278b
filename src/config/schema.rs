//! `Config`: the typed `config.yaml`, how Hermes' alternative key locations fold into it, and the
//! masked YAML rendering used by `hermes config check`.

use super::agent_sections::{AuxiliaryConfig, CompressionConfig, FallbackProvider, MemoryConfig, PlatformToolsets, TerminalConfig};
use super::auth::EnvAuth;
use super::de::opt_stringish;
use super::display::DisplayConfig;
use super::gateway::{GatewayConfig, StreamingConfig};
use super::model::ModelConfig;
use super::platforms::Platforms;
use super::sections::{AgentConfig, ApprovalsConfig, CronConfig, DeliveryConfig, LoggingConfig, SecurityConfig, SessionResetConfig};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The whole configuration. Build it with [`crate::config::load()`] (file + environment +
/// validation); deserializing it directly gives the file layer only.
// `remote = "Self"`: the derives become inherent functions, wrapped by the trait impls below so
// that deserializing always folds the alias keys in.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", default)]
pub struct Config {
    pub model: ModelConfig,
    /// Filled from `platforms:` or, failing that, `gateway.platforms:`.
    #[serde(skip_deserializing)]
    pub platforms: Platforms,
    pub gateway: GatewayConfig,
    pub display: DisplayConfig,
    /// Filled from `streaming:` or, failing that, `gateway.streaming:`.
    #[serde(skip_deserializing)]
    pub streaming: StreamingConfig,
    pub session_reset: SessionResetConfig,
    pub approvals: ApprovalsConfig,
    /// Commands approved for ever (exact text, or a glob without shell operators); `/approve
    /// always` adds to it.
    pub command_allowlist: Vec<String>,
    pub cron: CronConfig,
    pub delivery: DeliveryConfig,
    pub agent: AgentConfig,
    pub logging: LoggingConfig,
    pub security: SecurityConfig,
    pub fallback_providers: Vec<FallbackProvider>,
    pub compression: CompressionConfig,
    pub auxiliary: AuxiliaryConfig,
    pub terminal: TerminalConfig,
    pub memory: MemoryConfig,
    pub platform_toolsets: PlatformToolsets,
    /// MCP servers whose tools the agent may use (`mcp_servers.<name>`).
    pub mcp_servers: super::mcp::McpServers,
    /// The gateway's own MCP server for other MCP clients (`mcp_serve`).
    pub mcp_serve: super::mcp_serve::McpServeConfig,
    /// Speech to text for voice notes and audio files.
    pub stt: super::media::SttConfig,
    /// Text to speech for `/voice on|only`.
    pub tts: super::media::TtsConfig,
    /// Images in: limits and how many stay in a conversation.
    pub vision: super::media::VisionConfig,
    /// Where sessions, the inbox and the outbox are kept: SQLite (default) or PostgreSQL.
    pub store: super::store::StoreConfig,
    /// IANA zone (`Europe/Paris`) for cron and daily resets; `None` = the host's local time.
    #[serde(deserialize_with = "opt_stringish")]
    pub timezone: Option<String>,

    // Where each key was found, kept only until `fold_aliases` runs. Optional so that "absent"
    // can be told from "default", which decides which of two locations wins.
    #[serde(rename = "platforms", skip_serializing)]
    pub(crate) platforms_file: Option<Platforms>,
    #[serde(rename = "streaming", skip_serializing)]
    pub(crate) streaming_file: Option<StreamingConfig>,
    /// Hermes' top-level spelling of `gateway.group_sessions_per_user`.
    #[serde(rename = "group_sessions_per_user", skip_serializing)]
    pub(crate) group_sessions_file: Option<bool>,
    /// Hermes' top-level spelling of `gateway.thread_sessions_per_user`.
    #[serde(rename = "thread_sessions_per_user", skip_serializing)]
    pub(crate) thread_sessions_file: Option<bool>,

    /// `<PLATFORM>_ALLOWED_USERS` / `_ALLOW_ALL_USERS` from the environment; see `auth.rs`.
    #[serde(skip)]
    pub(crate) env_auth: EnvAuth,
}

impl Config {
    /// The thread (topic) of `platform`'s home channel, if one is set.
    pub fn home_channel_thread(&self, platform: &str) -> Option<&str> {
        self.platforms.get(&platform.to_ascii_lowercase())?.home_thread.as_deref()
    }

    /// Every variable whose value is a secret: the model providers' keys and each registered
    /// platform's secret variables. None of them reaches a tool's subprocess.
    pub fn secret_env_names(&self) -> Vec<String> {
        super::CORE_SECRET_ENV_NAMES.iter().copied().chain(self.platforms.secret_env.iter().copied()).map(str::to_string).collect()
    }

    /// Moves the values found at alternative locations into their canonical fields. Top-level
    /// keys win over `gateway.*` ones, matching Hermes' lookup order.
    fn fold_aliases(&mut self) {
        let gateway_streaming = self.gateway.streaming_alias.take();
        if let Some(streaming) = self.streaming_file.take().or(gateway_streaming) {
            self.streaming = streaming;
        }
        let gateway_platforms = self.gateway.platforms_alias.take();
        if let Some(platforms) = self.platforms_file.take().or(gateway_platforms) {
            self.platforms = platforms;
        }
        if let Some(value) = self.group_sessions_file.take() {
            self.gateway.group_sessions_per_user = value;
        }
        if let Some(value) = self.thread_sessions_file.take() {
            self.gateway.thread_sessions_per_user = value;
        }
    }

    /// Every limit and section the media stages read.
    pub fn media(&self) -> super::media::MediaSettings<'_> {
        super::media::MediaSettings { stt: &self.stt, vision: &self.vision }
    }

    /// Every configured secret value, for the log redactor: these strings never reach a log line.
    pub fn secret_values(&self) -> Vec<String> {
        let p = &self.platforms;
        let mut all = vec![
            self.model.api_key.as_ref(),
            self.auxiliary.compression.api_key.as_ref(),
            self.auxiliary.approval.api_key.as_ref(),
            self.auxiliary.vision.api_key.as_ref(),
            self.stt.api_key.as_ref(),
            self.tts.api_key.as_ref(),
        ];
        all.extend(self.fallback_providers.iter().map(|f| f.api_key.as_ref()));
        all.extend(p.others.values().flat_map(|o| [o.token.as_ref(), o.api_key.as_ref()]));
        let mut out: Vec<String> = all.into_iter().flatten().filter(|s| !s.is_empty()).map(|s| s.expose().to_string()).collect();
        out.extend(p.others.values().filter_map(|o| o.settings.as_ref()).flat_map(|s| s.secrets()).filter(|s| !s.is_empty()));
        out.extend(self.mcp_serve.secret().map(str::to_string));
        out.extend(self.store.secrets());
        out
    }

    /// The resolved configuration as YAML, every secret masked (`hermes config check`).
    pub fn to_masked_yaml(&self) -> String {
        // Cannot fail for this type (string keys, no unsupported values); if serde_yaml_ng ever
        // disagrees, say so in the output instead of panicking in a diagnostic command.
        serde_yaml_ng::to_string(self).unwrap_or_else(|e| format!("# cannot render the configuration: {e}\n"))
    }
}

impl Serialize for Config {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // The inherent (derived) function, not this trait method: inherent items win.
        Config::serialize(self, serializer)
    }
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut config = Config::deserialize(deserializer)?;
        config.fold_aliases();
        Ok(config)
    }
}
