//! Telling, from a failed command's error output, that the sandbox stopped it, so the tool can
//! give the model a clear reason instead of a bare "Permission denied".
//!
//! Landlock answers with `EACCES` (and `EXDEV` for a rename or link it refuses across
//! directories); programs print that as "Permission denied" / "Invalid cross-device link"
//! with the path, which is matched against the policy.

use super::{SandboxMode, SandboxPolicy};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

/// Why the sandbox refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenialKind {
    /// A write outside the workspace, the private temp dir and the extra writable dirs.
    WriteOutsideWorkspace,
    /// Any write in read-only mode.
    ReadOnly,
    /// Reading `HERMES_HOME` (or listing one of its parent directories).
    HermesHome,
    /// A device other than the harmless ones.
    Device,
    /// A permission error whose path could not be told; possibly the sandbox.
    Unattributed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub kind: DenialKind,
    /// The path refused, when the error output named it.
    pub path: Option<PathBuf>,
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.as_ref().map(|path| format!(" ({})", path.display())).unwrap_or_default();
        match self.kind {
            DenialKind::WriteOutsideWorkspace => {
                write!(
                    f,
                    "the sandbox denied writing outside the workspace{path}; only the workspace and the private temp dir are writable"
                )
            }
            DenialKind::ReadOnly => write!(f, "the sandbox is read-only: no file can be written{path}"),
            DenialKind::HermesHome => write!(f, "the sandbox keeps Hermes' own directory (HERMES_HOME) unreadable{path}"),
            DenialKind::Device => {
                write!(f, "the sandbox only allows /dev/null, /dev/zero, /dev/random, /dev/urandom and the terminal{path}")
            }
            DenialKind::Unattributed => {
                write!(f, "permission denied, probably by the sandbox (writes are limited to the workspace and the private temp dir)")
            }
        }
    }
}

const REFUSALS: &[&str] = &["permission denied", "operation not permitted", "invalid cross-device link", "eacces", "errno 13", "errno 18"];

impl SandboxPolicy {
    /// Whether the sandbox explains a failure: `stderr` of the command and how it exited.
    pub fn explain_failure(&self, stderr: &str, status: &ExitStatus) -> Option<Denial> {
        if status.success() || self.mode == SandboxMode::Off {
            return None;
        }
        let refusal_lines: Vec<&str> =
            stderr.lines().filter(|line| REFUSALS.iter().any(|refusal| line.to_lowercase().contains(refusal))).collect();
        if refusal_lines.is_empty() {
            return None;
        }
        let attributed = refusal_lines.iter().flat_map(|line| paths_in(line)).find_map(|path| self.denial_for(&path));
        attributed.or(Some(Denial { kind: DenialKind::Unattributed, path: None }))
    }

    fn denial_for(&self, path: &Path) -> Option<Denial> {
        let absolute = if path.is_absolute() { path.to_path_buf() } else { self.workspace.join(path) };
        let real = real_prefix(&absolute);
        let writable = self.writable_dirs().iter().any(|dir| real.starts_with(real_prefix(dir)));
        let hermes_home = real_prefix(&self.hermes_home);
        let kind = if real.starts_with(&hermes_home) && !writable {
            DenialKind::HermesHome
        } else if hermes_home.starts_with(&real) && real != hermes_home {
            // An ancestor of HERMES_HOME: readable entries, but no listing.
            DenialKind::HermesHome
        } else if real.starts_with("/dev") {
            DenialKind::Device
        } else if self.mode == SandboxMode::ReadOnly {
            DenialKind::ReadOnly
        } else if !writable {
            DenialKind::WriteOutsideWorkspace
        } else {
            return None;
        };
        Some(Denial { kind, path: Some(absolute) })
    }
}

/// The path with its existing part resolved (symlinks), so that `/tmp` and `/private/tmp` or a
/// workspace reached through a link compare equal.
fn real_prefix(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => real_prefix(parent).join(name),
        _ => path.to_path_buf(),
    }
}

/// Paths an error line names: quoted (`'…'`, `‘…’`, `"…"`) or as `prog: PATH: reason`.
fn paths_in(line: &str) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for (open, close) in [('\'', '\''), ('‘', '’'), ('"', '"'), ('`', '\'')] {
        let mut rest = line;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len_utf8()..];
            let Some(end) = after.find(close) else { break };
            let quoted = &after[..end];
            if looks_like_path(quoted) {
                paths.push(PathBuf::from(quoted));
            }
            rest = &after[end + close.len_utf8()..];
        }
    }
    // `prog: PATH: Permission denied`: the part right before the refusal.
    let parts: Vec<&str> = line.split(": ").map(str::trim).collect();
    for pair in parts.windows(2) {
        let refusal = pair[1].to_lowercase();
        // `cannot create out.txt` (dash) ends with the path; `out.txt` is one.
        let last_word = pair[0].rsplit(' ').next().unwrap_or("");
        if REFUSALS.iter().any(|known| refusal.starts_with(known))
            && (!pair[0].contains(' ') || last_word.starts_with('/') || pair[0].starts_with("cannot "))
            && !last_word.is_empty()
        {
            paths.push(PathBuf::from(last_word));
        }
    }
    paths
}

fn looks_like_path(text: &str) -> bool {
    !text.is_empty() && !text.contains('\n') && (text.contains('/') || !text.contains(' '))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn policy(mode: SandboxMode) -> SandboxPolicy {
        SandboxPolicy::new(mode, "/work/ws", "/work/tmp", "/home/u/.hermes")
    }

    fn failed() -> ExitStatus {
        ExitStatus::from_raw(1 << 8)
    }

    #[test]
    fn common_error_formats_are_attributed() {
        let write = policy(SandboxMode::WorkspaceWrite);
        let denial = write.explain_failure("touch: cannot touch '/etc/x': Permission denied\n", &failed());
        assert_eq!(denial, Some(Denial { kind: DenialKind::WriteOutsideWorkspace, path: Some(PathBuf::from("/etc/x")) }));
        let denial = write.explain_failure("cat: /home/u/.hermes/.env: Permission denied", &failed());
        assert_eq!(denial.map(|denial| denial.kind), Some(DenialKind::HermesHome));
        let denial = write.explain_failure("PermissionError: [Errno 13] Permission denied: '/srv/out.txt'", &failed());
        assert_eq!(
            denial.map(|denial| denial.to_string()),
            Some(
                "the sandbox denied writing outside the workspace (/srv/out.txt); only the workspace and the private temp dir are writable"
                    .to_owned()
            )
        );
        let denial = policy(SandboxMode::ReadOnly).explain_failure("bash: line 1: out.txt: Permission denied", &failed());
        assert_eq!(denial.map(|denial| denial.kind), Some(DenialKind::ReadOnly));
    }

    #[test]
    fn other_failures_are_not_blamed_on_the_sandbox() {
        let write = policy(SandboxMode::WorkspaceWrite);
        assert_eq!(write.explain_failure("ls: cannot access 'x': No such file or directory", &failed()), None);
        assert_eq!(write.explain_failure("touch: cannot touch '/etc/x': Permission denied", &ExitStatus::from_raw(0)), None);
        assert_eq!(policy(SandboxMode::Off).explain_failure("touch: cannot touch '/etc/x': Permission denied", &failed()), None);
    }
}
