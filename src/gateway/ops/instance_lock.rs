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
    #[error("--replace: the lock for {home} is held by PID {pid} ({command:?}), which is not a hermes gateway; not signalling it")]
    NotAGateway { pid: i32, command: String, home: String },
    #[error("--replace: the lock for {home} is held, but /proc/locks does not say by whom; stop the other gateway by hand")]
    HolderUnknown { home: String },
}

/// Held for the gateway's lifetime; dropping it releases the lock and removes the PID file.
#[derive(Debug)]
pub(crate) struct InstanceLock {
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

pub(crate) fn acquire(lock_path: &Path, pid_path: &Path, replace: bool) -> Result<InstanceLock, LockError> {
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
    // The PID file may be stale or forged: signal only the process the kernel says holds this
    // home's lock, and only if it is a hermes gateway.
    let holder = verified_holder(lock_path, &home)?;
    if pid.parse::<i32>().ok() != Some(holder) {
        tracing::warn!(pid_file = %pid, holder, "the PID file does not name the lock holder; using the holder");
    }
    for (signal, wait) in [(libc::SIGTERM, Duration::from_secs(10)), (libc::SIGKILL, Duration::from_secs(5))] {
        tracing::warn!(pid = holder, "asking the running gateway to stop (--replace)");
        // SAFETY: kill(2) on a PID checked just above to hold our lock and be a hermes gateway;
        // no memory is involved.
        unsafe {
            libc::kill(holder, signal);
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

/// The PID holding `lock_path`, if it is a hermes gateway.
fn verified_holder(lock_path: &Path, home: &str) -> Result<i32, LockError> {
    let holder = lock_holder(lock_path).map_err(io(lock_path))?;
    let Some(pid) = holder.filter(|p| *p > 1) else {
        return Err(LockError::HolderUnknown { home: home.to_string() });
    };
    let command = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = command.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let program = args.first().and_then(|a| Path::new(a).file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if !(program.starts_with("hermes") && args.iter().any(|a| a == "gateway")) {
        return Err(LockError::NotAGateway { pid, command: args.join(" ").trim().to_string(), home: home.to_string() });
    }
    Ok(pid)
}

/// The process holding a `flock` on `path`, from `/proc/locks` (which names locks by the
/// file's device and inode).
fn lock_holder(path: &Path) -> std::io::Result<Option<i32>> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    let id = format!("{:02x}:{:02x}:{}", libc::major(meta.dev()), libc::minor(meta.dev()), meta.ino());
    let locks = std::fs::read_to_string("/proc/locks")?;
    Ok(locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 4973 fe:00:11100482 0 EOF"
        (fields.get(1) == Some(&"FLOCK") && fields.get(5) == Some(&id.as_str())).then(|| fields.get(4)?.parse().ok()).flatten()
    }))
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

    /// `--replace` once signalled whatever PID the PID file named: a stale or planted file could
    /// make it kill an unrelated process.
    #[test]
    fn replace_signals_only_a_hermes_gateway_holding_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("gateway.lock");
        let pid = dir.path().join("gateway.pid");
        let _held = acquire(&lock, &pid, false).unwrap();
        assert_eq!(lock_holder(&lock).unwrap(), Some(std::process::id() as i32));
        // The holder is this test binary, not a gateway: nothing is signalled (we are alive).
        std::fs::write(&pid, "1\n").unwrap();
        match acquire(&lock, &pid, true) {
            Err(LockError::NotAGateway { pid: holder, .. }) => assert_eq!(holder, std::process::id() as i32),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}
