//! Registration: everything the gateway needs to know about one platform adapter, as one value
//! ([`Registration`]) each adapter crate exports. The gateway keeps a table of them; adding a
//! platform is one crate plus one entry there.
//!
//! A platform's block in `config.yaml` (`platforms.<name>`) is split in two. The gateway keeps the
//! keys it needs for every platform itself ([`CORE_KEYS`]: who may talk, the admin tier, the home
//! channel, whether the platform is on); the rest is handed to the registration's
//! [`Registration::parse`] as a `serde_json::Value` (so adapter crates need no YAML crate), after
//! the registration's environment variables ([`EnvVar`]) are written into it. [`parse`] turns that
//! value into the adapter's typed config, recording unknown keys (serde_ignored) and the key path
//! of a bad value (serde_path_to_error); the gateway reports both as `platforms.<name>.<path>`.
//! At start-up [`Registration::build`] turns the parsed config into a running
//! [`PlatformAdapter`].

use crate::PlatformAdapter;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::any::Any;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Keys of a platform block that the gateway reads itself, for every platform; the rest of the
/// block belongs to the adapter. Environment variables that set one of these (see [`EnvVar`]) are
/// applied by the gateway too.
pub const CORE_KEYS: &[&str] = &["enabled", "token", "api_key", "home_channel", "allowed_users", "allow_all_users", "admin_users"];

/// One platform adapter as the gateway sees it before it exists: its name, its configuration
/// (documentation, environment variables, parsing) and how to build it.
#[derive(Clone, Copy)]
pub struct Registration {
    /// The platform's name: its key under `platforms:` and [`crate::Platform`]'s text.
    pub platform: &'static str,
    /// One line saying what the platform is, for generated documentation.
    pub summary: &'static str,
    /// The environment variables that set keys of this block, in the order they are applied (a
    /// later one setting the same key wins).
    pub env: &'static [EnvVar],
    /// The documented block as it appears in the example `config.yaml`: lines indented by four
    /// spaces (they sit under `platforms.<name>:`), every key with its default and a comment.
    /// Core keys may be shown too; every adapter key must be.
    pub example_yaml: &'static str,
    /// Why an allowlist entry can never match a user of this platform (a display name where an
    /// id belongs), if it cannot; the gateway warns about such entries at start-up.
    pub allowlist_entry_problem: Option<fn(&str) -> Option<&'static str>>,
    /// The adapter's keys of the block (with the environment applied) into its typed config;
    /// normally [`parse::<TheConfig>`](parse).
    pub parse: fn(&BlockInput<'_>) -> Result<Parsed, SettingError>,
    /// The adapter, from the config [`Registration::parse`] returned.
    pub build: BuildFn,
    /// What the gateway must know about the platform's people before the adapter exists: who
    /// is gated, where a home channel is kept, whether strangers may pair, how they press.
    pub facts: PlatformFacts,
}

/// Facts about a platform that the core reads instead of composing names or keeping lists of
/// platforms: `/sethome`, pairing, the security audit, `hermes doctor` and the secret filter
/// all come here, so adding a platform cannot forget one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlatformFacts {
    /// People write here under a platform user id, so allowlists, admins and the audit's "who
    /// may talk" apply. False where the operator authenticates callers upstream (an API key, a
    /// signed webhook).
    pub people: bool,
    /// Where `/sethome` keeps the platform's home channel; `None`: the platform has none.
    pub home: Option<HomeVars>,
    /// Whether a stranger writing to the bot may be handed a pairing code here.
    pub pairing: PairingOffer,
    /// Messages can carry buttons (approvals offer them).
    pub buttons: bool,
    /// People can answer with a reaction.
    pub reactions: bool,
}

impl PlatformFacts {
    /// A platform whose callers the operator authenticates upstream: no people, no home, no
    /// pairing, nothing to press.
    pub const ENDPOINT: PlatformFacts = PlatformFacts {
        people: false,
        home: None,
        pairing: PairingOffer::NotOffered { why: "callers are authenticated by key or signature" },
        buttons: false,
        reactions: false,
    };
}

/// The environment variables of a platform's home channel, named as the reference names them
/// (`TELEGRAM_HOME_CHANNEL`, `MATRIX_HOME_ROOM`, `EMAIL_HOME_ADDRESS`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HomeVars {
    /// The chat; must also be one of the registration's [`EnvVar`]s, with key `home_channel`.
    pub channel: &'static str,
    /// The thread or topic inside it, where the platform has threads.
    pub thread: Option<&'static str>,
}

/// Whether strangers can pair on a platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairingOffer {
    /// A stranger's direct message is answered with a one-time code (when the configuration
    /// names nobody on the platform).
    Offered,
    /// Never offered; `why` is logged and shown by `hermes doctor`.
    NotOffered {
        /// The reason, one clause.
        why: &'static str,
    },
}

