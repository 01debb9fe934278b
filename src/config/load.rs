//! Loading: read `config.yaml`, deserialize it while collecting unknown keys (serde_ignored) and
//! the path of a bad value (serde_path_to_error), apply the environment, validate.

use super::env::Env;
use super::error::ConfigError;
use super::home::Home;
use super::schema::Config;
use crate::registry::Registry;
use std::path::Path;

/// A loaded configuration and what the operator should be told about it (unknown keys).
#[derive(Debug)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<String>,
}

/// Loads `{home}/config.yaml` (a missing file means all defaults), then applies `env` and
/// validates. `env` is normally `Env::layered(&home.env_file(), Env::from_process())`.
pub fn load(home: &Home, env: &Env) -> Result<Loaded, ConfigError> {
    load_with(home, env, &Registry::builtin())
}

/// [`load`] with the platform blocks of `registry` (the built-in adapters plus any others).
pub fn load_with(home: &Home, env: &Env, registry: &Registry) -> Result<Loaded, ConfigError> {
    let path = home.config_file();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(ConfigError::Io { path, source }),
    };
    load_str_with(&text, &path, env, registry)
}

/// [`load`] for YAML already in memory; `source` names it in messages.
pub fn load_str(text: &str, source: &Path, env: &Env) -> Result<Loaded, ConfigError> {
    load_str_with(text, source, env, &Registry::builtin())
}

/// [`load_str`] with the platform blocks of `registry`.
pub fn load_str_with(text: &str, source: &Path, env: &Env, registry: &Registry) -> Result<Loaded, ConfigError> {
    let (mut config, mut warnings) = parse_yaml(text, source)?;
    config.apply_env(env)?;
    config.platforms.resolve(registry, env, &file_label(source), &mut warnings)?;
    config.validate()?;
    Ok(Loaded { config, warnings })
}

/// The file layer alone: no environment, no semantic validation.
pub fn parse_yaml(text: &str, source: &Path) -> Result<(Config, Vec<String>), ConfigError> {
    // A first, untyped pass separates syntax errors (reported with line and column) from type
    // errors, and recognises a document that is empty or only comments, which means "defaults".
    let document: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| syntax_error(source, &e))?;
    if document.is_null() {
        return Ok((Config::default(), Vec::new()));
    }

    let mut unknown = Vec::new();
    let result: Result<Config, _> = {
        let yaml = serde_yaml_ng::Deserializer::from_str(text);
        let mut record = |path: serde_ignored::Path<'_>| unknown.push(dotted(&path));
        let tracked = serde_ignored::Deserializer::new(yaml, &mut record);
        serde_path_to_error::deserialize(tracked)
    };
    let config = result.map_err(|e| {
        let key = match e.path().to_string() {
            root if root == "." || root.is_empty() => "(top level)".to_string(),
            path => path,
        };
        let message = strip_yaml_path(&key, e.inner().to_string());
        ConfigError::Invalid { key, message }
    })?;

    let label = file_label(source);
    let warnings = unknown.iter().map(|key| format!("{label}: unknown key `{key}` (ignored)")).collect();
    Ok((config, warnings))
}

fn file_label(source: &Path) -> String {
    source.file_name().map_or_else(|| source.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// serde_yaml_ng prefixes messages with its own copy of the path (`gateway.x: invalid type…`),
/// sometimes a shorter one; the key is already shown separately, so drop it.
fn strip_yaml_path(key: &str, message: String) -> String {
    match message.split_once(": ") {
        Some((prefix, rest)) if !prefix.contains(' ') && key.starts_with(prefix) => rest.to_string(),
        _ => message,
    }
}

use hermes_adapter::registration::dotted;

fn syntax_error(source: &Path, err: &serde_yaml_ng::Error) -> ConfigError {
    let (line, column) = err.location().map_or((0, 0), |l| (l.line(), l.column()));
    ConfigError::Yaml { path: source.to_path_buf(), line, column, message: err.to_string() }
}
