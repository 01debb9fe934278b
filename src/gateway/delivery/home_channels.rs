//! Home channels: each platform's chat (and thread) where cron results and notifications go.
//! Read at start from `platforms.<name>.home_channel` and the thread variable the platform's
//! registration names ([`hermes_adapter::HomeVars`]); changed live by `/sethome`, which also
//! writes them to `.env` under the registration's own variable names (`TELEGRAM_HOME_CHANNEL`,
//! `MATRIX_HOME_ROOM`, `EMAIL_HOME_ADDRESS`, ...), so the home outlives a restart on every
//! platform. No variable name is ever composed from a platform's name.

use crate::config::{Config, PersistError};
use hermes_adapter::{ChatTarget, HomeVars};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, RwLock};

/// The live home channels, shared: `/sethome` changes them for every holder at once.
#[derive(Debug, Clone, Default)]
pub(crate) struct HomeChannels {
    homes: Arc<RwLock<HashMap<String, ChatTarget>>>,
    /// Where each platform with a home channel keeps it, from its registration.
    vars: Arc<HashMap<String, HomeVars>>,
}

/// Why `/sethome` could not make a chat the home.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetHomeError {
    /// The platform's registration declares no home channel (an API, a webhook).
    #[error("{0} has no home channel")]
    NoHome(String),
    /// `.env` could not be written; the old home stays.
    #[error(transparent)]
    Persist(#[from] PersistError),
}

impl HomeChannels {
    /// From the configuration: each configured platform's home, with the thread its
    /// registration's thread variable names (a thread written into the value itself wins).
    pub(crate) fn from_config(config: &Config) -> Self {
        let mut homes = HashMap::new();
        let mut vars = HashMap::new();
        for (name, block) in &config.platforms.others {
            if let Some(home) = block.facts.and_then(|f| f.home) {
                vars.insert(name.clone(), home);
            }
            let Some(chat) = block.home_channel.as_deref().map(str::trim).filter(|c| !c.is_empty()) else { continue };
            match ChatTarget::parse(&format!("{name}:{chat}")) {
                Ok(mut target) => {
                    if target.thread_id.is_none() {
                        target.thread_id = block.home_thread.clone();
                    }
                    homes.insert(name.clone(), target);
                }
                Err(e) => {
                    tracing::warn!(platform = %name, "the home channel {chat:?} is not a chat id ({e}); cron results for {name} have no home")
                }
            }
        }
        Self { homes: Arc::new(RwLock::new(homes)), vars: Arc::new(vars) }
    }

    /// The home of `platform`, if one is set.
    pub(crate) fn get(&self, platform: &str) -> Option<ChatTarget> {
        self.homes.read().unwrap_or_else(|p| p.into_inner()).get(platform).cloned()
    }

    /// Make `target` its platform's home: written to `env_file` under the registration's
    /// variables first (the thread variable cleared outside a thread), then in effect at once.
    pub(crate) fn set_and_save(&self, target: &ChatTarget, env_file: &Path) -> Result<(), SetHomeError> {
        let platform = target.platform.as_str();
        let vars = self.vars.get(platform).ok_or_else(|| SetHomeError::NoHome(platform.to_string()))?;
        // Where the platform keeps no thread, the home is the chat itself (what a restart reads).
        let mut home = target.clone();
        home.thread_id = vars.thread.and(home.thread_id);
        let mut writes = vec![(vars.channel, Some(home.chat_id.as_str()))];
        if let Some(thread_var) = vars.thread {
            writes.push((thread_var, home.thread_id.as_deref()));
        }
        crate::config::set_env_vars(env_file, &writes)?;
        self.homes.write().unwrap_or_else(|p| p.into_inner()).insert(platform.to_string(), home);
        Ok(())
    }

    /// Every home channel, by platform.
    pub(crate) fn targets(&self) -> BTreeMap<String, ChatTarget> {
        self.homes.read().unwrap_or_else(|p| p.into_inner()).iter().map(|(p, t)| (p.clone(), t.clone())).collect()
    }
}
