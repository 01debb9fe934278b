//! The path rules a policy installs: which paths are readable, writable, or usable devices.

use super::{SandboxError, SandboxMode, SandboxPolicy};
use std::fs;
use std::path::{Path, PathBuf};

/// What a rule lets a command do beneath one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathAccess {
    /// Read files, list directories, execute.
    Read,
    /// Everything: read, execute, create, write, remove, rename.
    ReadWrite,
    /// Open a device file for reading and writing (and its ioctls).
    Device,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRule {
    pub path: PathBuf,
    pub access: PathAccess,
}

/// The devices every mode may use: discard, zeroes, randomness, the terminal.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts"];

pub(super) fn compute(policy: &SandboxPolicy) -> Result<Vec<PathRule>, SandboxError> {
    if policy.mode == SandboxMode::Off {
        return Ok(Vec::new());
    }
    let hermes_home = real_or_lexical(&policy.hermes_home);
    if hermes_home.parent().is_none() {
        return Err(SandboxError::UnsafePolicy("HERMES_HOME is the root directory".to_owned()));
    }
    let mut rules = Vec::new();
    for dir in policy.writable_dirs() {
        let real = fs::canonicalize(dir).map_err(|source| SandboxError::Path { path: dir.to_path_buf(), source })?;
        if hermes_home.starts_with(&real) {
            return Err(SandboxError::UnsafePolicy(format!(
                "HERMES_HOME ({}) lies inside the writable directory {}",
                hermes_home.display(),
                real.display()
            )));
        }
        rules.push(PathRule { path: real, access: PathAccess::ReadWrite });
    }
    let hidden = [hermes_home, PathBuf::from("/dev")];
    let mut readable = Vec::new();
    grant_around(Path::new("/"), &hidden, &mut readable);
    rules.extend(readable.into_iter().map(|path| PathRule { path, access: PathAccess::Read }));
    rules.extend(
        DEVICES
            .iter()
            .map(Path::new)
            .filter(|device| device.exists())
            .map(|device| PathRule { path: device.to_path_buf(), access: PathAccess::Device }),
    );
    Ok(rules)
}

/// Read rules for everything under `dir` except the `hidden` paths, without a rule on any
/// ancestor of a hidden path (see the module docs of `sandbox`).
fn grant_around(dir: &Path, hidden: &[PathBuf], readable: &mut Vec<PathBuf>) {
    if hidden.iter().any(|hidden| hidden == dir) {
        return;
    }
    if !hidden.iter().any(|hidden| hidden.starts_with(dir)) {
        readable.push(dir.to_path_buf());
        return;
    }
    // A directory that cannot be listed gets no rule: unreadable is the safe default.
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_symlink = entry.file_type().is_ok_and(|kind| kind.is_symlink());
        if !is_symlink {
            grant_around(&path, hidden, readable);
            continue;
        }
        // A rule on a symlink is a rule on its target: skip those that lead to a hidden path
        // or to one of its ancestors (`~/all -> /`), and dangling ones.
        let Ok(target) = fs::canonicalize(&path) else { continue };
        let reveals = hidden.iter().any(|hidden| hidden.starts_with(&target) || target.starts_with(hidden));
        if !reveals {
            readable.push(path);
        }
    }
}

/// The path with symlinks resolved as far as it exists, and lexically beyond.
fn real_or_lexical(path: &Path) -> PathBuf {
    if let Ok(real) = fs::canonicalize(path) {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => real_or_lexical(parent).join(name),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hidden_directory_and_its_ancestors_get_no_rule_but_their_other_entries_do() {
        let root = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
        let base = fs::canonicalize(root.path()).unwrap_or_else(|error| panic!("canonicalize: {error}"));
        for dir in ["home/.hermes/sessions", "home/projects", "other"] {
            fs::create_dir_all(base.join(dir)).unwrap_or_else(|error| panic!("mkdir: {error}"));
        }
        fs::write(base.join("home/.bashrc"), "").unwrap_or_else(|error| panic!("write: {error}"));
        std::os::unix::fs::symlink(base.join("home/.hermes"), base.join("home/link-to-secrets"))
            .unwrap_or_else(|error| panic!("symlink: {error}"));
        std::os::unix::fs::symlink(&base, base.join("home/link-to-base")).unwrap_or_else(|error| panic!("symlink: {error}"));
        std::os::unix::fs::symlink(base.join("other"), base.join("home/link-to-other")).unwrap_or_else(|error| panic!("symlink: {error}"));

        let mut readable = Vec::new();
        grant_around(&base, &[base.join("home/.hermes")], &mut readable);
        readable.sort();
        let expected: Vec<PathBuf> =
            ["home/.bashrc", "home/link-to-other", "home/projects", "other"].iter().map(|entry| base.join(entry)).collect();
        assert_eq!(readable, expected);
    }
}
