//! The binary's weight on disk: its file size as built (with symbols) and once `strip` has taken
//! the symbols off, which is what a package or container ships.

use std::path::Path;
use std::process::Command;

/// Both sizes, in bytes.
pub(crate) struct Sizes {
    pub unstripped: u64,
    pub stripped: u64,
}

pub(crate) fn measure(binary: &Path) -> Result<Sizes, String> {
    let unstripped = file_size(binary)?;
    Ok(Sizes { unstripped, stripped: stripped_size(binary)? })
}

fn file_size(path: &Path) -> Result<u64, String> {
    std::fs::metadata(path).map(|m| m.len()).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// `strip -o TMP BINARY`: the binary itself is left as it is (its symbols feed other checks).
fn stripped_size(binary: &Path) -> Result<u64, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary folder for the stripped copy: {e}"))?;
    let copy = dir.path().join("hermes-stripped");
    let output = match Command::new("strip").arg("-o").arg(&copy).arg(binary).output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("`strip` is not installed: it comes with binutils (e.g. `apt-get install binutils`)".into());
        }
        Err(e) => return Err(format!("cannot run strip: {e}")),
    };
    if !output.status.success() {
        return Err(format!("strip {} failed ({}): {}", binary.display(), output.status, String::from_utf8_lossy(&output.stderr).trim()));
    }
    file_size(&copy)
}
