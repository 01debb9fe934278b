//! A stdio server's stderr, appended to `HERMES_HOME/logs/mcp-<server>.log` with a header line per
//! start and rotated at 1 MiB (one `.1` kept), so a chatty server can neither fill the disk nor
//! block on a full pipe.

use std::io::Write;
use std::path::{Path, PathBuf};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Rotate when the log reaches this size.
pub(crate) const MAX_LOG_BYTES: u64 = 1024 * 1024;

/// `HERMES_HOME/logs/mcp-<server>.log` (anything but letters, digits, `-`, `_` and `.` becomes
/// `_`, so a name stays one file inside the folder).
pub(crate) fn log_path(logs_dir: &Path, server: &str) -> PathBuf {
    let file: String = server.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' }).collect();
    logs_dir.join(format!("mcp-{file}.log"))
}

/// Copy `stderr` into the log line by line until it closes.
pub(crate) async fn pump(stderr: impl AsyncRead + Unpin, path: PathBuf, header: String) {
    append(&path, &header);
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        append(&path, &line);
    }
}

/// One line appended; a write error is dropped (stderr is diagnostics, never worth a failure).
fn append(path: &Path, line: &str) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= MAX_LOG_BYTES) {
        let _ = std::fs::rename(path, path.with_extension("log.1"));
    }
    if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(file, "{line}");
    }
}
