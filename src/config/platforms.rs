//! `platforms:`: one block per messaging platform. The gateway reads the keys every platform has
//! itself ([`PlatformConfig`]: on or off, token, who may talk, admins, home channel); the rest of
//! a block belongs to the platform's adapter, whose [`Registration`] parses it into its typed
//! config ([`PlatformConfig::settings`]) once the environment is known ([`Platforms::resolve`]).

use super::env::Env;
use super::error::ConfigError;
use crate::registry::Registry;
use hermes_adapter::registration::{BlockInput, CORE_KEYS, ErasedConfig, PlatformFacts, Registration};
use hermes_adapter::secret::{self, Secret};
use hermes_adapter::values::{Extra, opt_stringish, string_list};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// All platform blocks. Platform names are lower-cased on load.
#[derive(Clone, Debug, Default)]
pub struct Platforms {
    /// Every configured platform's block, by name (the name is kept for the gateway's
    /// `send_message` home targets).
    pub others: BTreeMap<String, PlatformConfig>,
    /// Every registered platform's secret variables, configured or not (kept out of tools).
    pub(crate) secret_env: std::collections::BTreeSet<&'static str>,
}

// Two configurations are equal when their blocks are: the secret variables come from the build's
// registrations, not from what was configured.
impl PartialEq for Platforms {
    fn eq(&self, other: &Self) -> bool {
        self.others == other.others
    }
}

impl Platforms {
    /// The block of `name` (lower-case), if configured.
    pub fn get(&self, name: &str) -> Option<&PlatformConfig> {
        self.others.get(name)
    }

    /// The adapter's typed config of `name`, if configured and of type `T`.
    pub fn settings<T: 'static>(&self, name: &str) -> Option<&T> {
        self.get(name)?.settings.as_deref()?.as_any().downcast_ref::<T>()
    }

    /// Applies the registrations' environment variables and parses each registered block's
    /// adapter keys. Unknown keys become warnings (`{label}: unknown key ...`), labelled like the
    /// file's own.
    pub(crate) fn resolve(&mut self, registry: &Registry, env: &Env, label: &str, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
        for registration in registry.iter() {
            self.secret_env.extend(registration.secret_env_names());
            self.resolve_one(registration, env, label, warnings)?;
        }
        for (name, block) in &mut self.others {
            if registry.get(name).is_some() {
                continue;
            }
            // No adapter in this build: keep `extra` (free-form) and report the rest.
            for (key, value) in std::mem::take(&mut block.rest) {
                if key == "extra" {
                    match serde_json::from_value::<BTreeMap<String, serde_json::Value>>(value) {
                        Ok(map) => block.extra = Extra::from(map),
                        Err(_) => warnings.push(format!("{label}: `platforms.{name}.extra` is not a mapping (ignored)")),
                    }
                } else {
                    warnings.push(format!("{label}: unknown key `platforms.{name}.{key}` (ignored)"));
                }
            }
        }
        Ok(())
    }

    fn resolve_one(&mut self, registration: &Registration, env: &Env, label: &str, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
        let name = registration.platform;
        let set = |var: &&hermes_adapter::EnvVar| env.get(var.name).is_some();
        if registration.env.iter().any(|v| set(&v)) && !self.others.contains_key(name) {
            self.others.insert(name.to_string(), PlatformConfig::default());
        }
        let Some(block) = self.others.get_mut(name) else { return Ok(()) };
        block.facts = Some(registration.facts);
        if let Some(thread) = registration.facts.home.and_then(|h| h.thread) {
            block.home_thread = env.get(thread).map(str::trim).filter(|t| !t.is_empty()).map(str::to_string);
        }
        for var in registration.env.iter().filter(set) {
            let Some(raw) = env.get(var.name) else { continue };
            let invalid =
                |e: hermes_adapter::registration::EnvValueError| ConfigError::invalid(format!("{} (environment)", var.name), e.to_string());
            let value = var.kind.to_value(raw).map_err(invalid)?;
            match var.key {
                "enabled" => block.enabled = value.as_bool(),
                "token" => block.token = value.as_str().map(Secret::new),
                "api_key" => block.api_key = value.as_str().map(Secret::new),
                "home_channel" => block.home_channel = value.as_str().map(str::to_string),
                _ => {}
            }
        }
        let rest = serde_json::Value::Object(std::mem::take(&mut block.rest).into_iter().collect());
        let lookup = |var: &str| env.get(var).map(str::to_string);
        let input = BlockInput { block: &rest, env: &lookup, vars: registration.env, enabled: block.is_enabled() };
        let parsed = (registration.parse)(&input).map_err(|e| match e {
            hermes_adapter::SettingError::Key { path, message } => {
                let key = if path.is_empty() { format!("platforms.{name}") } else { format!("platforms.{name}.{path}") };
                ConfigError::Invalid { key, message }
            }
            hermes_adapter::SettingError::Env { name, message } => ConfigError::invalid(format!("{name} (environment)"), message),
        })?;
        warnings.extend(parsed.unknown.iter().map(|key| format!("{label}: unknown key `platforms.{name}.{key}` (ignored)")));
        block.settings = Some(parsed.config);
        Ok(())
    }
}

