//! Confines the agent's commands with Landlock.
//!
//! Prepare in the parent, enforce in the child: [`SandboxPolicy::prepare`] opens every path and
//! builds the Landlock ruleset in the agent's process (allocating, failing with a clear error);
//! [`PreparedSandbox::enforce`] is then called between `fork` and `exec` (from
//! `CommandExt::pre_exec`) and makes exactly two system calls, `prctl(PR_SET_NO_NEW_PRIVS)` and
//! `landlock_restrict_self`, which is what async-signal-safety after `fork` allows. One prepared
//! sandbox serves any number of commands.
//!
//! # What the modes allow
//!
//! - [`SandboxMode::WorkspaceWrite`]: read and execute everything except `HERMES_HOME` and the
//!   raw devices; write only under the workspace, the private temp dir and the extra
//!   read-write dirs, plus `/dev/{null,zero,full,random,urandom,tty,ptmx,pts}`. Network is
//!   allowed.
//! - [`SandboxMode::ReadOnly`]: the same reads; writes only to those devices.
//! - [`SandboxMode::Off`]: nothing is applied.
//!
//! # Hiding one directory with an allow-list
//!
//! Landlock only grants: a rule on `/` would make `HERMES_HOME` readable too. So the rules
//! grant everything *around* it instead. Walking from `/` down to `HERMES_HOME`, every entry of
//! each ancestor directory gets a read rule except the one leading on towards `HERMES_HOME`:
//! for `/home/u/.hermes`, every entry of `/` but `home` (and `dev`, see below), every entry of
//! `/home` but `u`, every entry of `/home/u` but `.hermes`. The ancestors themselves get no
//! rule, so their listings (`ls /`, `ls ~`) are refused while everything in them stays
//! readable; and a workspace inside `HERMES_HOME` is still reachable, because its own
//! read-write rule is added on top. An entry that is a symlink leading into `HERMES_HOME` (or
//! to one of its ancestors) is left out, since a rule follows symlinks. `/dev` is hidden the
//! same way and only the harmless devices are granted, so that a process running as root
//! cannot read `HERMES_HOME`'s blocks from the raw disk.
//!
//! The rules are computed when the sandbox is prepared: a new entry created in `/` or in an
//! ancestor afterwards is unreadable until the next preparation. Pre-existing hard links to
//! files in `HERMES_HOME` and bind mounts of it elsewhere are not detected.
//!
//! # When Landlock is unavailable
//!
//! [`availability`] says whether the kernel supports Landlock and at which ABI. When it does
//! not, [`SandboxPolicy::prepare`] fails for every mode but `Off`; the caller must then refuse
//! flagged commands (and say so in `hermes doctor`), because the sandbox is the guarantee the
//! approval policy leans on. Under the sandbox `no_new_privs` is set, so setuid programs
//! (`sudo`) do not gain privileges: leaving the sandbox is itself something to approve.

mod denial;
#[cfg(target_os = "linux")]
mod landlock;
mod rules;

pub use denial::{Denial, DenialKind};
pub use rules::{PathAccess, PathRule};

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How much a command may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SandboxMode {
    WorkspaceWrite,
    ReadOnly,
    Off,
}

/// Whether this kernel can sandbox, for start-up and `hermes doctor` messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// Landlock works, at this ABI version.
    Supported { abi: u32 },
    /// Built into the kernel but not enabled at boot (`lsm=` lacks `landlock`).
    NotEnabled,
    /// Not built into this kernel, or not Linux.
    NotImplemented,
}

impl Availability {
    pub fn is_supported(self) -> bool {
        matches!(self, Availability::Supported { .. })
    }
}

impl fmt::Display for Availability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Availability::Supported { abi } => write!(f, "Landlock is available (ABI {abi})"),
            Availability::NotEnabled => {
                write!(f, "Landlock is built into this kernel but not enabled (add `landlock` to the `lsm=` boot parameter)")
            }
            Availability::NotImplemented => {
                write!(f, "Landlock is not available on this system (Linux 5.13 or later with Landlock is needed)")
            }
        }
    }
}

