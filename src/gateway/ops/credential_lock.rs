//! One gateway per credential on this machine. Before an adapter with a [`CredentialId`]
//! connects, its supervisor takes an exclusive `flock` on `<lock dir>/<kind>-<digest>.lock` and
//! holds it while the adapter may run; a second gateway with the same bot token (another
//! HERMES_HOME, another profile) is told which process holds it instead of fighting it for
//! updates. The kernel releases the lock when its holder exits, however it exits, so a killed
//! gateway leaves no stale lock to clean up (the file stays; only the lock on it counts).
//!
//! The lock directory is machine-wide, not per HERMES_HOME: `HERMES_GATEWAY_LOCK_DIR`, else
//! `$XDG_STATE_HOME/hermes/gateway-locks`, else `~/.local/state/hermes/gateway-locks`.

use hermes_adapter::CredentialId;
use std::ffi::OsString;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub(crate) enum CredentialLockError {
    #[error(
        "this {kind} is already in use by another hermes gateway (PID {pid}, HERMES_HOME {home}); a bot can only be connected once. Stop the other gateway, or give this one its own bot"
    )]
    InUse { kind: String, pid: String, home: String },
    #[error("cannot use the credential lock file {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// Where the credential locks live, from the environment given (`None`: no home to put them in).
pub(crate) fn lock_dir(env: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    set("HERMES_GATEWAY_LOCK_DIR")
        .or_else(|| set("XDG_STATE_HOME").map(|d| d.join("hermes").join("gateway-locks")))
        .or_else(|| set("HOME").map(|d| d.join(".local").join("state").join("hermes").join("gateway-locks")))
}

/// Held while an adapter may run; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct CredentialLock {
    _file: File,
}

/// Take the lock for `credential`, recording this process and `home` in it for whoever is refused.
pub(crate) fn acquire(dir: &Path, credential: &CredentialId, home: &Path) -> Result<CredentialLock, CredentialLockError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CredentialLockError::Io { path, source }
    };
    create_private_dir(dir).map_err(io(dir))?;
    let path = dir.join(format!("{}.lock", credential.file_stem()));
    let mut file = OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path).map_err(io(&path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            // The holder writes its line right after locking; an empty read says "unknown".
            let _ = file.read_to_string(&mut holder);
            let mut fields = holder.lines();
            let pid = fields.next().filter(|p| !p.is_empty()).unwrap_or("unknown").to_string();
            let home = fields.next().filter(|h| !h.is_empty()).unwrap_or("unknown").to_string();
            return Err(CredentialLockError::InUse { kind: credential.kind().to_string(), pid, home });
        }
        Err(TryLockError::Error(e)) => return Err(CredentialLockError::Io { path, source: e }),
    }
    file.set_len(0).map_err(io(&path))?;
    file.rewind().map_err(io(&path))?;
    writeln!(file, "{}\n{}", std::process::id(), home.display()).map_err(io(&path))?;
    Ok(CredentialLock { _file: file })
}

/// The directory, readable by its owner only: the file names are digests of bot tokens.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_told_who_holds_it_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let token = CredentialId::new("Telegram bot token", "123456:SECRET");
        let first = acquire(dir.path(), &token, Path::new("/srv/hermes-a")).unwrap();
        let refused = acquire(dir.path(), &token, Path::new("/srv/hermes-b")).unwrap_err();
        let message = refused.to_string();
        assert!(message.contains("Telegram bot token is already in use"), "{message}");
        assert!(message.contains(&format!("PID {}", std::process::id())), "{message}");
        assert!(message.contains("/srv/hermes-a"), "{message}");
        assert!(!message.contains("SECRET"), "{message}");
        drop(first);
        let second = acquire(dir.path(), &token, Path::new("/srv/hermes-b")).unwrap();
        drop(second);
    }

    #[test]
    fn other_tokens_and_other_kinds_do_not_collide() {
        let dir = tempfile::tempdir().unwrap();
        let _a = acquire(dir.path(), &CredentialId::new("Telegram bot token", "t1"), Path::new("/h")).unwrap();
        let _b = acquire(dir.path(), &CredentialId::new("Telegram bot token", "t2"), Path::new("/h")).unwrap();
        let _c = acquire(dir.path(), &CredentialId::new("Discord bot token", "t1"), Path::new("/h")).unwrap();
    }

    #[test]
    fn the_directory_is_private_and_names_no_secret() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("state").join("gateway-locks");
        let _lock = acquire(&dir, &CredentialId::new("Discord bot token", "MTAw.SECRET"), Path::new("/h")).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        let names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names.len(), 1);
        assert!(names[0].starts_with("discord-bot-token-") && !names[0].contains("SECRET"), "{names:?}");
    }

    #[test]
    fn the_lock_dir_follows_the_override_then_xdg_then_home() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(v))
        };
        assert_eq!(
            lock_dir(env(&[("HERMES_GATEWAY_LOCK_DIR", "/locks"), ("XDG_STATE_HOME", "/x"), ("HOME", "/home/u")])),
            Some(PathBuf::from("/locks"))
        );
        assert_eq!(lock_dir(env(&[("XDG_STATE_HOME", "/x"), ("HOME", "/home/u")])), Some(PathBuf::from("/x/hermes/gateway-locks")));
        assert_eq!(
            lock_dir(env(&[("XDG_STATE_HOME", ""), ("HOME", "/home/u")])),
            Some(PathBuf::from("/home/u/.local/state/hermes/gateway-locks"))
        );
        assert_eq!(lock_dir(env(&[])), None);
    }
}
