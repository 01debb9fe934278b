//! Where a path points, judged lexically (the classifier never touches the file system; the
//! sandbox is what stops a symlink that leads out of the workspace).

use super::ClassifyContext;
use std::path::{Component, Path, PathBuf};

/// What writing to (or deleting) a path would touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// The workspace or another directory the sandbox lets commands write.
    Workspace,
    /// `/dev/null`, `/dev/stdout`, a terminal: writing there changes nothing.
    HarmlessDevice,
    /// A whole disk or partition: writing there destroys it.
    RawDevice,
    /// `/etc` (and macOS `/private/{etc,var,tmp,home}`).
    SystemConfig,
    /// `~/.ssh`, shell start-up files, credential files.
    UserSecret,
    /// `HERMES_HOME/.env*` and `HERMES_HOME/config.yaml`: the agent's own secrets and policy.
    HermesSecret,
    /// Anywhere else outside the workspace.
    Outside,
    /// Only known when the command runs (a variable, a substitution, an unknown directory).
    Unknown,
}

impl Place {
    pub(crate) fn is_outside(self) -> bool {
        !matches!(self, Place::Workspace | Place::HarmlessDevice)
    }
}

/// A path argument and what it touches.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The absolute path, `None` when only known at run time.
    pub(crate) path: Option<PathBuf>,
    pub(crate) place: Place,
    /// Named `.env`, `.env.<something>` or `config.yaml`, wherever it is.
    pub(crate) project_config: bool,
    /// Has an unquoted glob (`*`, `?`, `[`): it names whatever matches.
    pub(crate) glob: bool,
}

impl Target {
    pub(crate) fn shown(&self) -> String {
        self.path.as_ref().map_or_else(|| "a path known only at run time".to_owned(), |path| path.display().to_string())
    }
}

const HARMLESS_DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "stdin", "stdout", "stderr", "tty", "ptmx"];
const DISK_NAME_PREFIXES: &[&str] = &["sd", "hd", "vd", "xvd", "nvme", "mmcblk", "md", "dm-", "loop", "nbd"];
const SHELL_STARTUP_AND_CREDENTIAL_FILES: &[&str] =
    &[".bashrc", ".zshrc", ".profile", ".bash_profile", ".zprofile", ".netrc", ".pgpass", ".npmrc", ".pypirc"];

/// `.` and `..` folded away without asking the file system (`..` of `/` is `/`).
pub(crate) fn lexical_normal(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !normal.pop() || normal.as_os_str().is_empty() {
                    normal.push("/");
                }
            }
            other => normal.push(other),
        }
    }
    normal
}

/// Whether unquoted `text` is a glob pattern: `*`, `?`, or a closed `[…]` (a lone `[` is the
/// `test` command, not a pattern).
pub(crate) fn has_glob(text: &str) -> bool {
    text.contains(['*', '?']) || text.find('[').is_some_and(|open| text[open + 1..].contains(']'))
}

impl ClassifyContext {
    /// The absolute path `text` names, from `cwd` (`None`: unknown directory) and with `~`
    /// meaning home (bash also expands it after `=` in `of=~/x`).
    pub(crate) fn absolute(&self, text: &str, cwd: Option<&Path>) -> Option<PathBuf> {
        if text.is_empty() {
            return None;
        }
        let path = if text == "~" {
            self.home.clone()
        } else if let Some(rest) = text.strip_prefix("~/") {
            self.home.join(rest)
        } else if text.starts_with('~') {
            // `~user`: another user's home, unknown here.
            return None;
        } else if text.starts_with('/') {
            PathBuf::from(text)
        } else {
            cwd?.join(text)
        };
        Some(lexical_normal(&path))
    }

    /// What a path argument touches; `dynamic` text is only known at run time.
    pub(crate) fn target(&self, text: &str, dynamic: bool, glob: bool, cwd: Option<&Path>) -> Target {
        let path = if dynamic { None } else { self.absolute(text, cwd) };
        let name = text.rsplit('/').next().unwrap_or(text);
        let project_config = name == ".env" || name.starts_with(".env.") || name == "config.yaml";
        let place = path.as_deref().map_or(Place::Unknown, |path| self.place_of(path, glob));
        Target { path, place, project_config, glob }
    }

