//! A folder that is a directory of files (HERMES_HOME's `cron/`, `platforms/pairing/`): each
//! document one file, replaced atomically and readable by its owner only (0600 in a 0700
//! directory), the lock an exclusive `flock` on a lock file beside them, taken as well by Hermes'
//! own processes and the CLI.

use super::{Folder, FolderLock, Held, LockWait, Revision};
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The longest pause between two attempts at a bounded lock; the first come sooner, so a lock
/// held for a millisecond costs about a millisecond.
const LOCK_POLL: Duration = Duration::from_millis(25);

#[derive(Debug)]
pub struct FileFolder {
    dir: PathBuf,
    /// The lock file's name in `dir` (Hermes' own: `.jobs.lock` for cron, `.lock` for pairing).
    lock_file: &'static str,
    /// Threads of this process take turns before taking the file lock, so a change made without
    /// the file lock (after a bounded wait) is still never interleaved with another of ours.
    in_process: Mutex<()>,
}

impl FileFolder {
    pub fn new(dir: PathBuf, lock_file: &'static str) -> FileFolder {
        FileFolder { dir, lock_file, in_process: Mutex::new(()) }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory, created if missing and made owner-only (as Hermes' `_secure_dir`).
    fn ensure_dir(&self) -> io::Result<()> {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.dir)?;
        let mode = std::fs::metadata(&self.dir)?.permissions().mode() & 0o777;
        if mode != 0o700 {
            std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(())
    }

    fn open_lock_file(&self, name: &str) -> io::Result<File> {
        self.ensure_dir()?;
        OpenOptions::new().create(true).truncate(false).read(true).write(true).mode(0o600).open(self.dir.join(name))
    }

    /// The lock file locked, or `None` when it could not be had within `wait` (said in the log).
    fn lock_file_within(&self, wait: Duration) -> Option<File> {
        let path = self.dir.join(self.lock_file);
        let file = match self.open_lock_file(self.lock_file) {
            Ok(file) => file,
            Err(error) => {
                tracing::warn!(lock = %path.display(), %error, "cannot open the lock file; going on with the in-process lock only");
                return None;
            }
        };
        if wait_for_lock(&file, wait) {
            return Some(file);
        }
        tracing::error!(
            lock = %path.display(),
            waited_secs = wait.as_secs_f64(),
            "another process has held the lock too long; going on with the in-process lock only so the scheduler stays alive"
        );
        None
    }
}

impl Folder for FileFolder {
    fn locate(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.dir.join(name)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn revision(&self, name: &str) -> io::Result<Option<Revision>> {
        match std::fs::metadata(self.dir.join(name)) {
            // A replaced file is a new inode; an edit in place changes its size or time.
            Ok(m) => Ok(Some(Revision([m.ino() as i64, m.size() as i64, m.mtime(), m.mtime_nsec()]))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn names(&self) -> io::Result<Vec<String>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        // Documents are files; sub-folders (a job's outputs) and lock files are not.
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        Ok(names)
    }

    fn lock(&self, wait: LockWait) -> io::Result<Box<dyn FolderLock + '_>> {
        let in_process = self.in_process.lock().unwrap_or_else(PoisonError::into_inner);
        let file = match wait {
            LockWait::Forever => {
                let file = self.open_lock_file(self.lock_file)?;
                file.lock()?;
                Some(file)
            }
            LockWait::AtMost(wait) => self.lock_file_within(wait),
        };
        Ok(Box::new(FileLock { folder: self, _in_process: in_process, file }))
    }

    fn try_hold(&self, name: &str) -> io::Result<Option<Held>> {
        let file = self.open_lock_file(name)?;
        match file.try_lock() {
            // Closing the file releases it.
            Ok(()) => Ok(Some(Held::new(file))),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }
}

/// Held for one read-modify-write; releases the lock file, then the mutex, when dropped.
struct FileLock<'a> {
    folder: &'a FileFolder,
    _in_process: MutexGuard<'a, ()>,
    file: Option<File>,
}

impl FolderLock for FileLock<'_> {
    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>> {
        self.folder.read(name)
    }

    fn write(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.folder.ensure_dir()?;
        crate::fs_atomic::write_private(&self.folder.dir.join(name), bytes)
    }

    fn commit(self: Box<Self>) -> io::Result<()> {
        // Each write replaced its file already.
        Ok(())
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            // Closing the file would release it too; unlocking first says so explicitly.
            let _ = file.unlock();
        }
    }
}

/// Polls `try_lock` until it succeeds or `wait` has passed, never blocking in `lock`: a holder
/// that never lets go must not hang us.
fn wait_for_lock(file: &File, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return true,
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(error)) => {
                tracing::warn!(%error, "cannot lock the lock file");
                return false;
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(LOCK_POLL);
    }
}
