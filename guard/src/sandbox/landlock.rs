//! The Landlock calls: probing the ABI, building the ruleset, restricting a process.

use super::rules::{PathAccess, PathRule};
use super::{Availability, SandboxError};
use landlock::{ABI, Access, AccessFs, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// The ABI whose file-system rights are handled. Pinned rather than "the newest the kernel has"
/// so a kernel upgrade cannot start refusing things this policy never granted (ABI 9 adds
/// connecting to Unix sockets by path, which would cut off Docker and D-Bus). ABI 5 is the last
/// to add a file-system right before that; newer kernels enforce it exactly.
const HANDLED_ABI: ABI = ABI::V5;

/// `LANDLOCK_CREATE_RULESET_VERSION`: asks `landlock_create_ruleset` for the ABI version.
const CREATE_RULESET_VERSION: libc::c_uint = 1;

pub(super) fn probe() -> Availability {
    // SAFETY: the version query passes no attribute (null, size 0) and only returns a number.
    let version =
        unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<libc::c_void>(), 0usize, CREATE_RULESET_VERSION) };
    match u32::try_from(version) {
        Ok(abi) if abi > 0 => Availability::Supported { abi },
        _ if io::Error::last_os_error().raw_os_error() == Some(libc::EOPNOTSUPP) => Availability::NotEnabled,
        _ => Availability::NotImplemented,
    }
}

pub(super) fn build_ruleset(rules: &[PathRule]) -> Result<OwnedFd, SandboxError> {
    let refused = |error: landlock::RulesetError| SandboxError::Ruleset(Box::new(error));
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(HANDLED_ABI)).map_err(refused)?.create().map_err(refused)?;
    for rule in rules {
        let fd = match PathFd::new(&rule.path) {
            Ok(fd) => fd,
            // A read rule for an entry that vanished since it was listed: leaving it out only
            // makes the sandbox stricter.
            Err(_) if rule.access == PathAccess::Read => continue,
            Err(error) => return Err(SandboxError::Path { path: rule.path.clone(), source: io::Error::other(error) }),
        };
        let is_dir = std::fs::metadata(&rule.path).is_ok_and(|metadata| metadata.is_dir());
        let mut access = rights(rule.access);
        if !is_dir {
            access &= AccessFs::from_file(HANDLED_ABI);
        }
        ruleset = ruleset.add_rule(PathBeneath::new(fd, access)).map_err(refused)?;
    }
    Option::<OwnedFd>::from(ruleset).ok_or(SandboxError::Unavailable(Availability::NotImplemented))
}

fn rights(access: PathAccess) -> BitFlags<AccessFs> {
    match access {
        PathAccess::Read => AccessFs::from_read(HANDLED_ABI),
        PathAccess::ReadWrite => AccessFs::from_all(HANDLED_ABI),
        PathAccess::Device => AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev | AccessFs::ReadDir,
    }
}

/// Restricts the calling process with `ruleset`: async-signal-safe (two system calls).
pub(super) fn restrict_self(ruleset: &OwnedFd) -> io::Result<()> {
    // SAFETY: prctl with constant arguments; no memory is passed.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `ruleset` is an open Landlock ruleset descriptor owned by the prepared sandbox,
    // which outlives this call; flags are 0.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
