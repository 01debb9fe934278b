//! `Home`: where `HERMES_HOME` is and the fixed layout of files the gateway keeps under it
//! (reference §9.1). Every path the daemon writes is derived here, so profiles stay isolated.

use super::env::Env;
use super::error::ConfigError;
use std::path::{Path, PathBuf};

/// The profile name that means "the base home itself", as in Hermes' `-p default`.
const DEFAULT_PROFILE: &str = "default";

/// This gateway's store in a home whose `state.db` belongs to Python Hermes.
const PYTHON_HOME_STORE: &str = "gateway.db";

/// A resolved Hermes home directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
    profile: Option<String>,
}

impl Home {
    /// Finds the home: `explicit` (e.g. `--home`) wins, else `HERMES_HOME`, else `$HOME/.hermes`.
    /// With a profile `NAME` the home is `<that base>/profiles/NAME`; `default` means the base
    /// itself. A leading `~/` is expanded with `HOME`.
    pub fn resolve(explicit: Option<PathBuf>, profile: Option<&str>, env: &Env) -> Result<Self, ConfigError> {
        let base = match explicit {
            Some(path) => expand_tilde(&path, env),
            None => match env.get("HERMES_HOME") {
                Some(path) => expand_tilde(Path::new(path), env),
                None => PathBuf::from(env.get("HOME").ok_or(ConfigError::NoHome)?).join(".hermes"),
            },
        };
        match profile {
            None => Ok(Self { root: base, profile: None }),
            Some(name) if !valid_profile_name(name) => Err(ConfigError::InvalidProfile(name.to_string())),
            Some(DEFAULT_PROFILE) => Ok(Self { root: base, profile: None }),
            Some(name) => Ok(Self { root: base.join("profiles").join(name), profile: Some(name.to_string()) }),
        }
    }

    /// A home at exactly `root` (tests, tools that already know the directory).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into(), profile: None }
    }

    /// The selected profile, `None` for the base home.
    pub fn profile(&self) -> Option<&str> {
        self.profile.as_deref()
    }

    pub fn root(&self) -> PathBuf {
        self.root.clone()
    }

    pub fn config_file(&self) -> PathBuf {
        self.root.join("config.yaml")
    }

    pub fn env_file(&self) -> PathBuf {
        self.root.join(".env")
    }

    /// `state.db`: the gateway's store, unless Python Hermes wrote it first — which of the two
    /// files is ours the store decides (`store::state_db`), since only it knows its schema.
    pub fn shared_state_db(&self) -> PathBuf {
        self.root.join("state.db")
    }

    /// Where the gateway keeps its store in a home whose `state.db` is Python Hermes'.
    pub fn beside_python_state_db(&self) -> PathBuf {
        self.root.join(PYTHON_HOME_STORE)
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    pub fn cache_dir(&self) -> PathBuf {
        self.root.join("cache")
    }

    pub fn lock_file(&self) -> PathBuf {
        self.root.join("gateway.lock")
    }

    pub fn pid_file(&self) -> PathBuf {
        self.root.join("gateway.pid")
    }

    /// The runtime status file (reference §1.5).
    pub fn status_file(&self) -> PathBuf {
        self.root.join("gateway_state.json")
    }

    /// Written on a clean exit; its absence at start-up means the last run crashed.
    pub fn clean_shutdown_marker(&self) -> PathBuf {
        self.root.join(".clean_shutdown")
    }

    pub fn memories_dir(&self) -> PathBuf {
        self.root.join("memories")
    }

    pub fn skills_dir(&self) -> PathBuf {
        self.root.join("skills")
    }

    pub fn cron_dir(&self) -> PathBuf {
        self.root.join("cron")
    }

    /// Scripts cron jobs may run (nothing outside it).
    pub fn scripts_dir(&self) -> PathBuf {
        self.root.join("scripts")
    }

    /// Per-platform state (pairing store, Matrix crypto store).
    pub fn platforms_dir(&self) -> PathBuf {
        self.root.join("platforms")
    }

    /// The pairing store: pending codes, approved users and rate limits, per platform.
    pub fn pairing_dir(&self) -> PathBuf {
        self.platforms_dir().join("pairing")
    }

    /// Creates the root, `logs/` and `cache/`. The root is made owner-only (0700) on Unix because
    /// it holds `.env` and the session database; so is `cache/`, which holds what users send.
    pub fn ensure_dirs(&self) -> Result<(), ConfigError> {
        for dir in [self.root.clone(), self.logs_dir(), self.cache_dir()] {
            std::fs::create_dir_all(&dir).map_err(|source| ConfigError::Io { path: dir.clone(), source })?;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for dir in [self.root.clone(), self.cache_dir()] {
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(|source| ConfigError::Io { path: dir.clone(), source })?;
            }
        }
        Ok(())
    }
}

/// Profile names become directory names: no separators, dots or spaces.
pub(crate) fn valid_profile_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn expand_tilde(path: &Path, env: &Env) -> PathBuf {
    match (path.strip_prefix("~"), env.get("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => path.to_path_buf(),
    }
}
