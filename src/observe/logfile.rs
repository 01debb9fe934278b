//! The gateway's log files outside systemd: `HERMES_HOME/logs/gateway.log`, rotated by size
//! (`logging.max_size_mb`) with `logging.backup_count` older files kept (`gateway.log.1` is the
//! newest), through `file-rotate`. The folder is 0700 and the files 0600: logs name users and
//! chats even when every secret in them is masked. Records arrive already redacted
//! ([`super::redact::RedactingMakeWriter`] wraps this writer like every other sink).

use file_rotate::compression::Compression;
use file_rotate::suffix::AppendCount;
use file_rotate::{ContentLimit, FileRotate};
use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tracing_subscriber::fmt::MakeWriter;

/// The file's name inside the logs folder.
pub(crate) const FILE_NAME: &str = "gateway.log";

/// Where the files go and when they rotate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rotation {
    pub dir: PathBuf,
    pub max_bytes: u64,
    /// Rotated files kept beside the live one.
    pub backups: usize,
}

/// A size-rotated log file shared by every record writer.
#[derive(Clone)]
pub(crate) struct RotatingFile {
    file: Arc<Mutex<FileRotate<AppendCount>>>,
}

impl RotatingFile {
    /// Create the folder (0700) and open the file (0600); files left from an earlier run with
    /// looser modes are tightened.
    pub(crate) fn open(rotation: &Rotation) -> io::Result<RotatingFile> {
        DirBuilder::new().recursive(true).mode(0o700).create(&rotation.dir)?;
        std::fs::set_permissions(&rotation.dir, Permissions::from_mode(0o700))?;
        let path = rotation.dir.join(FILE_NAME);
        tighten_existing(&rotation.dir)?;
        let mut options = OpenOptions::new();
        options.read(true).create(true).append(true).mode(0o600);
        // Fail here, with an error to report, rather than inside `FileRotate` (which would drop
        // every record silently).
        options.open(&path)?;
        let max_bytes = usize::try_from(rotation.max_bytes.max(1)).unwrap_or(usize::MAX);
        // `BytesSurpassed` rotates after the record that crosses the limit: records stay whole.
        let file = FileRotate::new(
            &path,
            AppendCount::new(rotation.backups),
            ContentLimit::BytesSurpassed(max_bytes),
            Compression::None,
            Some(options),
        );
        Ok(RotatingFile { file: Arc::new(Mutex::new(file)) })
    }
}

/// Make `gateway.log*` in `dir` owner-only.
fn tighten_existing(dir: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(FILE_NAME) && entry.file_type()?.is_file() {
            std::fs::set_permissions(entry.path(), Permissions::from_mode(0o600))?;
        }
    }
    Ok(())
}

/// One record's writer: the whole record is written under the lock, so records from several
/// threads never interleave and a rotation never splits one.
pub(crate) struct RecordWriter {
    file: Arc<Mutex<FileRotate<AppendCount>>>,
}

impl Write for RecordWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let mut file = self.file.lock().map_err(|_| io::Error::other("the log file lock is poisoned"))?;
        // `file-rotate` panics when it cannot recreate a deleted logs folder; a log write must
        // never take the gateway down with it.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.write_all(data))) {
            Ok(written) => written.map(|()| data.len()),
            Err(_) => Err(io::Error::other("the log file could not be rotated")),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.lock().map_err(|_| io::Error::other("the log file lock is poisoned"))?.flush()
    }
}

impl<'a> MakeWriter<'a> for RotatingFile {
    type Writer = RecordWriter;
    fn make_writer(&'a self) -> Self::Writer {
        RecordWriter { file: self.file.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::redact::{RedactingMakeWriter, Redactor};

    const SECRET: &str = "hunter2-very-secret-value";

    fn log_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        files
    }

    #[test]
    fn logging_past_the_limit_rotates_keeps_backup_count_files_and_never_writes_a_secret() {
        let home = tempfile::tempdir().unwrap();
        let rotation = Rotation { dir: home.path().join("logs"), max_bytes: 4096, backups: 3 };
        let file = RotatingFile::open(&rotation).unwrap();
        let writer = RedactingMakeWriter::new(file, Redactor::new(vec![SECRET.into()]));
        for i in 0..400 {
            let mut record = writer.make_writer();
            writeln!(
                record,
                "record {i:04}: calling the provider with key {SECRET} and token 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
            )
            .unwrap();
        }

        let files = log_files(&rotation.dir);
        let names: Vec<String> = files.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["gateway.log", "gateway.log.1", "gateway.log.2", "gateway.log.3"], "backup_count files kept");
        let mut all = String::new();
        for path in &files {
            let text = std::fs::read_to_string(path).unwrap();
            let size = text.len() as u64;
            assert!(size <= 4096 + 200, "{} is {size} bytes: not rotated at the limit", path.display());
            assert_eq!(std::fs::metadata(path).unwrap().permissions().mode() & 0o777, 0o600, "{}", path.display());
            all.push_str(&text);
        }
        assert_eq!(std::fs::metadata(&rotation.dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert!(!all.contains(SECRET) && !all.contains("AAHdqTcv"), "a secret reached a log file");
        assert!(all.contains("record 0399") && all.contains("[REDACTED]"), "the newest records are kept, masked");
        assert!(!all.contains("record 0000:"), "the oldest records were rotated away");
        assert!(all.lines().all(|l| l.starts_with("record ")), "records are whole lines");
    }

    #[test]
    fn files_left_with_loose_modes_are_tightened() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("logs");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("gateway.log.1"), "old\n").unwrap();
        std::fs::set_permissions(dir.join("gateway.log.1"), Permissions::from_mode(0o644)).unwrap();
        RotatingFile::open(&Rotation { dir: dir.clone(), max_bytes: 1 << 20, backups: 3 }).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(dir.join("gateway.log.1")).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(dir.join("gateway.log")).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
