//! `hermes store migrate --to postgres`: copy this home's SQLite store (sessions and their
//! messages, routes, the inbox, the outbox with its dead letters, usage, claims, approvals) into
//! the PostgreSQL database `store.postgres.url` or `DATABASE_URL` names. Idempotent: rows already
//! there are kept, so it can run again to bring over what arrived since. The URL is never taken
//! on the command line, where shell history and `ps` would keep its password. Exit 0 when
//! copied, 1 when the copy failed (nothing of it is kept), 78 on a bad configuration.

use super::{Cli, config_failure, report, resolve};
#[cfg(feature = "postgres")]
use crate::config::DATABASE_URL_VAR;
use crate::config::{Config, Home};
use crate::store::StoreError;
use clap::{Subcommand, ValueEnum};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy this home's SQLite store into PostgreSQL (`store.postgres.url` or DATABASE_URL).
    /// Stop the gateway first, or run it again after, to copy what arrived meanwhile.
    Migrate {
        /// The backend to copy into.
        #[arg(long, value_enum)]
        to: Target,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Target {
    Postgres,
}

/// Why the migration did not run or failed (printed after "hermes: ", exit 1).
#[derive(Debug, thiserror::Error)]
enum StoreCliError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[cfg(feature = "postgres")]
    #[error("no SQLite store at {path}: there is nothing to copy (a gateway creates it at its first start)")]
    NoSqliteStore { path: String },
    #[cfg(feature = "postgres")]
    #[error(
        "no PostgreSQL database to copy into: set {DATABASE_URL_VAR} or store.postgres.url to postgres://USER:PASSWORD@HOST:PORT/DATABASE"
    )]
    NoTarget,
    #[cfg(not(feature = "postgres"))]
    #[error("this hermes was built without PostgreSQL (the `postgres` feature)")]
    NotBuilt,
    /// The cron jobs or pairing documents could not be copied (the tables were).
    #[cfg(feature = "postgres")]
    #[error("{0}")]
    Folders(String),
}

pub(super) fn run(cli: &Cli, command: &StoreCommand) -> ExitCode {
    let resolved = match resolve(cli) {
        Ok(r) => r,
        Err(e) => return config_failure(&e),
    };
    let runtime = match super::command_runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let StoreCommand::Migrate { to: Target::Postgres } = command;
    report(runtime.block_on(migrate_to_postgres(&resolved.loaded.config, &resolved.home)))
}

#[cfg(feature = "postgres")]
async fn migrate_to_postgres(config: &Config, home: &Home) -> Result<String, StoreCliError> {
    use crate::store::{PostgresOptions, PostgresStore, SqliteStore, copy_sqlite_into};
    let path = crate::store::state_db(home);
    if !path.is_file() {
        return Err(StoreCliError::NoSqliteStore { path: path.display().to_string() });
    }
    let url = config
        .store
        .postgres
        .url
        .as_ref()
        .map(|u| u.expose().trim().to_string())
        .filter(|u| !u.is_empty())
        .ok_or(StoreCliError::NoTarget)?;
    let target = PostgresStore::connect(&PostgresOptions {
        url,
        pool_size: config.store.postgres.pool_size.unwrap_or(crate::config::DEFAULT_POOL_SIZE),
    })
    .await?;
    let source = SqliteStore::open(&path).await?;
    let copied = copy_sqlite_into(&source, &target).await?;
    let mut lines = vec![format!("Copied {} into PostgreSQL at {}:", path.display(), target.database())];
    for table in &copied {
        let already = table.read - table.copied;
        lines.push(format!("  {:<10} {:>7} rows, {:>7} copied, {:>7} already there", table.table, table.read, table.copied, already));
    }
    // The folders are synchronous: they wait on this runtime from a blocking thread.
    let (folder_home, folder_target) = (home.clone(), target.clone());
    let documents = tokio::task::spawn_blocking(move || crate::gateway::folders::copy_home_folders(&folder_home, &folder_target))
        .await
        .map_err(|e| StoreCliError::Folders(e.to_string()))?
        .map_err(|e| StoreCliError::Folders(e.to_string()))?;
    for document in &documents {
        let what = if document.copied { "copied" } else { "already there" };
        lines.push(format!("  {}/{}: {what}", document.folder, document.name));
    }
    let using = config.store.backend() == crate::config::StoreBackendName::Postgres;
    lines.push(if using {
        "The gateway is configured for PostgreSQL: (re)start it to use the copy.".to_string()
    } else {
        format!("To use it, set `store.backend: postgres` (or {DATABASE_URL_VAR}) and restart the gateway.")
    });
    Ok(lines.join("\n"))
}

#[cfg(not(feature = "postgres"))]
async fn migrate_to_postgres(_config: &Config, _home: &Home) -> Result<String, StoreCliError> {
    Err(StoreCliError::NotBuilt)
}
