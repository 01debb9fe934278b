//! The SQLite backend at `HERMES_HOME/state.db`: every store trait, with messages searched
//! through FTS5 and trigram indexes, and claims in their own table. The only code that speaks
//! SQL.
//!
//! Concurrency model: one writer thread owns the only write connection and batches every queued
//! write into one transaction (each write in its own SAVEPOINT, so one failing write never undoes
//! another); a caller hears back only after the batch committed, so "accepted" always means
//! "on disk". Reads go to a small pool of read-only connections on the blocking thread pool; WAL
//! mode lets them run while the writer commits.

mod agent_state;
mod approvals;
mod claims;
mod inbox;
mod leases;
mod messages;
mod outbox;
mod routes;
mod schema;
pub use schema::state_db;
mod turns;
mod usage;
mod wakeups;
mod writer;

#[cfg(test)]
mod tests;

use super::StoreError;
use super::clock::{now_ms, to_time};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use writer::Writer;

/// How much memory the store's connections may hold (`gateway.memory.sqlite_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqliteLimits {
    /// Page cache per connection, in KiB (SQLite's `cache_size`; its own default is 2000).
    pub cache_kib: u64,
    /// Read connections open at once; each keeps its own page cache and statement cache.
    pub read_connections: usize,
}

impl Default for SqliteLimits {
    fn default() -> Self {
        Self { cache_kib: 1024, read_connections: 4 }
    }
}
/// Prepared statements kept per connection: every statement the store runs fits.
const STATEMENT_CACHE: usize = 96;
/// How long a connection waits for a lock held by another process (e.g. `hermes doctor`).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The SQLite store; a cheap-to-clone handle (clones share the writer and the read pool).
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writer: Writer,
    readers: Mutex<Vec<Connection>>,
    read_slots: Semaphore,
    limits: SqliteLimits,
}

impl SqliteStore {
    /// Open (creating and migrating when needed) the store at `path`, with the default limits.
    pub async fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        Self::open_with(path, SqliteLimits::default()).await
    }

    /// Open the store at `path`, its connections' memory bounded by `limits`.
    pub async fn open_with(path: &Path, limits: SqliteLimits) -> Result<SqliteStore, StoreError> {
        let path = path.to_path_buf();
        let opened = tokio::task::spawn_blocking({
            let path = path.clone();
            move || -> Result<Connection, StoreError> {
                let mut conn = open_connection(&path, false, limits.cache_kib)?;
                schema::migrate(&mut conn, &path)?;
                Ok(conn)
            }
        })
        .await
        .map_err(|_| StoreError::Closed)??;
        let writer = Writer::spawn(opened)?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                writer,
                readers: Mutex::new(Vec::new()),
                read_slots: Semaphore::new(limits.read_connections.max(1)),
                limits,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Run `op` inside the next write batch and return its result once the batch committed.
    async fn write<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.inner.writer.run(op).await
    }

    /// Every row `sql` selects, each of its `width` columns turned into a `T` by `convert`: the
    /// raw rows a copy into another backend reads (`hermes store migrate`).
    #[cfg(feature = "postgres")]
    pub(crate) async fn read_rows<T: Send + 'static>(
        &self,
        sql: String,
        width: usize,
        convert: fn(rusqlite::types::ValueRef<'_>) -> T,
    ) -> Result<Vec<Vec<T>>, StoreError> {
        self.read(move |c| {
            let mut statement = c.prepare(&sql)?;
            let rows =
                statement.query_map([], |row| (0..width).map(|i| row.get_ref(i).map(convert)).collect::<rusqlite::Result<Vec<T>>>())?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    /// Run `op` on a read connection from the pool.
    async fn read<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let _slot = self.inner.read_slots.acquire().await.map_err(|_| StoreError::Closed)?;
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let pooled = inner.readers.lock().map_err(|_| StoreError::Closed)?.pop();
            let conn = match pooled {
                Some(c) => c,
                None => open_connection(&inner.path, true, inner.limits.cache_kib)?,
            };
            let result = op(&conn);
            if let Ok(mut pool) = inner.readers.lock() {
                pool.push(conn);
            }
            result
        })
        .await
        .map_err(|_| StoreError::Closed)?
    }
}

fn open_connection(path: &Path, read_only: bool, cache_kib: u64) -> Result<Connection, StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI
    };
    let open_err = |source| StoreError::Open { path: path.to_path_buf(), source };
    if !read_only {
        // Every conversation is in here: create it owner-only whatever the umask (SQLite gives
        // the -wal and -shm files the database's mode). An existing file is left as it is, and
        // any other failure is reported by the open below.
        let _ = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path);
    }
    let conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
    if !read_only {
        // WAL lets readers run beside the writer; NORMAL sync is durable across process crashes
        // (the WAL is fsynced at checkpoints) and much faster than FULL.
        conn.pragma_update(None, "journal_mode", "WAL").map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(open_err)?;
    }
    conn.pragma_update(None, "foreign_keys", "ON").map_err(open_err)?;
    // A negative cache_size is KiB rather than pages: the bound holds whatever the page size.
    let cache_kib = i64::try_from(cache_kib).unwrap_or(i64::MAX);
    conn.pragma_update(None, "cache_size", -cache_kib).map_err(open_err)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// Statements through the connection's statement cache: each SQL text is parsed once per
/// connection instead of on every call (parsing was a tenth of the store's CPU per message).
trait CachedStatements {
    fn run<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;
    fn one<T, P, F>(&self, sql: &str, params: P, row: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>;
}

impl CachedStatements for Connection {
    fn run<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    fn one<T, P, F>(&self, sql: &str, params: P, row: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        self.prepare_cached(sql)?.query_row(params, row)
    }
}

/// SQLite keeps no shared folder: the cron jobs and the pairing files stay in HERMES_HOME, in
/// Hermes' own formats (`store::folders::FileFolder`).
impl crate::store::folders::SharedFolders for SqliteStore {
    fn shared_folder(&self, _kind: crate::store::folders::FolderKind) -> Option<std::sync::Arc<dyn crate::store::folders::Folder>> {
        None
    }
}
