//! Replacing a file atomically: write a uniquely named temporary file in the same directory,
//! flush it to disk, give it the permissions of the file it replaces, rename it over the target.
//! A crash leaves the old file or the new one, never half of one; on failure the temporary file
//! is removed. Used for everything hermes rewrites in place (memory, skills, config.yaml, the
//! status file, files the agent writes).

use std::io::Write;
use std::path::Path;

/// Replace `target` with `bytes`, creating its directory when missing.
pub fn write(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "file".into());
    // Unique per call, so two writers of the same file never share a temporary file.
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        if let Ok(meta) = std::fs::metadata(target) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// [`write()`] off the async runtime's worker threads.
pub async fn write_async(target: &Path, bytes: Vec<u8>) -> std::io::Result<()> {
    let target = target.to_path_buf();
    tokio::task::spawn_blocking(move || write(&target, &bytes)).await.map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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
}
