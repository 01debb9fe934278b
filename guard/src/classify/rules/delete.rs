//! Deleting files: `rm`, `rmdir`, `unlink`.
//!
//! Recursive deletion is flagged wherever it happens (an `rm -rf` in the workspace still
//! destroys uncommitted work); of `/`, a system directory or the home directory it is never
//! runnable. A plain delete is safe inside the workspace and flagged outside it.

use super::super::expand::Field;
use super::super::invocation::Invocation;
use super::super::judge::Judge;
use super::super::paths::{Place, Target};
use super::{Syntax, parse_args};
use crate::keys;

/// How a delete reaches its targets.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recursion {
    None,
    ShortFlag,
    LongFlag,
}

impl Judge<'_> {
    pub(crate) fn rm(&mut self, invocation: &Invocation) {
        let args = parse_args(&invocation.args, &Syntax { short_values: "", long_values: &[] });
        let recursion = if args.options.iter().any(|(flag, _)| flag == "-r" || flag == "-R") {
            Recursion::ShortFlag
        } else if args.has_long("--recursive", 1) {
            Recursion::LongFlag
        } else {
            Recursion::None
        };
        for operand in &args.operands {
            self.deleted(operand, invocation, recursion, "rm");
        }
        if args.operands.is_empty() && invocation.args.iter().any(|field| field.dynamic) {
            self.flag(keys::DELETE_OUTSIDE_WORKSPACE, "rm of paths known only at run time");
        }
    }

    pub(crate) fn remove_entries(&mut self, invocation: &Invocation) {
        let args = parse_args(&invocation.args, &Syntax { short_values: "", long_values: &[] });
        for operand in &args.operands {
            self.deleted(operand, invocation, Recursion::None, &invocation.name);
        }
    }

    /// Judges deleting one path.
    pub(crate) fn deleted(&mut self, path: &Field, invocation: &Invocation, recursion: Recursion, how: &str) {
        let target = self.context.target(&path.text, path.dynamic, path.glob, invocation.cwd.as_deref());
        if recursion != Recursion::None {
            self.recursive_delete(&target, how);
            let key = if recursion == Recursion::LongFlag { keys::RECURSIVE_DELETE_LONG } else { keys::RECURSIVE_DELETE };
            self.flag(key, format!("{how} {}", target.shown()));
        }
        if target.place.is_outside() {
            // The reference key for an absolute path; the guard's own for `../x`, `~/x`, `$VAR`.
            let key = if path.text.starts_with('/') && target.place != Place::Unknown {
                keys::DELETE_IN_ROOT_PATH
            } else {
                keys::DELETE_OUTSIDE_WORKSPACE
            };
            self.flag(key, format!("{how} {}", target.shown()));
        }
    }

    /// The hardline cases of recursive deletion.
    pub(crate) fn recursive_delete(&mut self, target: &Target, how: &str) {
        if self.context.is_root(target) {
            self.flag(keys::DELETE_ROOT, format!("{how} {}", target.shown()));
        } else if self.context.is_home(target) {
            self.flag(keys::DELETE_HOME, format!("{how} {}", target.shown()));
        } else if self.context.is_system_dir(target) {
            self.flag(keys::DELETE_SYSTEM_DIR, format!("{how} {}", target.shown()));
        }
    }
}
