//! One gateway per HERMES_HOME: an exclusive lock on `gateway.lock`, with the owner's PID in
//! `gateway.pid`. `--replace` asks the owner to stop (SIGTERM), waits, and takes over.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "another gateway (PID {pid}) is already running for {home}. Stop it first (`hermes gateway stop` or kill {pid}), or start with `hermes gateway run --replace` to take over"
    )]
    AlreadyRunning { pid: String, home: String },
    #[error("the gateway running for {home} did not stop within {secs} s after SIGTERM and SIGKILL")]
    DidNotStop { home: String, secs: u64 },
    #[error("cannot use the lock file {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// Held for the gateway's lifetime; dropping it releases the lock and removes the PID file.
#[derive(Debug)]
pub struct InstanceLock {
    _file: File,
    pid_path: PathBuf,
}

impl Drop for InstanceLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.pid_path);
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LockError + '_ {
    move |source| LockError::Io { path: path.to_path_buf(), source }
}

pub fn acquire(lock_path: &Path, pid_path: &Path, replace: bool) -> Result<InstanceLock, LockError> {
    let home = lock_path.parent().map(|p| p.display().to_string()).unwrap_or_default();
    let file = OpenOptions::new().create(true).truncate(false).write(true).open(lock_path).map_err(io(lock_path))?;
    match file.try_lock() {
        Ok(()) => return finish(file, pid_path),
        Err(TryLockError::WouldBlock) => {}
        Err(TryLockError::Error(e)) => return Err(LockError::Io { path: lock_path.to_path_buf(), source: e }),
    }
    let pid = std::fs::read_to_string(pid_path).unwrap_or_default().trim().to_string();
    if !replace {
        return Err(LockError::AlreadyRunning { pid: if pid.is_empty() { "unknown".into() } else { pid }, home });
    }
    let pid_num: Option<i32> = pid.parse().ok().filter(|p| *p > 1);
    for (signal, wait) in [(libc::SIGTERM, Duration::from_secs(10)), (libc::SIGKILL, Duration::from_secs(5))] {
        if let Some(p) = pid_num {
            tracing::warn!(pid = p, "asking the running gateway to stop (--replace)");
            // SAFETY: kill(2) with a PID read from our own PID file; no memory is involved.
            unsafe {
                libc::kill(p, signal);
            }
        }
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            match file.try_lock() {
                Ok(()) => return finish(file, pid_path),
                Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_millis(50)),
                Err(TryLockError::Error(e)) => return Err(LockError::Io { path: lock_path.to_path_buf(), source: e }),
            }
        }
    }
    Err(LockError::DidNotStop { home, secs: 15 })
}

fn finish(file: File, pid_path: &Path) -> Result<InstanceLock, LockError> {
    let mut pid_file = File::create(pid_path).map_err(io(pid_path))?;
    writeln!(pid_file, "{}", std::process::id()).map_err(io(pid_path))?;
    Ok(InstanceLock { _file: file, pid_path: pid_path.to_path_buf() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_and_release_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("gateway.lock");
        let pid = dir.path().join("gateway.pid");
        let first = acquire(&lock, &pid, false).unwrap();
        assert_eq!(std::fs::read_to_string(&pid).unwrap().trim(), std::process::id().to_string());
        let err = acquire(&lock, &pid, false).unwrap_err();
        assert!(err.to_string().contains("--replace"), "{err}");
        drop(first);
        assert!(!pid.exists());
        acquire(&lock, &pid, false).unwrap();
    }
}