/// A platform's block (`platforms.<name>`): the keys the gateway reads for every platform, and
/// the adapter's own.
#[derive(Clone, Default)]
pub struct PlatformConfig {
    /// Unset: enabled when a token is configured (`<PLATFORM>_BOT_TOKEN` or `token`).
    pub enabled: Option<bool>,
    pub token: Option<Secret>,
    pub api_key: Option<Secret>,
    /// Chat id that cron output and notifications go to by default.
    pub home_channel: Option<String>,
    /// The thread or topic of the home channel (the registration's home thread variable, which
    /// `/sethome` writes for a topic or thread).
    pub home_thread: Option<String>,
    /// User ids allowed to talk to the bot (`*` = anyone); a list or a comma-separated string.
    /// `<PLATFORM>_ALLOWED_USERS` replaces it; see `Config::allowed_users`.
    pub allowed_users: Vec<String>,
    pub allow_all_users: bool,
    /// Admins on this platform (`<PLATFORM>_ADMIN_USERS` replaces it); see `gateway.admin_users`.
    pub admin_users: Vec<String>,
    /// `extra:` of a platform this build has no adapter for (free-form, masked when shown).
    pub extra: Extra,
    /// The adapter's typed config, parsed by its registration.
    pub settings: Option<Arc<dyn ErasedConfig>>,
    /// The registration's facts about the platform; `None` for a block this build has no
    /// adapter for.
    pub facts: Option<PlatformFacts>,
    /// The adapter's keys as written, until [`Platforms::resolve`] parses them.
    pub(crate) rest: BTreeMap<String, serde_json::Value>,
}

impl PlatformConfig {
    /// Enabled explicitly, or implicitly by having a token (or another credential of the
    /// adapter's, such as a Matrix or mailbox password).
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or_else(|| self.token.is_some() || self.settings.as_ref().is_some_and(|s| s.has_credential()))
    }
}

impl PartialEq for PlatformConfig {
    fn eq(&self, other: &Self) -> bool {
        let settings = match (&self.settings, &other.settings) {
            (Some(a), Some(b)) => a.dyn_eq(b.as_ref()),
            (None, None) => true,
            _ => false,
        };
        settings
            && (&self.enabled, &self.token, &self.api_key, &self.home_channel, &self.home_thread)
                == (&other.enabled, &other.token, &other.api_key, &other.home_channel, &other.home_thread)
            && (&self.allowed_users, self.allow_all_users, &self.admin_users)
                == (&other.allowed_users, other.allow_all_users, &other.admin_users)
            && (&self.extra, &self.rest) == (&other.extra, &other.rest)
    }
}

