//! `store:`: where the gateway keeps its sessions, inbox, outbox, approvals and usage. SQLite in
//! the home is the default, for one machine; PostgreSQL is for several replicas sharing one
//! database (`store.backend: postgres` with `store.postgres.url`, or `DATABASE_URL`).

use super::env::Env;
use super::error::ConfigError;
use super::secret::{self, Secret};
use serde::{Deserialize, Serialize};

/// The variable a PostgreSQL URL may come from, as most hosting platforms set it.
pub const DATABASE_URL_VAR: &str = "DATABASE_URL";
/// A connection lease's lifetime when none is configured.
pub const DEFAULT_LEASE_TTL_SECS: u64 = 15;
/// The shortest lease: renewals go every third of it, and a store round trip must fit.
const MIN_LEASE_TTL_SECS: u64 = 3;
/// Pooled connections per replica when none is configured.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// Which backend holds the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackendName {
    #[default]
    Sqlite,
    Postgres,
}

/// `store:` in config.yaml.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `None` when the file does not say: SQLite, unless `DATABASE_URL` names a PostgreSQL.
    pub backend: Option<StoreBackendName>,
    pub postgres: PostgresConfig,
    /// With a shared store, how long a replica's hold on a platform connection lasts without
    /// renewal: how soon a standby takes over from a replica that died. [`DEFAULT_LEASE_TTL_SECS`]
    /// when unset.
    pub lease_ttl_seconds: Option<u64>,
    /// This replica's name in leases and status; host name, process id and a random part when
    /// unset (two replicas must never share one).
    pub replica: Option<String>,
}

/// `store.postgres:`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PostgresConfig {
    /// `postgres://USER:PASSWORD@HOST:PORT/DATABASE`; a secret (it carries the password).
    #[serde(deserialize_with = "secret::optional")]
    pub url: Option<Secret>,
    /// Connections this replica keeps open at most; [`DEFAULT_POOL_SIZE`] when unset.
    pub pool_size: Option<usize>,
}

impl StoreConfig {
    /// `DATABASE_URL` replaces the file's URL, as every variable wins over the file; when the file
    /// names no backend, a PostgreSQL URL there selects PostgreSQL. A URL of another database
    /// (the variable is shared with other software) is left alone unless PostgreSQL is chosen,
    /// where [`Self::check`] then names it.
    pub(crate) fn apply_env(&mut self, env: &Env) {
        let Some(url) = env.get(DATABASE_URL_VAR).map(str::trim).filter(|u| !u.is_empty()) else { return };
        let postgres = is_postgres_url(url);
        if self.backend.is_none() && postgres {
            self.backend = Some(StoreBackendName::Postgres);
        }
        if postgres || self.backend == Some(StoreBackendName::Postgres) {
            self.postgres.url = Some(Secret::new(url));
        }
    }

    /// The backend in use.
    pub fn backend(&self) -> StoreBackendName {
        self.backend.unwrap_or_default()
    }

    /// Whether replicas of this gateway may share the store (PostgreSQL): its platforms are
    /// then leased, and served only under a tenure.
    pub fn shared_by_replicas(&self) -> bool {
        self.backend() == StoreBackendName::Postgres
    }

    /// The first problem, naming its key: PostgreSQL chosen without a URL, a URL of another
    /// database, a pool of no connections, or PostgreSQL in a build without it.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if self.backend() != StoreBackendName::Postgres {
            return Ok(());
        }
        if !cfg!(feature = "postgres") {
            return Err(ConfigError::invalid(
                "store.backend",
                "this hermes was built without PostgreSQL (the `postgres` feature); use `sqlite` or a build with it",
            ));
        }
        match self.postgres.url.as_ref().map(|u| u.expose().trim()).filter(|u| !u.is_empty()) {
            None => {
                return Err(ConfigError::invalid(
                    "store.postgres.url",
                    format!(
                        "store.backend is postgres but no URL is set; set store.postgres.url or {DATABASE_URL_VAR} to postgres://USER:PASSWORD@HOST:PORT/DATABASE"
                    ),
                ));
            }
            Some(url) if !is_postgres_url(url) => {
                return Err(ConfigError::invalid(
                    "store.postgres.url",
                    format!("expected a URL starting with postgres:// or postgresql://, found one starting with {:?}", scheme_of(url)),
                ));
            }
            Some(_) => {}
        }
        if let Some(ttl) = self.lease_ttl_seconds
            && ttl < MIN_LEASE_TTL_SECS
        {
            return Err(ConfigError::invalid(
                "store.lease_ttl_seconds",
                format!("expected at least {MIN_LEASE_TTL_SECS} seconds (default {DEFAULT_LEASE_TTL_SECS}), found {ttl}"),
            ));
        }
        if self.replica.as_deref().is_some_and(|name| name.trim().is_empty() || name.len() > 200) {
            return Err(ConfigError::invalid("store.replica", "expected a name of 1-200 characters, or leave it unset"));
        }
        if self.postgres.pool_size == Some(0) {
            return Err(ConfigError::invalid(
                "store.postgres.pool_size",
                format!("expected at least 1 (default {DEFAULT_POOL_SIZE}), found 0"),
            ));
        }
        Ok(())
    }

    /// The URL and the password inside it, for the log redactor.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let Some(url) = self.postgres.url.as_ref().map(|u| u.expose()).filter(|u| !u.is_empty()) else { return Vec::new() };
        let mut out = vec![url.to_string()];
        out.extend(password_in(url).filter(|p| !p.is_empty()).map(str::to_string));
        out
    }
}

fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// What comes before `://` (never the rest, which may hold a password).
fn scheme_of(url: &str) -> &str {
    url.split_once("://").map_or("", |(scheme, _)| scheme)
}

/// The password of `scheme://user:password@host…`, if the URL carries one.
fn password_in(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let userinfo = authority.rsplit_once('@')?.0;
    Some(userinfo.split_once(':')?.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        Env::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn a_postgres_database_url_selects_postgres_unless_the_file_says_sqlite() {
        let mut chosen = StoreConfig::default();
        chosen.apply_env(&env(&[(DATABASE_URL_VAR, "postgres://h:pw@db:5432/hermes")]));
        assert_eq!(chosen.backend(), StoreBackendName::Postgres);
        assert!(chosen.check().is_ok());

        let mut kept = StoreConfig { backend: Some(StoreBackendName::Sqlite), ..Default::default() };
        kept.apply_env(&env(&[(DATABASE_URL_VAR, "postgres://h:pw@db:5432/hermes")]));
        assert_eq!(kept.backend(), StoreBackendName::Sqlite);
    }

    #[test]
    fn another_databases_url_is_ignored_for_sqlite_and_named_for_postgres() {
        let mut other = StoreConfig::default();
        other.apply_env(&env(&[(DATABASE_URL_VAR, "mysql://app:pw@db/app")]));
        assert_eq!(other.backend(), StoreBackendName::Sqlite);
        assert!(other.postgres.url.is_none());

        let mut wrong = StoreConfig { backend: Some(StoreBackendName::Postgres), ..Default::default() };
        wrong.apply_env(&env(&[(DATABASE_URL_VAR, "mysql://app:Sekr1t@db/app")]));
        let error = wrong.check().unwrap_err().to_string();
        assert!(error.contains("store.postgres.url") && error.contains("\"mysql\""), "{error}");
        assert!(!error.contains("Sekr1t"), "the error never shows the password: {error}");
    }

    #[test]
    fn postgres_without_a_url_or_with_an_empty_pool_is_refused_by_key() {
        let bare = StoreConfig { backend: Some(StoreBackendName::Postgres), ..Default::default() };
        assert!(bare.check().unwrap_err().to_string().contains("store.postgres.url"));
        let empty = StoreConfig {
            backend: Some(StoreBackendName::Postgres),
            postgres: PostgresConfig { url: Some(Secret::new("postgres://db/h")), pool_size: Some(0) },
            ..Default::default()
        };
        assert!(empty.check().unwrap_err().to_string().contains("store.postgres.pool_size"));
    }

    #[test]
    fn a_lease_too_short_to_renew_is_refused_by_key() {
        let short = StoreConfig {
            backend: Some(StoreBackendName::Postgres),
            postgres: PostgresConfig { url: Some(Secret::new("postgres://db/h")), pool_size: None },
            lease_ttl_seconds: Some(1),
            ..Default::default()
        };
        let error = short.check().unwrap_err().to_string();
        assert!(error.contains("store.lease_ttl_seconds") && error.contains("at least 3"), "{error}");
    }

    #[test]
    fn the_password_inside_the_url_is_a_secret_of_its_own() {
        let config = StoreConfig {
            backend: Some(StoreBackendName::Postgres),
            postgres: PostgresConfig {
                url: Some(Secret::new("postgresql://hermes:p%40ss-Word@db:5432/h?sslmode=require")),
                pool_size: None,
            },
            ..Default::default()
        };
        assert_eq!(config.secrets(), ["postgresql://hermes:p%40ss-Word@db:5432/h?sslmode=require", "p%40ss-Word"]);
    }
}
