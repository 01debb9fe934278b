//! The PostgreSQL backend: every store trait against a database that several hermes replicas
//! share. The only code besides `store::sqlite` that speaks SQL.
//!
//! Concurrency model: a pool of connections (deadpool-postgres); each trait call takes one, and a
//! call that writes more than one row does it in one transaction, so "accepted" means committed,
//! as with SQLite. Where SQLite's single writer made a read-then-write atomic, the statements
//! here are written to be atomic on their own (`INSERT … ON CONFLICT`, conditional `UPDATE`s,
//! row locks with `FOR UPDATE`), because other replicas write at the same time.
//!
//! TLS to the server is rustls with the process's ring provider, the server's certificate checked
//! by the platform verifier as every HTTPS peer is; `sslmode` in the URL says whether it is used.

mod agent_state;
mod approvals;
mod claims;
mod copy;
mod folders;
mod inbox;
mod leases;
mod messages;
mod outbox;
mod routes;
mod schema;
mod turns;
mod usage;
mod wakeups;

#[cfg(test)]
pub(crate) mod tests;

pub use copy::{CopiedTable, copy_sqlite_into};

use super::StoreError;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How the store reaches its database (`store.postgres` in config.yaml, or `DATABASE_URL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// `postgres://user:password@host:port/database?sslmode=…`; a secret, never logged.
    pub url: String,
    /// Connections open at once, at most.
    pub pool_size: usize,
}

/// The PostgreSQL store; a cheap-to-clone handle (clones share the pool).
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    /// How to open a connection of its own, outside the pool (the inbox's LISTEN).
    config: tokio_postgres::Config,
    /// Where the database is, without credentials: what errors and logs may name.
    database: String,
    /// The runtime the pool's connections run on, which synchronous callers wait on.
    runtime: tokio::runtime::Handle,
}

impl PostgresStore {
    /// Connect to the database `options.url` names and bring its schema up to date; fails when
    /// it cannot be reached, refuses the credentials, or was written by a newer hermes.
    pub async fn connect(options: &PostgresOptions) -> Result<PostgresStore, StoreError> {
        let config: tokio_postgres::Config =
            options.url.parse().map_err(|e: tokio_postgres::Error| StoreError::BadDatabaseUrl(e.to_string()))?;
        let database = describe(&config);
        let manager = Manager::from_config(config.clone(), tls()?, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .build()
            .map_err(|e| StoreError::Unreachable { database: database.clone(), reason: e.to_string() })?;
        let store = PostgresStore { inner: Arc::new(Inner { pool, config, database, runtime: tokio::runtime::Handle::current() }) };
        let mut client = store.client().await?;
        schema::migrate(&mut client, &store.inner.database).await?;
        Ok(store)
    }

    /// Where the database is, without credentials.
    pub fn database(&self) -> &str {
        &self.inner.database
    }

    /// The runtime the store was opened on.
    fn runtime(&self) -> &tokio::runtime::Handle {
        &self.inner.runtime
    }

    /// A connection from the pool (opened when none is idle).
    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.inner.pool.get().await.map_err(|e| StoreError::Unreachable { database: self.inner.database.clone(), reason: pool_error(e) })
    }
}

/// `user@host:port/database` for a URL, never its password (or a note that it does not parse).
pub(crate) fn describe_url(url: &str) -> String {
    url.parse::<tokio_postgres::Config>().map_or_else(|_| "(an invalid PostgreSQL URL)".to_string(), |config| describe(&config))
}

/// `user@host:port/database`, never the password.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        Some(tokio_postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("(default user)");
    let dbname = config.get_dbname().unwrap_or(user);
    format!("{user}@{host}:{port}/{dbname}")
}

/// Why the pool gave no connection, in words; a backend error carries the server's own message.
fn pool_error(error: deadpool_postgres::PoolError) -> String {
    match error {
        deadpool_postgres::PoolError::Backend(e) => e.to_string(),
        other => other.to_string(),
    }
}

/// The TLS connector: rustls over the process's ring provider, checking the server's certificate
/// with the platform's verifier.
fn tls() -> Result<MakeRustlsConnect, StoreError> {
    use rustls_platform_verifier::ConfigVerifierExt;
    crate::tls::install_process_crypto_provider();
    let config =
        rustls::ClientConfig::with_platform_verifier().map_err(|e| StoreError::BadDatabaseUrl(format!("cannot set up TLS: {e}")))?;
    Ok(MakeRustlsConnect::new(config))
}