// Secrets mask themselves; the adapter's config is shown as its masked JSON.
impl fmt::Debug for PlatformConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlatformConfig")
            .field("enabled", &self.enabled)
            .field("token", &self.token)
            .field("api_key", &self.api_key)
            .field("home_channel", &self.home_channel)
            .field("home_thread", &self.home_thread)
            .field("allowed_users", &self.allowed_users)
            .field("allow_all_users", &self.allow_all_users)
            .field("admin_users", &self.admin_users)
            .field("extra", &self.extra)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Serialize for Platforms {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.others.len()))?;
        for (name, block) in &self.others {
            map.serialize_entry(name, block)?;
        }
        map.end()
    }
}

impl Serialize for PlatformConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(enabled) = self.enabled {
            map.serialize_entry("enabled", &enabled)?;
        }
        map.serialize_entry("token", &self.token)?;
        map.serialize_entry("api_key", &self.api_key)?;
        map.serialize_entry("home_channel", &self.home_channel)?;
        map.serialize_entry("allowed_users", &self.allowed_users)?;
        map.serialize_entry("allow_all_users", &self.allow_all_users)?;
        map.serialize_entry("admin_users", &self.admin_users)?;
        match &self.settings {
            Some(settings) => {
                if let serde_json::Value::Object(entries) = settings.to_json() {
                    for (k, v) in &entries {
                        map.serialize_entry(k, v)?;
                    }
                }
            }
            None if !self.extra.is_empty() => map.serialize_entry("extra", &self.extra)?,
            None => {}
        }
        map.end()
    }
}

// Hand-written rather than `#[serde(flatten)]`: flatten buffers the unknown entries, which hides
// them from serde_ignored and serde_path_to_error, so typos inside `telegram:` would go unreported
// and errors there would lose their key path.
impl<'de> Deserialize<'de> for Platforms {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(PlatformsVisitor)
    }
}

struct PlatformsVisitor;

impl<'de> Visitor<'de> for PlatformsVisitor {
    type Value = Platforms;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping from platform name to its settings")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Platforms, E> {
        Ok(Platforms::default())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Platforms, A::Error> {
        let mut out = Platforms::default();
        while let Some(name) = map.next_key::<String>()? {
            // `telegram:` with nothing under it is an empty block, not an error.
            let block = map.next_value::<Option<PlatformConfig>>()?.unwrap_or_default();
            out.others.insert(name.to_ascii_lowercase(), block);
        }
        Ok(out)
    }
}

impl<'de> Deserialize<'de> for PlatformConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BlockVisitor)
    }
}

struct BlockVisitor;

impl<'de> Visitor<'de> for BlockVisitor {
    type Value = PlatformConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping of platform settings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PlatformConfig, A::Error> {
        let mut out = PlatformConfig::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "enabled" => out.enabled = map.next_value()?,
                "token" => out.token = map.next_value::<OptSecret>()?.0,
                "api_key" => out.api_key = map.next_value::<OptSecret>()?.0,
                "home_channel" => out.home_channel = map.next_value::<Stringish>()?.0,
                "allowed_users" => out.allowed_users = map.next_value::<List>()?.0,
                "allow_all_users" => out.allow_all_users = map.next_value()?,
                "admin_users" => out.admin_users = map.next_value::<List>()?.0,
                _ => {
                    debug_assert!(!CORE_KEYS.contains(&key.as_str()));
                    // The adapter's key: kept as written, parsed by its registration later.
                    let value: serde_yaml_ng::Value = map.next_value()?;
                    let value = serde_json::to_value(&value).map_err(|e| de::Error::custom(format!("`{key}`: {e}")))?;
                    out.rest.insert(key, value);
                }
            }
        }
        Ok(out)
    }
}

struct OptSecret(Option<Secret>);

impl<'de> Deserialize<'de> for OptSecret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        secret::optional(d).map(OptSecret)
    }
}

struct Stringish(Option<String>);

impl<'de> Deserialize<'de> for Stringish {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        opt_stringish(d).map(Stringish)
    }
}

struct List(Vec<String>);

impl<'de> Deserialize<'de> for List {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        string_list(d).map(List)
    }
}