    fn place_of(&self, path: &Path, glob: bool) -> Place {
        if let Some(device) = path.to_str().and_then(|text| text.strip_prefix("/dev/")) {
            return device_place(device);
        }
        if path.starts_with("/etc") || ["etc", "var", "tmp", "home"].iter().any(|dir| path.starts_with(Path::new("/private").join(dir))) {
            return Place::SystemConfig;
        }
        let file_name = path.file_name().and_then(|name| name.to_str()).unwrap_or("");
        if path.starts_with(self.home.join(".ssh"))
            || (path.parent() == Some(self.home.as_path()) && SHELL_STARTUP_AND_CREDENTIAL_FILES.contains(&file_name))
        {
            return Place::UserSecret;
        }
        if path.parent() == Some(self.hermes_home.as_path()) && (file_name.starts_with(".env") || file_name == "config.yaml") {
            return Place::HermesSecret;
        }
        // A glob names what matches under the directory before its first glob component.
        let fixed: PathBuf =
            if glob { path.components().take_while(|c| !has_glob(&c.as_os_str().to_string_lossy())).collect() } else { path.to_path_buf() };
        let writable = self.workspace.iter().chain(&self.writable).any(|root| fixed.starts_with(root));
        if writable { Place::Workspace } else { Place::Outside }
    }

    /// Whether `path` is `/`, everything in `/`, or a glob over the top-level directories.
    pub(crate) fn is_root(&self, target: &Target) -> bool {
        let Some(path) = &target.path else { return false };
        let parts: Vec<_> = path.components().skip(1).map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        parts.is_empty() || (target.glob && parts.len() == 1 && parts[0].chars().all(|c| c == '*'))
    }

    /// A system directory itself or everything in it (`/usr`, `/etc/*`); a glob at the top
    /// level (`/b*`) may name any of them.
    pub(crate) fn is_system_dir(&self, target: &Target) -> bool {
        const SYSTEM_DIRS: &[&str] = &[
            "home",
            "root",
            "etc",
            "usr",
            "var",
            "bin",
            "sbin",
            "boot",
            "lib",
            "lib32",
            "lib64",
            "opt",
            "srv",
            "dev",
            "proc",
            "sys",
            "Users",
            "System",
            "Library",
            "Applications",
            "private",
        ];
        let Some(path) = &target.path else { return false };
        let parts: Vec<_> = path.components().skip(1).map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        match parts.as_slice() {
            [top] => SYSTEM_DIRS.contains(&top.as_str()) || (target.glob && has_glob(top)),
            [top, all] => SYSTEM_DIRS.contains(&top.as_str()) && target.glob && all.chars().all(|c| c == '*'),
            _ => false,
        }
    }

    /// The home directory itself or everything in it.
    pub(crate) fn is_home(&self, target: &Target) -> bool {
        let Some(path) = &target.path else { return false };
        path == &self.home
            || (target.glob
                && path.parent() == Some(self.home.as_path())
                && path.file_name().is_some_and(|name| name.to_string_lossy().chars().all(|c| c == '*')))
    }
}

fn device_place(device: &str) -> Place {
    if HARMLESS_DEVICES.contains(&device) || device.starts_with("fd/") || device.starts_with("pts/") {
        return Place::HarmlessDevice;
    }
    let numbered_disk = ["disk", "rdisk"]
        .iter()
        .any(|prefix| device.strip_prefix(prefix).is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit())));
    let named_disk = DISK_NAME_PREFIXES
        .iter()
        .any(|prefix| device.strip_prefix(prefix).is_some_and(|rest| rest.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())));
    if numbered_disk || named_disk || device.starts_with("mapper/") || device.starts_with("disk/by-") {
        Place::RawDevice
    } else {
        Place::Outside
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> ClassifyContext {
        ClassifyContext::new("/work/ws", "/home/u").with_writable_dir("/tmp/hermes-private")
    }

    fn place(text: &str) -> Place {
        context().target(text, false, has_glob(text), Some(Path::new("/work/ws"))).place
    }

    #[test]
    fn paths_are_placed_lexically() {
        assert_eq!(place("notes.txt"), Place::Workspace);
        assert_eq!(place("./a/../b"), Place::Workspace);
        assert_eq!(place("../other"), Place::Outside);
        assert_eq!(place("/work/ws/../../etc/passwd"), Place::SystemConfig);
        assert_eq!(place("/tmp/hermes-private/x"), Place::Workspace);
        assert_eq!(place("/tmp/x"), Place::Outside);
        assert_eq!(place("~/.ssh/authorized_keys"), Place::UserSecret);
        assert_eq!(place("~/.bashrc"), Place::UserSecret);
        assert_eq!(place("~/.hermes/.env"), Place::HermesSecret);
        assert_eq!(place("/dev/null"), Place::HarmlessDevice);
        assert_eq!(place("/dev/sda1"), Place::RawDevice);
        assert_eq!(place("/dev/nvme0n1p2"), Place::RawDevice);
        assert_eq!(place("/dev/disk2"), Place::RawDevice);
        assert_eq!(place("/dev/shm/x"), Place::Outside);
        assert_eq!(place("*.txt"), Place::Workspace);
        assert_eq!(place("/work/*"), Place::Outside);
    }
}