impl PairingOffer {
    /// Whether strangers may be handed a code.
    pub fn is_offered(self) -> bool {
        matches!(self, PairingOffer::Offered)
    }
}

/// The signature of [`Registration::build`].
pub type BuildFn = fn(&dyn ErasedConfig, &BuildContext<'_>) -> Result<Arc<dyn PlatformAdapter>, BuildError>;

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration").field("platform", &self.platform).finish_non_exhaustive()
    }
}

impl Registration {
    /// The keys documented in [`Registration::example_yaml`] (the first level of the block).
    pub fn documented_keys(&self) -> Vec<&'static str> {
        self.example_yaml
            .lines()
            .filter_map(|line| line.strip_prefix("    "))
            .filter(|line| !line.starts_with(' ') && !line.starts_with('#'))
            .filter_map(|line| line.split_once(':').map(|(key, _)| key.trim()))
            .filter(|key| !key.is_empty())
            .collect()
    }

    /// The names of this platform's variables that hold secrets (kept out of every tool's
    /// environment and output).
    pub fn secret_env_names(&self) -> impl Iterator<Item = &'static str> {
        self.env.iter().filter(|v| v.kind == EnvKind::Secret).map(|v| v.name)
    }

    /// What is inconsistent between the facts and the rest of the registration (a home channel
    /// variable that no [`EnvVar`] reads), for the registry's tests.
    pub fn fact_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(home) = self.facts.home {
            if !self.env.iter().any(|v| v.name == home.channel && v.key == "home_channel") {
                problems.push(format!("{}: home variable {} is not an EnvVar of key home_channel", self.platform, home.channel));
            }
            if home.thread.is_some_and(|t| self.env.iter().any(|v| v.name == t)) {
                problems.push(format!("{}: the home thread variable is read by the gateway, not an adapter key", self.platform));
            }
        }
        if self.facts.pairing.is_offered() && !self.facts.people {
            problems.push(format!("{}: pairing offered where there are no people", self.platform));
        }
        problems
    }
}

/// An environment variable that sets one key of a platform block (environment wins over the
/// file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvVar {
    /// The variable, e.g. `TELEGRAM_BOT_TOKEN`.
    pub name: &'static str,
    /// The first-level key of the block it sets, e.g. `token`.
    pub key: &'static str,
    /// How the value is read.
    pub kind: EnvKind,
    /// A sample value for the generated `.env.example`.
    pub example: &'static str,
    /// One line for the generated `.env.example`.
    pub description: &'static str,
}

/// How the text of an [`EnvVar`] becomes a value. A value that does not parse is an error naming
/// the variable, never a silent fallback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvKind {
    /// Taken as is (trimmed).
    Text,
    /// Like `Text`, and never shown.
    Secret,
    /// `true/false/1/0/yes/no/on/off`, any case.
    Bool,
    /// A TCP port 1-65535.
    Port,
    /// A comma-separated list.
    List,
}

impl EnvKind {
    /// The JSON value `raw` stands for, or why it does not parse (the message quotes the value
    /// except for secrets).
    pub fn to_value(self, raw: &str) -> Result<serde_json::Value, EnvValueError> {
        use serde_json::Value;
        let trimmed = raw.trim();
        match self {
            EnvKind::Text | EnvKind::Secret => Ok(Value::String(trimmed.to_string())),
            EnvKind::Bool => parse_bool(raw).map(Value::Bool),
            EnvKind::Port => match trimmed.parse::<u16>() {
                Ok(port) if port != 0 => Ok(Value::from(port)),
                _ => Err(EnvValueError::NotPort { found: raw.to_string() }),
            },
            EnvKind::List => Ok(Value::Array(crate::values::split_list(raw).into_iter().map(Value::String).collect())),
        }
    }
}

/// `true/false/1/0/yes/no/on/off`, any case; the error quotes the value.
pub fn parse_bool(raw: &str) -> Result<bool, EnvValueError> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(EnvValueError::NotBool { found: raw.to_string() }),
    }
}

/// An environment variable's value that is not of its [`EnvKind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvValueError {
    /// Not one of the boolean spellings.
    #[error("expected a boolean (true/false, 1/0, yes/no, on/off), found {found:?}")]
    NotBool {
        /// The value as set.
        found: String,
    },
    /// Not a TCP port.
    #[error("expected a port number 1-65535, found {found:?}")]
    NotPort {
        /// The value as set.
        found: String,
    },
}

