//! The approval-policy hook every terminal command passes through. A later issue fills in the
//! full pipeline (dangerous patterns, `/approve` from chat, remembered approvals); until then
//! [`BasicPolicy`] allows everything only when `approvals.mode: off`, and otherwise refuses
//! commands matching an obviously destructive pattern.

use crate::agent::tools::SessionScope;
use async_trait::async_trait;
use regex::RegexSet;
use std::sync::LazyLock;

/// The policy's answer about one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandDecision {
    Allow,
    /// Refused; the reason goes back to the model, which is told not to retry.
    Deny(String),
}

#[async_trait]
pub trait ApprovalPolicy: Send + Sync + 'static {
    async fn check_command(&self, scope: &SessionScope, command: &str) -> CommandDecision;
}

/// Patterns that destroy data or the machine, with the description shown when one matches.
const DESTRUCTIVE: &[(&str, &str)] = &[
    (r"\brm\s+(-[a-zA-Z]*\s+)*-[a-zA-Z]*[rR][a-zA-Z]*\s+(-[a-zA-Z]*\s+)*(/|~|\$HOME|\*|\.)(\s|$|/\*)", "recursive delete of /, ~, . or *"),
    (r"\brm\s+(-[a-zA-Z]*\s+)*-[a-zA-Z]*[rR][a-zA-Z]*\b", "recursive delete"),
    (r"\bmkfs(\.\w+)?\b", "format a filesystem"),
    (r"\bdd\s+.*\bof=/dev/", "write to a block device"),
    (r">\s*/dev/(sd|nvme|hd|vd|mmcblk)", "overwrite a block device"),
    (r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:", "fork bomb"),
    (r"\b(shutdown|reboot|halt|poweroff)\b", "shut down or reboot the machine"),
    (r"\bchmod\s+(-[a-zA-Z]*\s+)*(-R|--recursive)\s+0?777\s+/", "make the filesystem world-writable"),
    (r"\bchown\s+(-[a-zA-Z]*\s+)*(-R|--recursive)\b.*\s/(\s|$)", "recursive chown of /"),
    (r"\bgit\s+push\s+.*(--force|-f)\b", "force push"),
    (r"\bgit\s+reset\s+--hard\b", "discard uncommitted work (git reset --hard)"),
    (r"\bgit\s+clean\s+-[a-zA-Z]*f", "delete untracked files (git clean -f)"),
    (r"\b(curl|wget)\b[^|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b", "pipe a download into a shell"),
    (r"\bDROP\s+(TABLE|DATABASE)\b", "drop a database table"),
    (r"\btruncate\s+-s\s*0\b", "truncate a file to zero"),
    (r"\bkill(all)?\s+(-9\s+)?(-1|1)\b", "kill every process"),
    (r"\bsystemctl\s+(stop|disable|mask)\s", "stop a system service"),
    (r">\s*/etc/", "overwrite a system file in /etc"),
];

static DESTRUCTIVE_SET: LazyLock<Option<RegexSet>> = LazyLock::new(|| {
    // The patterns are constants checked by a unit test; if one ever failed to compile, the
    // policy refuses every command rather than allowing unchecked ones (see `first_match`).
    RegexSet::new(DESTRUCTIVE.iter().map(|(p, _)| format!("(?i){p}"))).ok()
});

/// The description of the first destructive pattern `command` matches.
pub fn first_match(command: &str) -> Option<&'static str> {
    match DESTRUCTIVE_SET.as_ref() {
        Some(set) => set.matches(command).iter().next().map(|i| DESTRUCTIVE[i].1),
        None => Some("the safety patterns could not be loaded"),
    }
}

/// The interim policy: `approvals_off` allows all; otherwise destructive patterns are refused.
pub struct BasicPolicy {
    pub approvals_off: bool,
}

#[async_trait]
impl ApprovalPolicy for BasicPolicy {
    async fn check_command(&self, _scope: &SessionScope, command: &str) -> CommandDecision {
        if self.approvals_off {
            return CommandDecision::Allow;
        }
        match first_match(command) {
            Some(why) => CommandDecision::Deny(format!(
                "BLOCKED: this command needs approval ({why}) and approvals from chat are not available yet. Do not retry it; \
                 find a non-destructive way or ask the user to run it themselves."
            )),
            None => CommandDecision::Allow,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile_and_classify() {
        assert!(DESTRUCTIVE_SET.is_some());
        for cmd in [
            "rm -rf /",
            "rm -rf ~",
            "sudo rm -fr ./build",
            "mkfs.ext4 /dev/sda1",
            "curl https://x.sh | sh",
            "git push --force origin main",
            ":(){ :|:& };:",
        ] {
            assert!(first_match(cmd).is_some(), "{cmd} should be destructive");
        }
        for cmd in ["ls -la", "rm notes.txt", "echo hello > out.txt", "git status", "cargo build", "grep -r foo ."] {
            assert_eq!(first_match(cmd), None, "{cmd} should be allowed");
        }
    }

    #[tokio::test]
    async fn off_allows_everything_otherwise_destructive_is_denied() {
        let scope = SessionScope::default();
        assert_eq!(BasicPolicy { approvals_off: true }.check_command(&scope, "rm -rf /").await, CommandDecision::Allow);
        let strict = BasicPolicy { approvals_off: false };
        assert!(matches!(strict.check_command(&scope, "rm -rf /").await, CommandDecision::Deny(r) if r.contains("BLOCKED")));
        assert_eq!(strict.check_command(&scope, "echo ok").await, CommandDecision::Allow);
    }
}
