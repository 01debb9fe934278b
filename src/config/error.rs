//! `ConfigError`: every way loading the home, `.env` or `config.yaml` can fail. Each message names
//! the file or key at fault and what was expected, so the operator can fix it without reading code.

use std::path::PathBuf;

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file or directory could not be read or created.
    #[error("cannot access {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// `config.yaml` is not well-formed YAML.
    #[error("{}: YAML syntax error at line {line}, column {column}: {message}", path.display())]
    Yaml {
        path: PathBuf,
        /// 1-based; 0 when the parser reported no position.
        line: usize,
        /// 1-based; 0 when the parser reported no position.
        column: usize,
        message: String,
    },

    /// A value has the wrong type or is out of range. `key` is the dotted path in `config.yaml`
    /// (`gateway.max_concurrent_sessions`) or `NAME (environment)` for an environment variable.
    #[error("invalid config: `{key}`: {message}")]
    Invalid { key: String, message: String },

    /// A line of the `.env` file cannot be parsed. The message never contains the value, which is
    /// usually a secret.
    #[error("{}{}: invalid .env line: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Env {
        path: PathBuf,
        /// 1-based line number, when it could be located.
        line: Option<usize>,
        message: String,
    },

    /// The profile name cannot be used as a directory name.
    #[error("invalid profile name {0:?}: use only letters, digits, '_' and '-'")]
    InvalidProfile(String),

    /// Neither an explicit home, `HERMES_HOME` nor `HOME` is available.
    #[error("cannot locate the Hermes home: pass --home, or set HERMES_HOME or HOME")]
    NoHome,
}

impl ConfigError {
    /// Shorthand for [`ConfigError::Invalid`].
    pub(crate) fn invalid(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid { key: key.into(), message: message.into() }
    }
}
