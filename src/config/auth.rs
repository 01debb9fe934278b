//! Who may talk to the bot, as far as configuration decides (reference §4.1 steps 5, 8 and 9):
//! per-platform allowlists and allow-all flags from `platforms.<p>` or `<PLATFORM>_ALLOWED_USERS`
//! / `<PLATFORM>_ALLOW_ALL_USERS`, and the global `gateway.allowed_users` /
//! `gateway.allow_all_users` (`GATEWAY_ALLOWED_USERS` / `GATEWAY_ALLOW_ALL_USERS`). Pairing
//! approvals are a separate, runtime source and are not considered here.

use super::de::split_list;
use super::env::Env;
use super::error::ConfigError;
use super::overrides::parse_bool;
use super::schema::Config;
use std::collections::BTreeMap;

const ALLOWED_SUFFIX: &str = "_ALLOWED_USERS";
const ALLOW_ALL_SUFFIX: &str = "_ALLOW_ALL_USERS";
const ADMIN_SUFFIX: &str = "_ADMIN_USERS";
/// The prefix of the global variables, which are applied to `gateway.*` instead.
const GLOBAL_PREFIX: &str = "GATEWAY";

/// Per-platform authorisation from the environment, keyed by lower-case platform name. Kept apart
/// from `platforms` because the variables may name platforms that have no block in the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct EnvAuth {
    allowed: BTreeMap<String, Vec<String>>,
    allow_all: BTreeMap<String, bool>,
    admins: BTreeMap<String, Vec<String>>,
}

impl EnvAuth {
    /// Collects every `<PLATFORM>_ALLOWED_USERS` and `<PLATFORM>_ALLOW_ALL_USERS` variable.
    /// (`TELEGRAM_GROUP_ALLOWED_USERS` lands under `telegram_group`, which is how the group-only
    /// list can be asked for.)
    pub(crate) fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let mut auth = Self::default();
        for (name, value) in env.iter() {
            if let Some(platform) = platform_of(name, ALLOWED_SUFFIX) {
                auth.allowed.insert(platform, split_list(value));
            } else if let Some(platform) = platform_of(name, ALLOW_ALL_SUFFIX) {
                auth.allow_all.insert(platform, parse_bool(name, value)?);
            } else if let Some(platform) = platform_of(name, ADMIN_SUFFIX) {
                auth.admins.insert(platform, split_list(value));
            }
        }
        Ok(auth)
    }
}

fn platform_of(name: &str, suffix: &str) -> Option<String> {
    let prefix = name.strip_suffix(suffix)?;
    (!prefix.is_empty() && prefix != GLOBAL_PREFIX).then(|| prefix.to_ascii_lowercase())
}

impl Config {
    /// The users allowed on `platform`: its own list (the environment variable replaces the file
    /// list, as Hermes bridges YAML into the environment only when unset) followed by the global
    /// list, without duplicates. `*` is kept as is and means anyone; matching is the caller's job.
    pub fn allowed_users(&self, platform: &str) -> Vec<String> {
        let platform = platform.to_ascii_lowercase();
        let own = match self.env_auth.allowed.get(&platform) {
            Some(list) => list.as_slice(),
            None => self.platforms.get(&platform).map(|p| p.allowed_users.as_slice()).unwrap_or_default(),
        };
        let mut out: Vec<String> = Vec::new();
        for user in own.iter().chain(&self.gateway.allowed_users) {
            if !out.contains(user) {
                out.push(user.clone());
            }
        }
        out
    }

    /// The platform's own allowlist (the global one left out) and the key it was read from
    /// (`<PLATFORM>_ALLOWED_USERS` or `platforms.<platform>.allowed_users`), for start-up checks
    /// that name the key to fix.
    pub fn platform_allowlist(&self, platform: &str) -> (String, &[String]) {
        let platform = platform.to_ascii_lowercase();
        match self.env_auth.allowed.get(&platform) {
            Some(list) => (format!("{}{ALLOWED_SUFFIX}", platform.to_ascii_uppercase()), list.as_slice()),
            None => (
                format!("platforms.{platform}.allowed_users"),
                self.platforms.get(&platform).map(|p| p.allowed_users.as_slice()).unwrap_or_default(),
            ),
        }
    }

    /// Whether everyone may use `platform`: its allow-all flag (environment over file), or the
    /// global flag when no allowlist applies to the platform. As in Hermes, a configured
    /// allowlist takes precedence over `GATEWAY_ALLOW_ALL_USERS`.
    pub fn allow_all(&self, platform: &str) -> bool {
        let platform = platform.to_ascii_lowercase();
        let own = match self.env_auth.allow_all.get(&platform) {
            Some(flag) => *flag,
            None => self.platforms.get(&platform).is_some_and(|p| p.allow_all_users),
        };
        own || (self.gateway.allow_all_users && self.allowed_users(&platform).is_empty())
    }

    /// The admins of `platform`: its own list (the environment variable replaces the file list)
    /// followed by `gateway.admin_users`, without duplicates.
    pub fn admin_users(&self, platform: &str) -> Vec<String> {
        let platform = platform.to_ascii_lowercase();
        let own = match self.env_auth.admins.get(&platform) {
            Some(list) => list.as_slice(),
            None => self.platforms.get(&platform).map(|p| p.admin_users.as_slice()).unwrap_or_default(),
        };
        let mut out: Vec<String> = Vec::new();
        for user in own.iter().chain(&self.gateway.admin_users) {
            if !out.contains(user) {
                out.push(user.clone());
            }
        }
        out
    }

    /// Whether any admin is named anywhere; without one, every allowed user is an admin.
    pub fn admins_named(&self) -> bool {
        !self.gateway.admin_users.is_empty()
            || self.env_auth.admins.values().any(|l| !l.is_empty())
            || self.platforms.others.values().any(|p| !p.admin_users.is_empty())
    }

    /// True when nobody may act as an admin: none is named, and no allowlist names a user (an
    /// allow-all switch, `*` and pairing name nobody, so they make no admins).
    pub fn no_admin_exists(&self) -> bool {
        let names = |list: &[String]| list.iter().any(|u| u.trim() != "*" && !u.trim().is_empty());
        let named_in_file =
            self.platforms.others.iter().any(|(name, p)| !self.env_auth.allowed.contains_key(name) && names(&p.allowed_users));
        !self.admins_named() && !names(&self.gateway.allowed_users) && !self.env_auth.allowed.values().any(|l| names(l)) && !named_in_file
    }

    /// True when configuration authorises no one anywhere: no allowlist and no allow-all flag,
    /// global or per platform. The gateway then denies everyone except paired users and should
    /// say so at start-up.
    pub fn nothing_allowed(&self) -> bool {
        let global = !self.gateway.allowed_users.is_empty() || self.gateway.allow_all_users;
        let from_env = self.env_auth.allowed.values().any(|list| !list.is_empty()) || self.env_auth.allow_all.values().any(|flag| *flag);
        // A file value counts only where no environment variable replaced it.
        let from_file = self.platforms.others.iter().any(|(name, p)| {
            (!self.env_auth.allowed.contains_key(name) && !p.allowed_users.is_empty())
                || (!self.env_auth.allow_all.contains_key(name) && p.allow_all_users)
        });
        !(global || from_env || from_file)
    }
}
