//! Replacing a file atomically: write a uniquely named temporary file in the same directory,
//! flush it to disk, give it the permissions of the file it replaces, rename it over the target.
//! A crash leaves the old file or the new one, never half of one; on failure the temporary file
//! is removed. Used for everything hermes rewrites in place (memory, skills, config.yaml, the
//! status file, files the agent writes). [`write_private`] does the same for files only their
//! owner may read (the pairing store), whatever the umask or the replaced file's mode.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Replace `target` with `bytes`, creating its directory when missing.
pub(crate) fn write(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace(target, bytes, None)
}

/// [`write()`] for a file only its owner may read: the new file is mode 0600 from its creation,
/// so its content is never readable by others, not even for a moment.
pub(crate) fn write_private(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace(target, bytes, Some(0o600))
}

/// `mode`: the new file's permissions; `None` keeps those of the file it replaces.
fn replace(target: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "file".into());
    // Unique per call, so two writers of the same file never share a temporary file.
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode.unwrap_or(0o666)).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        match mode {
            // The umask may have narrowed the mode asked for at creation; never widened it.
            Some(mode) => std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?,
            None => {
                if let Ok(meta) = std::fs::metadata(target) {
                    std::fs::set_permissions(&tmp, meta.permissions())?;
                }
            }
        }
        std::fs::rename(&tmp, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// [`write()`] off the async runtime's worker threads.
pub(crate) async fn write_async(target: &Path, bytes: Vec<u8>) -> std::io::Result<()> {
    let target = target.to_path_buf();
    tokio::task::spawn_blocking(move || write(&target, &bytes)).await.map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_keeps_permissions_and_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/run.sh");
        write(&path, b"one").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
        write(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o750);
        assert_eq!(std::fs::read_dir(dir.path().join("sub")).unwrap().count(), 1, "no temporary file left");
    }

    #[test]
    fn a_private_file_is_owner_only_even_when_it_replaces_an_open_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.json");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let fresh = dir.path().join("fresh.json");
        write_private(&fresh, b"x").unwrap();
        assert_eq!(std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