/// What [`Registration::parse`] is given.
pub struct BlockInput<'a> {
    /// The adapter's keys of the block as written (core keys removed); `Null` when the file has
    /// no block.
    pub block: &'a serde_json::Value,
    /// Reads an environment variable (empty counts as unset).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The registration's variables (the core ones among them are skipped).
    pub vars: &'static [EnvVar],
    /// Whether the platform is switched on (the core `enabled`/`token` keys); some checks, such
    /// as the strength of a listener's secret, apply only then.
    pub enabled: bool,
}

/// A parsed block: the adapter's typed config and the keys it did not know.
pub struct Parsed {
    /// The typed config, for [`Registration::build`] and for display.
    pub config: Arc<dyn ErasedConfig>,
    /// Dotted paths, relative to the block, of keys the config type ignored.
    pub unknown: Vec<String>,
}

/// A configuration problem of one block.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// A value in the file (or its combination with others) is wrong. `path` is relative to the
    /// block (`routes.gh.deliver_only`; empty for the block itself) and may carry the variable
    /// that also sets it (`key (API_SERVER_KEY)`).
    #[error("`{path}`: {message}")]
    Key {
        /// The dotted key path inside the block.
        path: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// An environment variable's value does not parse.
    #[error("`{name}` (environment): {message}")]
    Env {
        /// The variable.
        name: String,
        /// What is wrong and what was expected.
        message: String,
    },
}

impl SettingError {
    /// A [`SettingError::Key`].
    pub fn key(path: impl Into<String>, message: impl Into<String>) -> Self {
        SettingError::Key { path: path.into(), message: message.into() }
    }
}

/// What an adapter's typed config must provide. Implement it for a `serde` struct with
/// `#[serde(default)]`; [`parse`] and the blanket [`ErasedConfig`] do the rest.
pub trait AdapterConfig: Serialize + DeserializeOwned + Default + PartialEq + Clone + fmt::Debug + Send + Sync + 'static {
    /// Checks types cannot express, with the key path of the first problem.
    fn validate(&self, _enabled: bool) -> Result<(), SettingError> {
        Ok(())
    }

    /// Every secret value in this config, for the log redactor.
    fn secrets(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether this config holds a credential that turns the platform on by itself, as the
    /// block's `token` does (a Matrix password, a mailbox password): a platform is enabled
    /// when it says `enabled: true`, has a `token`, or this is true.
    fn has_credential(&self) -> bool {
        false
    }

    /// Toolsets this config names (relative key path, names), which the gateway checks exist.
    fn toolsets(&self) -> Vec<(String, Vec<String>)> {
        Vec::new()
    }

    /// The address this adapter listens on, for `hermes doctor`; `None` for clients.
    fn listener(&self) -> Option<(String, u16)> {
        None
    }

    /// Settings that put the owner at risk, for `hermes security audit`.
    fn risks(&self, _enabled: bool) -> Vec<Risk> {
        Vec::new()
    }
}

/// A risky setting found by [`AdapterConfig::risks`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Risk {
    /// High risks make the audit fail; others are reported as medium.
    pub high: bool,
    /// Stable short key (`webhook.public_route_without_secret`).
    pub key: &'static str,
    /// What is risky.
    pub what: String,
    /// What to do about it.
    pub fix: String,
}

/// An [`AdapterConfig`] behind a pointer: what the gateway stores and hands back to
/// [`Registration::build`]. Implemented for every `AdapterConfig`.
pub trait ErasedConfig: fmt::Debug + Send + Sync + 'static {
    /// The config as JSON, secrets masked (the `Serialize` of [`crate::Secret`] masks).
    fn to_json(&self) -> serde_json::Value;
    /// See [`AdapterConfig::secrets`].
    fn secrets(&self) -> Vec<String>;
    /// See [`AdapterConfig::has_credential`].
    fn has_credential(&self) -> bool;
    /// See [`AdapterConfig::toolsets`].
    fn toolsets(&self) -> Vec<(String, Vec<String>)>;
    /// See [`AdapterConfig::listener`].
    fn listener(&self) -> Option<(String, u16)>;
    /// See [`AdapterConfig::risks`].
    fn risks(&self, enabled: bool) -> Vec<Risk>;
    /// For downcasting to the concrete config ([`downcast`]).
    fn as_any(&self) -> &dyn Any;
    /// Equality with another erased config (false for a different type).
    fn dyn_eq(&self, other: &dyn ErasedConfig) -> bool;
}

impl<T: AdapterConfig> ErasedConfig for T {
    fn to_json(&self) -> serde_json::Value {
        // A derived Serialize of string-keyed structs cannot fail; Null keeps a diagnostic going.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    fn secrets(&self) -> Vec<String> {
        AdapterConfig::secrets(self)
    }

    fn has_credential(&self) -> bool {
        AdapterConfig::has_credential(self)
    }

    fn toolsets(&self) -> Vec<(String, Vec<String>)> {
        AdapterConfig::toolsets(self)
    }

