//! The operator's standing rules about commands, from the configuration: the approval mode, how
//! long to wait, what cron runs do, commands refused outright (`approvals.deny`) and commands
//! approved for ever (`command_allowlist`, which `/approve always` extends and writes back to
//! `config.yaml`).

use crate::config::Config;
use crate::config::{PersistError, add_to_command_allowlist};
use globset::{GlobBuilder, GlobMatcher};
use std::path::PathBuf;
use std::sync::RwLock;
use std::time::Duration;

/// `approvals.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Flagged commands run without asking (inside the sandbox only).
    Off,
    /// Every flagged command asks the chat.
    Manual,
    /// An auxiliary model approves the clearly harmless ones; the rest ask the chat.
    Smart,
}

/// Characters that chain or redirect commands: a glob must not stretch over them, or `git *`
/// would approve `git status; rm -rf ~`.
const SHELL_OPERATORS: [&str; 8] = [";", "&", "|", "`", "$(", ">", "<", "\n"];

fn has_shell_operator(text: &str) -> bool {
    SHELL_OPERATORS.iter().any(|op| text.contains(op))
}

/// One `command_allowlist` entry: the exact command, or a glob when it has no shell operator.
struct AllowEntry {
    text: String,
    glob: Option<GlobMatcher>,
}

impl AllowEntry {
    fn new(text: &str) -> Self {
        let text = text.trim().to_string();
        let glob = (!has_shell_operator(&text) && text.contains(['*', '?', '[']))
            .then(|| GlobBuilder::new(&text).literal_separator(false).build().ok().map(|g| g.compile_matcher()))
            .flatten();
        Self { text, glob }
    }

    fn allows(&self, command: &str) -> bool {
        command == self.text || (!has_shell_operator(command) && self.glob.as_ref().is_some_and(|g| g.is_match(command)))
    }
}

pub(crate) struct ApprovalRules {
    pub mode: Mode,
    pub timeout: Duration,
    /// `approvals.cron_mode: approve`.
    pub cron_approves: bool,
    deny: Vec<(String, GlobMatcher)>,
    allow: RwLock<Vec<AllowEntry>>,
    /// Where `/approve always` writes.
    config_file: PathBuf,
}

impl ApprovalRules {
    pub(crate) fn from_config(config: &Config, config_file: PathBuf) -> Self {
        let mode = match config.approvals.mode.as_str() {
            "off" => Mode::Off,
            "manual" => Mode::Manual,
            _ => Mode::Smart,
        };
        let deny = config
            .approvals
            .deny
            .iter()
            .filter_map(|rule| match GlobBuilder::new(rule.trim()).case_insensitive(true).literal_separator(false).build() {
                Ok(glob) => Some((rule.clone(), glob.compile_matcher())),
                Err(e) => {
                    // Validation refuses bad globs at load; this only guards a rule added later.
                    tracing::error!(rule, error = %e, "approvals.deny rule is not a valid glob; it is ignored");
                    None
                }
            })
            .collect();
        Self {
            mode,
            timeout: Duration::from_secs(config.approvals.timeout.max(1)),
            cron_approves: config.approvals.cron_mode == "approve",
            deny,
            allow: RwLock::new(config.command_allowlist.iter().map(|c| AllowEntry::new(c)).collect()),
            config_file,
        }
    }

    /// The `approvals.deny` rule `command` matches, if any.
    pub(crate) fn denied_by(&self, command: &str) -> Option<&str> {
        let command = command.trim();
        self.deny.iter().find(|(_, glob)| glob.is_match(command)).map(|(rule, _)| rule.as_str())
    }

    /// Whether `command` was approved for ever.
    pub(crate) fn allowlisted(&self, command: &str) -> bool {
        let command = command.trim();
        self.allow.read().unwrap_or_else(std::sync::PoisonError::into_inner).iter().any(|entry| entry.allows(command))
    }

    /// Approve `command` for ever: at once for this gateway, and in `config.yaml` for the next.
    pub(crate) fn allow_forever(&self, command: &str) -> Result<(), PersistError> {
        add_to_command_allowlist(&self.config_file, command.trim())?;
        self.allow.write().unwrap_or_else(std::sync::PoisonError::into_inner).push(AllowEntry::new(command));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(yaml: &str) -> (tempfile::TempDir, ApprovalRules) {
        let dir = tempfile::tempdir().unwrap();
        let config: Config = serde_yaml_ng::from_str(yaml).unwrap();
        let rules = ApprovalRules::from_config(&config, dir.path().join("config.yaml"));
        (dir, rules)
    }

    #[test]
    fn deny_rules_are_case_insensitive_globs() {
        let (_dir, rules) = rules("approvals:\n  deny: ['git push*', '*DROP TABLE*']\n");
        assert_eq!(rules.denied_by("git push --force origin main"), Some("git push*"));
        assert_eq!(rules.denied_by("psql -c 'drop table users'"), Some("*DROP TABLE*"));
        assert_eq!(rules.denied_by("git status"), None);
    }

    #[test]
    fn an_allowlist_glob_never_stretches_over_a_shell_operator() {
        let (_dir, rules) = rules("command_allowlist: ['git reset --hard*', 'rm -rf build && make']\n");
        assert!(rules.allowlisted("git reset --hard HEAD~1"));
        assert!(!rules.allowlisted("git reset --hard; rm -rf ~"), "a chained command is not the approved one");
        assert!(!rules.allowlisted("git reset --hard $(curl evil)"));
        assert!(rules.allowlisted("rm -rf build && make"), "an entry with operators matches exactly");
        assert!(!rules.allowlisted("rm -rf build && make && rm -rf ~"));
    }

    #[test]
    fn allowing_forever_takes_effect_at_once_and_is_written_back() {
        let (dir, rules) = rules("approvals:\n  mode: manual\n");
        assert!(!rules.allowlisted("rm -rf /srv/cache"));
        rules.allow_forever("rm -rf /srv/cache").unwrap();
        assert!(rules.allowlisted("rm -rf /srv/cache"));
        let written = std::fs::read_to_string(dir.path().join("config.yaml")).unwrap();
        let reloaded: Config = serde_yaml_ng::from_str(&written).unwrap();
        assert_eq!(reloaded.command_allowlist, ["rm -rf /srv/cache"]);
    }
}
