//! Shared folders in PostgreSQL (see `store::folders`): a document is a row of `documents`, keyed
//! by folder and name, and a folder's lock is its row in `folders`, locked `FOR UPDATE` by the
//! transaction that makes the change: the change commits whole or not at all, and a replica that
//! dies mid-change loses its connection, its transaction and its lock together. The cron tick's
//! no-wait lock is a session advisory lock (`pg_try_advisory_lock`) on a connection taken out of
//! the pool for as long as it is held, so closing that connection is what releases it.
//!
//! The folder's callers are synchronous; each call waits for its statements on the runtime the
//! store was opened on (`block_in_place` on a worker thread of a multi-threaded runtime, a plain
//! `block_on` on a thread of its own such as `spawn_blocking`'s).

use super::PostgresStore;
use crate::store::StoreError;
use crate::store::clock::now_ms;
use crate::store::folders::{Folder, FolderKind, FolderLock, Held, LockWait, Revision, SharedFolders};
use deadpool_postgres::Object;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::runtime::{Handle, RuntimeFlavor};

/// SQLSTATE `lock_not_available`: `lock_timeout` ran out.
const LOCK_NOT_AVAILABLE: &str = "55P03";

impl SharedFolders for PostgresStore {
    fn shared_folder(&self, kind: FolderKind) -> Option<Arc<dyn Folder>> {
        Some(Arc::new(PostgresFolder { store: self.clone(), folder: kind.name() }))
    }
}

struct PostgresFolder {
    store: PostgresStore,
    folder: &'static str,
}

impl std::fmt::Debug for PostgresFolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PostgresFolder({}/{})", self.store.database(), self.folder)
    }
}

impl PostgresFolder {
    /// Wait for `work` on the store's runtime from synchronous code.
    fn wait<T>(&self, work: impl Future<Output = Result<T, StoreError>>) -> io::Result<T> {
        let handle = self.store.runtime();
        let result = match Handle::try_current() {
            // On a worker of a multi-threaded runtime the worker is handed over first, so the
            // runtime keeps running the connections this waits for.
            Ok(current) if current.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(|| handle.block_on(work)),
            _ => handle.block_on(work),
        };
        result.map_err(|e| match &e {
            StoreError::Postgres(pg) if pg.code().is_some_and(|c| c.code() == LOCK_NOT_AVAILABLE) => {
                io::Error::new(io::ErrorKind::TimedOut, format!("another replica held the {} folder's lock too long", self.folder))
            }
            _ => io::Error::other(e.to_string()),
        })
    }
}

impl Folder for PostgresFolder {
    fn locate(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("{} (PostgreSQL) {}/{name}", self.store.database(), self.folder))
    }

    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        self.wait(async {
            let client = self.store.client().await?;
            read_body(&client, self.folder, name).await
        })
    }

    fn revision(&self, name: &str) -> io::Result<Option<Revision>> {
        self.wait(async {
            let client = self.store.client().await?;
            let statement = client.prepare_cached("SELECT revision FROM documents WHERE folder = $1 AND name = $2").await?;
            let row = client.query_opt(&statement, &[&self.folder, &name]).await?;
            Ok(row.map(|row| row.try_get::<_, i64>(0)).transpose()?.map(|r| Revision([r, 0, 0, 0])))
        })
    }

    fn names(&self) -> io::Result<Vec<String>> {
        self.wait(async {
            let client = self.store.client().await?;
            let statement = client.prepare_cached("SELECT name FROM documents WHERE folder = $1 ORDER BY name").await?;
            Ok(client.query(&statement, &[&self.folder]).await?.iter().map(|row| row.try_get(0)).collect::<Result<_, _>>()?)
        })
    }

    fn lock(&self, wait: LockWait) -> io::Result<Box<dyn FolderLock + '_>> {
        let client = self.wait(async {
            let client = self.store.client().await?;
            client.execute("INSERT INTO folders (folder) VALUES ($1) ON CONFLICT DO NOTHING", &[&self.folder]).await?;
            client.batch_execute("BEGIN").await?;
            let mut locked = Transaction { client: Some(client) };
            let client = locked.client()?;
            if let LockWait::AtMost(wait) = wait {
                // At least a millisecond: 0 would mean no limit.
                client.batch_execute(&format!("SET LOCAL lock_timeout = {}", wait.as_millis().max(1))).await?;
            }
            client.execute("SELECT folder FROM folders WHERE folder = $1 FOR UPDATE", &[&self.folder]).await?;
            Ok(locked)
        })?;
        Ok(Box::new(PostgresLock { folder: self, transaction: client }))
    }

    fn try_hold(&self, name: &str) -> io::Result<Option<Held>> {
        self.wait(async {
            let client = self.store.client().await?;
            // Keyed by schema too: databases shared by several deployments (one per schema) do
            // not share a tick.
            let held: bool = client
                .query_one(
                    "SELECT pg_try_advisory_lock(hashtextextended(current_schema() || '/' || $1 || '/' || $2, 0))",
                    &[&self.folder, &name],
                )
                .await?
                .try_get(0)?;
            Ok(held.then(|| Held::new(Detached(Some(client)))))
        })
    }
}

/// A pooled connection in a transaction. Dropped before commit, the connection is closed rather
/// than pooled: the server then rolls the transaction back and frees its locks.
struct Transaction {
    client: Option<Object>,
}

impl Transaction {
    fn client(&mut self) -> Result<&Object, StoreError> {
        self.client.as_ref().ok_or(StoreError::Closed)
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            drop(Object::take(client));
        }
    }
}

struct PostgresLock<'a> {
    folder: &'a PostgresFolder,
    transaction: Transaction,
}

impl FolderLock for PostgresLock<'_> {
    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>> {
        let client = self.transaction.client().map_err(|e| io::Error::other(e.to_string()))?;
        self.folder.wait(read_body(client, self.folder.folder, name))
    }

    fn write(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let client = self.transaction.client().map_err(|e| io::Error::other(e.to_string()))?;
        let folder = self.folder.folder;
        self.folder.wait(async move {
            let statement = client
                .prepare_cached(
                    "INSERT INTO documents (folder, name, body, revision, updated_at) VALUES ($1, $2, $3, nextval('document_revisions'), $4)
                     ON CONFLICT (folder, name) DO UPDATE SET body = excluded.body, revision = excluded.revision, updated_at = excluded.updated_at",
                )
                .await?;
            client.execute(&statement, &[&folder, &name, &bytes, &now_ms()]).await?;
            Ok(())
        })
    }

    fn commit(mut self: Box<Self>) -> io::Result<()> {
        let client = self.transaction.client.take().ok_or_else(|| io::Error::other("the change was already ended"))?;
        let committed = self.folder.wait(async { Ok(client.batch_execute("COMMIT").await?) });
        if committed.is_err() {
            // Whatever state the session is in, it is not reused.
            drop(Object::take(client));
        }
        committed
    }
}

/// A connection out of the pool for good; dropping it closes it (releasing its session locks).
struct Detached(Option<Object>);

impl Drop for Detached {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(Object::take(client));
        }
    }
}

async fn read_body(client: &Object, folder: &str, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
    let statement = client.prepare_cached("SELECT body FROM documents WHERE folder = $1 AND name = $2").await?;
    Ok(client.query_opt(&statement, &[&folder, &name]).await?.map(|row| row.try_get(0)).transpose()?)
}