    fn listener(&self) -> Option<(String, u16)> {
        AdapterConfig::listener(self)
    }

    fn risks(&self, enabled: bool) -> Vec<Risk> {
        AdapterConfig::risks(self, enabled)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn dyn_eq(&self, other: &dyn ErasedConfig) -> bool {
        other.as_any().downcast_ref::<T>().is_some_and(|o| o == self)
    }
}

/// The concrete config inside `config`, as [`Registration::build`] needs it.
pub fn downcast<T: AdapterConfig>(config: &dyn ErasedConfig) -> Result<&T, BuildError> {
    config
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| BuildError::new(None, format!("internal error: the config is not a {}", std::any::type_name::<T>())))
}

/// The generic [`Registration::parse`]: applies the registration's non-core environment
/// variables to `input.block`, deserializes `T` recording unknown keys and the path of a bad
/// value, then runs [`AdapterConfig::validate`].
pub fn parse<T: AdapterConfig>(input: &BlockInput<'_>) -> Result<Parsed, SettingError> {
    let mut block = match input.block {
        serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
        other => other.clone(),
    };
    for var in input.vars.iter().filter(|v| !CORE_KEYS.contains(&v.key)) {
        let Some(raw) = (input.env)(var.name).filter(|v| !v.is_empty()) else { continue };
        let value = var.kind.to_value(&raw).map_err(|e| SettingError::Env { name: var.name.to_string(), message: e.to_string() })?;
        // A block that is not a mapping is reported by deserialization below.
        if let Some(map) = block.as_object_mut() {
            map.insert(var.key.to_string(), value);
        }
    }
    let mut unknown = Vec::new();
    let config: T = {
        let mut record = |path: serde_ignored::Path<'_>| unknown.push(dotted(&path));
        let tracked = serde_ignored::Deserializer::new(&block, &mut record);
        serde_path_to_error::deserialize(tracked).map_err(|e| {
            let path = match e.path().to_string() {
                root if root == "." => String::new(),
                path => path,
            };
            SettingError::Key { path, message: e.into_inner().to_string() }
        })?
    };
    config.validate(input.enabled)?;
    Ok(Parsed { config: Arc::new(config), unknown })
}

/// `routes.gh.delivr`. serde_ignored's own Display marks every `Option` level with `?`, which
/// means nothing to someone editing the file.
pub fn dotted(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    let (parent, own) = match path {
        Path::Root => return String::new(),
        Path::Seq { parent, index } => (*parent, index.to_string()),
        Path::Map { parent, key } => (*parent, key.clone()),
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => {
            return dotted(parent);
        }
    };
    match dotted(parent) {
        prefix if prefix.is_empty() => own,
        prefix => format!("{prefix}.{own}"),
    }
}

/// What the gateway hands [`Registration::build`] besides the adapter's own config.
pub struct BuildContext<'a> {
    /// The block's `token` (trimmed), when set.
    pub token: Option<&'a str>,
    /// Where inbound attachments are saved (a private [`crate::MediaCache`] folder).
    pub media_dir: &'a Path,
    /// What may be fetched at all: sizes per kind and the longest voice note transcribed. An
    /// adapter checks the platform's declared facts with [`crate::MediaLimits::admit`] before
    /// downloading, and saves with [`crate::save_capped`].
    pub media_limits: crate::MediaLimits,
    /// The platform's own private state folder (`HERMES_HOME/platforms/<name>`, not yet
    /// created): a sync token, a crypto store, the last mail seen.
    pub state_dir: &'a Path,
    /// The slash commands, as a command menu shows them: (name without `/`, description).
    pub commands: &'a [(String, String)],
    /// Whether platforms may unfurl links in the agent's messages (`display.link_previews`).
    pub link_previews: bool,
    /// How long a turn may run (`agent.gateway_timeout`), for adapters that wait for answers.
    pub turn_timeout: Duration,
}

/// Why an adapter could not be built. The gateway shows it as
/// `platforms.<name>.<key>: <message>` (or the message alone without a key) and exits 78.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BuildError {
    /// The key at fault, relative to the block (empty: the block itself); `None` when the
    /// message already names its keys.
    pub key: Option<String>,
    /// What is wrong and what to do.
    pub message: String,
}

impl BuildError {
    /// A build error at `key` (relative to the block).
    pub fn new(key: Option<&str>, message: impl Into<String>) -> Self {
        Self { key: key.map(str::to_string), message: message.into() }
    }

    /// The usual error of a chat platform that is on without a token.
    pub fn missing_token(platform: &str, variable: &str) -> Self {
        Self::new(Some("token"), format!("{platform} is enabled but has no bot token; set {variable} (or disable the platform)"))
    }
}