/// Probes the running kernel.
pub fn availability() -> Availability {
    #[cfg(target_os = "linux")]
    {
        landlock::probe()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Availability::NotImplemented
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox cannot be applied: {0}")]
    Unavailable(Availability),
    #[error("cannot open {path} for a sandbox rule: {source}")]
    Path {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the sandbox policy is unsafe: {0}")]
    UnsafePolicy(String),
    #[error("Landlock refused the ruleset: {0}")]
    Ruleset(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// What the sandbox allows, built from the directories that matter.
#[derive(Debug, Clone)]
pub struct SandboxPolicy {
    mode: SandboxMode,
    workspace: PathBuf,
    private_tmp: PathBuf,
    hermes_home: PathBuf,
    extra_writable: Vec<PathBuf>,
}

impl SandboxPolicy {
    /// `workspace` and `private_tmp` must exist; `hermes_home` is hidden whether it exists or not.
    pub fn new(mode: SandboxMode, workspace: impl Into<PathBuf>, private_tmp: impl Into<PathBuf>, hermes_home: impl Into<PathBuf>) -> Self {
        SandboxPolicy {
            mode,
            workspace: workspace.into(),
            private_tmp: private_tmp.into(),
            hermes_home: hermes_home.into(),
            extra_writable: Vec::new(),
        }
    }

    /// Another directory commands may write (`WorkspaceWrite` only).
    pub fn with_writable_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.extra_writable.push(dir.into());
        self
    }

    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    pub fn hermes_home(&self) -> &Path {
        &self.hermes_home
    }

    /// The directories commands may write, as given.
    pub fn writable_dirs(&self) -> Vec<&Path> {
        match self.mode {
            SandboxMode::WorkspaceWrite => [self.workspace.as_path(), self.private_tmp.as_path()]
                .into_iter()
                .chain(self.extra_writable.iter().map(PathBuf::as_path))
                .collect(),
            SandboxMode::ReadOnly | SandboxMode::Off => Vec::new(),
        }
    }

    /// The path rules this policy installs, computed from the file system as it is now.
    pub fn rules(&self) -> Result<Vec<PathRule>, SandboxError> {
        rules::compute(self)
    }

    /// Builds the ruleset in this process, to be enforced in children.
    pub fn prepare(&self) -> Result<Arc<PreparedSandbox>, SandboxError> {
        if self.mode == SandboxMode::Off {
            return Ok(Arc::new(PreparedSandbox { ruleset: None }));
        }
        let available = availability();
        if !available.is_supported() {
            return Err(SandboxError::Unavailable(available));
        }
        let rules = self.rules()?;
        #[cfg(target_os = "linux")]
        {
            Ok(Arc::new(PreparedSandbox { ruleset: Some(landlock::build_ruleset(&rules)?) }))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = rules;
            Err(SandboxError::Unavailable(available))
        }
    }
}

/// A ruleset ready to be enforced in child processes.
#[derive(Debug)]
pub struct PreparedSandbox {
    /// The Landlock ruleset; `None` for [`SandboxMode::Off`].
    #[cfg(target_os = "linux")]
    ruleset: Option<std::os::fd::OwnedFd>,
    #[cfg(not(target_os = "linux"))]
    ruleset: Option<()>,
}

impl PreparedSandbox {
    /// Restricts the calling process for good. Meant for the child between `fork` and `exec`:
    /// it only makes two system calls and allocates nothing. An error makes the spawn fail, so
    /// a command never runs unconfined by accident.
    pub fn enforce(&self) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        if let Some(ruleset) = &self.ruleset {
            landlock::restrict_self(ruleset)?;
        }
        Ok(())
    }

    /// A `pre_exec` hook for `std::process::Command` or `tokio::process::Command`.
    pub fn pre_exec_hook(self: &Arc<Self>) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
        let sandbox = Arc::clone(self);
        move || sandbox.enforce()
    }

    /// Makes `command` run confined.
    pub fn confine(self: &Arc<Self>, command: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let hook = self.pre_exec_hook();
        // SAFETY: the hook runs in the forked child before exec and only calls `enforce`, which
        // makes two system calls and neither allocates nor takes locks.
        unsafe {
            command.pre_exec(hook);
        }
    }
}
