//! Git operations that destroy work: `reset --hard`, force pushes, `clean -f`, `branch -D`.

use super::super::invocation::Invocation;
use super::super::judge::Judge;
use crate::keys;

/// Git's global options that take a separate value (`git -C dir status`).
const GLOBAL_WITH_VALUE: &[&str] = &["-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"];

impl Judge<'_> {
    pub(crate) fn git(&mut self, invocation: &Invocation) {
        let mut args = invocation.args.iter().map(|field| field.text.as_str());
        let subcommand = loop {
            match args.next() {
                Some(option) if GLOBAL_WITH_VALUE.contains(&option) => {
                    args.next();
                }
                Some(option) if option.starts_with('-') => {}
                other => break other,
            }
        };
        let rest: Vec<&str> = args.collect();
        let shown = format!("git {} {}", subcommand.unwrap_or(""), rest.join(" "));
        let short_cluster_has = |flag: char| rest.iter().any(|arg| arg.starts_with('-') && !arg.starts_with("--") && arg.contains(flag));
        match subcommand {
            Some("reset") if rest.iter().any(|arg| arg.len() >= 3 && "--hard".starts_with(arg)) => self.flag(keys::GIT_RESET_HARD, shown),
            Some("push") => {
                if rest.iter().any(|arg| arg.starts_with("--forc") || (arg.len() >= 3 && "--force".starts_with(arg))) {
                    self.flag(keys::GIT_FORCE_PUSH, shown);
                } else if short_cluster_has('f') {
                    self.flag(keys::GIT_FORCE_PUSH_SHORT, shown);
                } else if rest.iter().any(|arg| arg.starts_with('+')) {
                    // `git push origin +main` force-pushes that ref.
                    self.flag(keys::GIT_FORCE_PUSH, shown);
                }
            }
            Some("clean") if short_cluster_has('f') || rest.contains(&"--force") => self.flag(keys::GIT_CLEAN_FORCE, shown),
            Some("branch") => self.git_branch(&rest, shown),
            _ => {}
        }
    }

    fn git_branch(&mut self, rest: &[&str], shown: String) {
        if rest.iter().any(|arg| arg.starts_with('-') && !arg.starts_with("--") && arg.contains('D')) {
            self.flag(keys::GIT_BRANCH_FORCE_DELETE, shown);
            return;
        }
        let position = |flags: &[&str], short: char| {
            rest.iter().position(|arg| flags.contains(arg) || (arg.starts_with('-') && !arg.starts_with("--") && arg.contains(short)))
        };
        if let (Some(delete), Some(force)) = (position(&["--delete"], 'd'), position(&["--force"], 'f')) {
            let key = if force < delete { keys::GIT_BRANCH_FORCE_DELETE_FORCE_FIRST } else { keys::GIT_BRANCH_FORCE_DELETE_LONG };
            self.flag(key, shown);
        }
    }
}
