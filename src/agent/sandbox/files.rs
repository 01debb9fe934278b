//! The sandbox's policy applied in process, for the file tools (`read_file`, `write_file`,
//! `patch`, `search_files`): decided on canonical paths (every symlink resolved), so a link in
//! the workspace leads nowhere the sandbox would not let a command go; and files are opened
//! without blocking and checked to be regular, so a FIFO or a device is refused instead of
//! hanging the tool.

use super::Confinement;
use hermes_guard::sandbox::{SandboxMode, SandboxPolicy};
use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// The policy's directories with symlinks resolved.
#[derive(Debug, Clone)]
pub(super) struct RealRoots {
    workspace: PathBuf,
    private_tmp: Option<PathBuf>,
    hermes_home: PathBuf,
}

impl RealRoots {
    pub(super) fn of(policy: &SandboxPolicy, private_tmp: Option<&Path>) -> Self {
        RealRoots {
            workspace: real_path(policy.workspace()),
            private_tmp: private_tmp.map(real_path),
            hermes_home: real_path(policy.hermes_home()),
        }
    }

    fn writable(&self, real: &Path) -> bool {
        real.starts_with(&self.workspace) || self.private_tmp.as_ref().is_some_and(|tmp| real.starts_with(tmp))
    }
}

/// Why a file tool may not touch a path.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(
        "{shown} is inside HERMES_HOME ({home}), which the sandbox keeps unreadable: it holds the gateway's secrets and other users' \
         conversations. Only the workspace inside it can be read. Do not try to reach it another way."
    )]
    HermesHome { shown: String, home: String },
    #[error(
        "{shown} is outside the workspace ({workspace}); the sandbox lets the agent write only in the workspace and its private temp \
         dir. Write the file inside the workspace instead, or ask the user to put it where it must go."
    )]
    OutsideWorkspace { shown: String, workspace: String },
    #[error("the sandbox is read-only (terminal.sandbox: read-only): {shown} cannot be written. Ask the user if it must change.")]
    ReadOnly { shown: String },
    #[error("{shown} is not a regular file ({kind}); the file tools only read and write regular files.")]
    NotRegular { shown: String, kind: &'static str },
    #[error("could not open {shown}: {source}")]
    Io {
        shown: String,
        #[source]
        source: io::Error,
    },
}

impl Confinement {
    /// Whether a file tool may read `path` (absolute): `Ok` with its canonical form, or why not.
    /// A path that does not exist is returned as given, for the tool to report.
    pub fn readable(&self, path: &Path) -> Result<PathBuf, Refusal> {
        let Ok(real) = std::fs::canonicalize(path) else { return Ok(path.to_path_buf()) };
        if self.mode() == SandboxMode::Off {
            return Ok(real);
        }
        let roots = &self.real;
        if real.starts_with(&roots.hermes_home) && !roots.writable(&real) {
            return Err(Refusal::HermesHome { shown: shown(path, &real), home: roots.hermes_home.display().to_string() });
        }
        Ok(real)
    }

    /// Whether a file tool may write `path` (absolute): `Ok` with its real path (existing
    /// ancestors resolved), or why not.
    pub fn writable(&self, path: &Path) -> Result<PathBuf, Refusal> {
        let real = real_path(path);
        match self.mode() {
            SandboxMode::Off => Ok(real),
            SandboxMode::ReadOnly => Err(Refusal::ReadOnly { shown: shown(path, &real) }),
            SandboxMode::WorkspaceWrite if self.real.writable(&real) => Ok(real),
            SandboxMode::WorkspaceWrite => {
                Err(Refusal::OutsideWorkspace { shown: shown(path, &real), workspace: self.real.workspace.display().to_string() })
            }
        }
    }

    /// Opens `path` for reading if the policy allows it and it is a regular file. The open never
    /// blocks (a FIFO with no writer would hang a plain open), and the opened file is checked
    /// again, so a path swapped for a link or a FIFO after the first check is still refused.
    pub fn open_for_read(&self, path: &Path) -> Result<(File, PathBuf), Refusal> {
        let real = self.readable(path)?;
        let io_error = |source| Refusal::Io { shown: path.display().to_string(), source };
        let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(&real).map_err(io_error)?;
        let meta = file.metadata().map_err(io_error)?;
        if !meta.is_file() {
            return Err(Refusal::NotRegular { shown: path.display().to_string(), kind: kind_of(&meta.file_type()) });
        }
        // What was really opened, by its descriptor: the policy again on that path.
        if let Ok(opened) = std::fs::read_link(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file))) {
            self.readable(&opened)?;
        }
        Ok((file, real))
    }
}

/// Refuses an existing path that is not a regular file or a directory (a FIFO, a device, a
/// socket): writing one would block or reach hardware.
pub(crate) fn refuse_special(path: &Path) -> Result<(), Refusal> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() && !meta.is_dir() => {
            Err(Refusal::NotRegular { shown: path.display().to_string(), kind: kind_of(&meta.file_type()) })
        }
        _ => Ok(()),
    }
}

fn kind_of(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else if kind.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// `path`, and where it really leads when that differs (a symlink).
fn shown(path: &Path, real: &Path) -> String {
    if path == real { path.display().to_string() } else { format!("{} (a link to {})", path.display(), real.display()) }
}

/// `path` with its longest existing ancestor canonicalized (symlinks resolved) and the rest
/// applied after it, `..` popping (so `missing/../../x` cannot climb out unseen).
pub(crate) fn real_path(path: &Path) -> PathBuf {
    let parts: Vec<Component<'_>> = path.components().collect();
    for split in (1..=parts.len()).rev() {
        let Ok(mut out) = std::fs::canonicalize(parts[..split].iter().collect::<PathBuf>()) else { continue };
        for part in &parts[split..] {
            match part {
                Component::ParentDir => {
                    out.pop();
                }
                Component::Normal(name) => out.push(name),
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
        return out;
    }
    path.to_path_buf()
}
