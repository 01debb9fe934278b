//! Folders of small documents that several processes change under one lock: the cron jobs
//! (`jobs.json`, the tick and its wake-up) and the pairing files. A caller reads and writes whole
//! documents by name; what a folder is depends on where the store is:
//!
//! - with SQLite, a directory in HERMES_HOME ([`FileFolder`]): the files keep Hermes' own formats,
//!   so the CLI, Hermes itself and a hand editor share them, and the lock is a lock file;
//! - with PostgreSQL, rows of one table that every replica shares (`store::postgres`), and the
//!   lock a row lock held by one transaction, so a change is all-or-nothing across replicas.
//!
//! The callers are synchronous (they decide under the lock, then write): async code calls them
//! from `spawn_blocking`. Errors are `io::Error`s and [`Folder::locate`] names the document, so a
//! caller's messages read the same whichever folder it was given.

mod files;
#[cfg(test)]
pub(crate) mod suite;
#[cfg(test)]
mod tests;

pub use files::FileFolder;

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The folders the gateway keeps shared when its store is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FolderKind {
    /// `cron/`: `jobs.json`, the tick lock and the tick request.
    Cron,
    /// `platforms/pairing/`: pending codes, approved users, rate limits.
    Pairing,
}

impl FolderKind {
    pub fn name(self) -> &'static str {
        match self {
            FolderKind::Cron => "cron",
            FolderKind::Pairing => "pairing",
        }
    }
}

/// A value that changes whenever a document is written (for caches and watchers); opaque.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revision(pub(crate) [i64; 4]);

/// How long [`Folder::lock`] waits for another holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockWait {
    /// Until it is had: a short change by the CLI or another replica.
    Forever,
    /// At most this long. A file folder then goes on without the lock file (a wedged process
    /// must not stop the scheduler; Hermes does the same); a shared folder fails instead, since
    /// its lock dies with the holder's connection and waiting longer means the store is busy.
    AtMost(Duration),
}

/// One folder of documents.
pub trait Folder: Send + Sync + fmt::Debug {
    /// Where document `name` is, for messages: its path, or the database and name.
    fn locate(&self, name: &str) -> PathBuf;

    /// The document's bytes; `None` when there is none. Never half of a write.
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>>;

    /// The document's revision; `None` when there is none.
    fn revision(&self, name: &str) -> io::Result<Option<Revision>>;

    /// The names of the documents there, sorted.
    fn names(&self) -> io::Result<Vec<String>>;

    /// Take the folder's lock, for one read-modify-write through the returned handle.
    fn lock(&self, wait: LockWait) -> io::Result<Box<dyn FolderLock + '_>>;

    /// Take the exclusive lock `name` without waiting (the cron tick's): `None` when another
    /// process holds it. Held until the returned guard is dropped.
    fn try_hold(&self, name: &str) -> io::Result<Option<Held>>;
}

/// A change in progress, holding the folder's lock. Dropped without [`FolderLock::commit`], a
/// shared folder's writes are undone (a file folder's happened already, one file at a time).
pub trait FolderLock {
    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>>;
    fn write(&mut self, name: &str, bytes: &[u8]) -> io::Result<()>;
    fn commit(self: Box<Self>) -> io::Result<()>;
}

/// An exclusive lock from [`Folder::try_hold`]; released when dropped.
pub struct Held(#[allow(dead_code)] Box<dyn Send>);

impl Held {
    pub(crate) fn new(guard: impl Send + 'static) -> Held {
        Held(Box::new(guard))
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Held")
    }
}

/// Where the gateway's folders are, given to whoever reads them.
pub trait SharedFolders: Send + Sync {
    /// The store's shared folder of `kind`; `None` when the store keeps none (SQLite: the
    /// folder is a directory in HERMES_HOME, see [`FileFolder`]).
    fn shared_folder(&self, kind: FolderKind) -> Option<Arc<dyn Folder>>;
}
