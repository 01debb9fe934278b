//! `Env`: an owned snapshot of environment variables, layered from `{HERMES_HOME}/.env` and the
//! process environment. The process environment is only read, never modified: the daemon is
//! multi-threaded and `set_var` is unsound there, so every consumer asks this map instead.

use super::error::ConfigError;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Environment variables by name. Empty values count as unset (see [`Env::get`]).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// A snapshot of the process environment. Variables whose name or value is not UTF-8 are
    /// skipped: none of ours can be, and `std::env::vars` would panic on them.
    pub fn from_process() -> Self {
        let vars = std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect();
        Self { vars }
    }

    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self { vars: pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect() }
    }

    /// The variables of a `.env` file, parsed with dotenvy without touching the process
    /// environment. A missing file is an empty map.
    pub fn from_dotenv_file(path: &Path) -> Result<Self, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(ConfigError::Io { path: path.to_path_buf(), source });
            }
        };
        let mut vars = BTreeMap::new();
        for item in dotenvy::from_read_iter(text.as_bytes()) {
            match item {
                Ok((key, value)) => {
                    vars.insert(key, value);
                }
                Err(err) => return Err(dotenv_error(path, &text, err)),
            }
        }
        Ok(Self { vars })
    }

    /// `.env` from `dotenv_file` overridden by `process` (the environment wins, as in Hermes). An
    /// empty process variable does not hide a `.env` value, because empty means unset.
    pub fn layered(dotenv_file: &Path, process: Env) -> Result<Self, ConfigError> {
        let mut env = Self::from_dotenv_file(dotenv_file)?;
        for (key, value) in process.vars {
            if !value.is_empty() || !env.vars.contains_key(&key) {
                env.vars.insert(key, value);
            }
        }
        Ok(env)
    }

    /// The value of `key`, or `None` when it is unset or empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// Sets a variable in this snapshot only (tests, `/sethome` bookkeeping).
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.vars.insert(key.into(), value.into());
    }

    /// All set (non-empty) variables, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).filter(|(_, v)| !v.is_empty())
    }
}

// Names only: values are API keys and tokens.
impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Env").field("names", &self.vars.keys().collect::<Vec<_>>()).finish()
    }
}

/// Turns a dotenvy error into one that names the file and line but not the line's text, which
/// holds the (secret) value.
fn dotenv_error(path: &Path, text: &str, err: dotenvy::Error) -> ConfigError {
    match err {
        dotenvy::Error::LineParse(line, _index) => {
            // dotenvy reports the offending line's text, not its number; find it in the file.
            let number = text.find(line.trim()).map(|at| text[..at].matches('\n').count() + 1);
            let message = match line.split_once('=') {
                Some((name, _)) if !name.trim().is_empty() => format!(
                    "cannot parse the value of `{}` (value not shown); expected NAME=value with balanced quotes",
                    name.trim().trim_start_matches("export ").trim()
                ),
                _ => "cannot parse this line; expected NAME=value".to_string(),
            };
            ConfigError::Env { path: path.to_path_buf(), line: number, message }
        }
        dotenvy::Error::Io(source) => ConfigError::Io { path: path.to_path_buf(), source },
        other => ConfigError::Env { path: path.to_path_buf(), line: None, message: other.to_string() },
    }
}
