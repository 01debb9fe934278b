//! The agent's confinement, prepared once per gateway from `terminal.sandbox`: the Landlock
//! sandbox every `terminal` command runs in ([`Confinement::confine`]), the private temp dir the
//! commands get as `TMPDIR`, the reason given to the model when the sandbox stopped a command
//! ([`Confinement::explain`]), and the same policy applied in process to the file tools' paths
//! ([`files`]).
//!
//! The sandbox is the guarantee behind the command classifier: where the kernel has no Landlock
//! the confinement is *degraded* ([`Confinement::degraded`]) and flagged commands are refused
//! whatever the approval mode.

pub(crate) mod files;

use crate::config::SandboxSetting;
use hermes_guard::sandbox::{Availability, PreparedSandbox, SandboxError, SandboxMode, SandboxPolicy};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;

/// How commands and file tools are confined for the life of the gateway.
pub struct Confinement {
    policy: SandboxPolicy,
    /// The Landlock ruleset; `None` when nothing is enforced (mode off, or no Landlock).
    prepared: Option<Arc<PreparedSandbox>>,
    availability: Availability,
    /// The private temp dir, removed when the gateway drops it.
    private_tmp: Option<tempfile::TempDir>,
    /// The policy's directories with symlinks resolved, for the in-process checks.
    real: files::RealRoots,
}

impl std::fmt::Debug for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confinement").field("mode", &self.policy.mode()).field("enforced", &self.enforced()).finish_non_exhaustive()
    }
}

impl Default for Confinement {
    /// No confinement at all: for detached runs and tests that do not ask for one.
    fn default() -> Self {
        let policy = SandboxPolicy::new(SandboxMode::Off, "/", "/", "/");
        Confinement {
            real: files::RealRoots::of(&policy, None),
            policy,
            prepared: None,
            availability: Availability::NotImplemented,
            private_tmp: None,
        }
    }
}

pub(crate) fn mode_of(setting: SandboxSetting) -> SandboxMode {
    match setting {
        SandboxSetting::WorkspaceWrite => SandboxMode::WorkspaceWrite,
        SandboxSetting::ReadOnly => SandboxMode::ReadOnly,
        SandboxSetting::Off => SandboxMode::Off,
    }
}

impl Confinement {
    /// Creates the private temp dir and prepares the sandbox for `workspace` (which must exist),
    /// hiding `hermes_home`. A kernel without Landlock gives a degraded confinement, not an
    /// error; a policy that cannot hide `hermes_home` (it lies inside the workspace) is an error.
    pub fn prepare(setting: SandboxSetting, workspace: &Path, hermes_home: &Path) -> Result<Self, SandboxError> {
        let mode = mode_of(setting);
        let private_tmp = private_tmp_dir(hermes_home).map_err(|source| SandboxError::Path { path: std::env::temp_dir(), source })?;
        let policy = SandboxPolicy::new(mode, workspace, private_tmp.path(), hermes_home);
        let availability = hermes_guard::sandbox::availability();
        let prepared = match policy.prepare() {
            Ok(prepared) if mode != SandboxMode::Off => Some(prepared),
            Ok(_) | Err(SandboxError::Unavailable(_)) => None,
            Err(error) => return Err(error),
        };
        let real = files::RealRoots::of(&policy, Some(private_tmp.path()));
        Ok(Confinement { policy, prepared, availability, private_tmp: Some(private_tmp), real })
    }

    pub fn mode(&self) -> SandboxMode {
        self.policy.mode()
    }

    pub fn availability(&self) -> Availability {
        self.availability
    }

    /// Whether commands really run under Landlock.
    pub fn enforced(&self) -> bool {
        self.prepared.is_some()
    }

    /// Why a sandbox was asked for but is not enforced (the kernel has no Landlock).
    pub fn degraded(&self) -> Option<String> {
        (self.mode() != SandboxMode::Off && !self.enforced()).then(|| self.availability.to_string())
    }

    /// The private temp dir commands get as `TMPDIR` (writable under the sandbox).
    pub fn private_tmp(&self) -> Option<&Path> {
        self.private_tmp.as_ref().map(tempfile::TempDir::path)
    }

    /// Makes `command` run confined, with the private temp dir as its `TMPDIR`.
    pub fn confine(&self, command: &mut tokio::process::Command) {
        if let Some(tmp) = self.private_tmp() {
            command.env("TMPDIR", tmp).env("TMP", tmp).env("TEMP", tmp);
        }
        if let Some(prepared) = &self.prepared {
            let hook = prepared.pre_exec_hook();
            // SAFETY: the hook runs in the forked child before exec and only calls
            // `PreparedSandbox::enforce`, which makes two system calls (prctl and
            // landlock_restrict_self) and neither allocates nor takes locks.
            unsafe {
                command.pre_exec(hook);
            }
        }
    }

    /// The reason for the model when the sandbox (probably) stopped a failed command, read from
    /// its output.
    pub fn explain(&self, output: &str, status: ExitStatus) -> Option<String> {
        if !self.enforced() {
            return None;
        }
        let denial = self.policy.explain_failure(output, &status)?;
        Some(format!("[sandbox] {denial}. {}", self.advice()))
    }

    fn advice(&self) -> String {
        let tmp = self.private_tmp().map(|tmp| format!(" and the private temp dir {} ($TMPDIR)", tmp.display())).unwrap_or_default();
        match self.mode() {
            SandboxMode::ReadOnly => {
                "The sandbox is read-only (terminal.sandbox: read-only): only reading works; ask the user if a file must change.".into()
            }
            _ => format!(
                "Commands may write only in the workspace {}{tmp}, and HERMES_HOME (the gateway's secrets and other chats) is unreadable. \
                 Work inside the workspace instead and do not try to get around the sandbox. If the command truly must act outside it, \
                 call terminal again with `leave_sandbox` saying why: the user is asked to approve that.",
                self.policy.workspace().display()
            ),
        }
    }
}

/// A fresh 0700 directory for the commands' temporary files, outside `HERMES_HOME` (the system
/// temp dir, unless that lies inside `HERMES_HOME`).
fn private_tmp_dir(hermes_home: &Path) -> std::io::Result<tempfile::TempDir> {
    let system = std::env::temp_dir();
    let real_home = std::fs::canonicalize(hermes_home).unwrap_or_else(|_| hermes_home.to_path_buf());
    let real_system = std::fs::canonicalize(&system).unwrap_or_else(|_| system.clone());
    let parent = if real_system.starts_with(&real_home) { PathBuf::from("/tmp") } else { system };
    let dir = tempfile::Builder::new().prefix("hermes-agent-").tempdir_in(parent)?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
    Ok(dir)
}

#[cfg(test)]
mod tests;
