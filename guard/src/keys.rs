//! The stable pattern keys: the description strings approvals remember.
//!
//! A key is part of the contract with the user's stored approvals (`/approve session`, the
//! permanent `command_allowlist`), so a key never changes its spelling once shipped. The
//! hardline and dangerous keys are the descriptions of the reference approval policy
//! (behaviour reference §6.1 and §6.2); the guard keys are this crate's own, for what the
//! syntax tree can see that the regular expressions could not (writes outside the workspace,
//! code built at run time, inputs that cannot be parsed).

// Hardline (§6.1): never runnable, whatever the approval mode.
pub const DELETE_ROOT: &str = "recursive delete of root filesystem";
pub const DELETE_SYSTEM_DIR: &str = "recursive delete of system directory";
pub const DELETE_HOME: &str = "recursive delete of home directory";
pub const FORMAT_FILESYSTEM_MKFS: &str = "format filesystem (mkfs)";
pub const WIPE_RAW_DEVICE: &str = "wipe raw block device";
pub const DD_RAW_DEVICE: &str = "dd to raw block device";
pub const REDIRECT_RAW_DEVICE: &str = "redirect to raw block device";
pub const FORK_BOMB: &str = "fork bomb";
pub const KILL_ALL: &str = "kill all processes";
pub const SHUTDOWN: &str = "system shutdown/reboot";
pub const INIT_SHUTDOWN: &str = "init 0/6 (shutdown/reboot)";
pub const SYSTEMCTL_SHUTDOWN: &str = "systemctl poweroff/reboot";
pub const TELINIT_SHUTDOWN: &str = "telinit 0/6 (shutdown/reboot)";
pub const SUDO_STDIN: &str = "sudo password guessing via stdin (sudo -S)";
pub const PARSER_LIMIT: &str = "command parser limit exceeded";

/// Every hardline key.
pub const HARDLINE: &[&str] = &[
    DELETE_ROOT,
    DELETE_SYSTEM_DIR,
    DELETE_HOME,
    FORMAT_FILESYSTEM_MKFS,
    WIPE_RAW_DEVICE,
    DD_RAW_DEVICE,
    REDIRECT_RAW_DEVICE,
    FORK_BOMB,
    KILL_ALL,
    SHUTDOWN,
    INIT_SHUTDOWN,
    SYSTEMCTL_SHUTDOWN,
    TELINIT_SHUTDOWN,
    SUDO_STDIN,
    PARSER_LIMIT,
];

// Dangerous (§6.2): runnable after approval. File deletion and permissions.
pub const DELETE_IN_ROOT_PATH: &str = "delete in root path";
pub const RECURSIVE_DELETE: &str = "recursive delete";
pub const RECURSIVE_DELETE_LONG: &str = "recursive delete (long flag)";
pub const WINDOWS_CMD_DELETE: &str = "Windows cmd destructive delete";
pub const POWERSHELL_DELETE: &str = "Windows PowerShell destructive delete";
pub const POWERSHELL_ENCODED: &str = "PowerShell encoded command execution";
pub const WORLD_WRITABLE: &str = "world/other-writable permissions";
pub const WORLD_WRITABLE_RECURSIVE_LONG: &str = "recursive world/other-writable (long flag)";
pub const CHOWN_ROOT: &str = "recursive chown to root";
pub const CHOWN_ROOT_LONG: &str = "recursive chown to root (long flag)";
pub const XARGS_RM: &str = "xargs with rm";
pub const FIND_EXEC_RM: &str = "find -exec/-execdir rm";
pub const FIND_DELETE: &str = "find -delete";
// Disks and databases.
pub const FORMAT_FILESYSTEM: &str = "format filesystem";
pub const DISK_COPY: &str = "disk copy";
pub const WRITE_BLOCK_DEVICE: &str = "write to block device";
pub const SQL_DROP: &str = "SQL DROP";
pub const SQL_DELETE_WITHOUT_WHERE: &str = "SQL DELETE without WHERE";
pub const SQL_TRUNCATE: &str = "SQL TRUNCATE";
// System state and processes.
pub const OVERWRITE_SYSTEM_CONFIG: &str = "overwrite system config";
pub const STOP_SERVICE: &str = "stop/restart system service";
pub const FORCE_KILL: &str = "force kill processes";
pub const FORCE_KILLALL: &str = "force kill processes (killall -KILL)";
pub const FORCE_KILLALL_SIGNAL: &str = "force kill processes (killall -s KILL)";
pub const KILLALL_REGEX: &str = "kill processes by regex (killall -r)";
// Code execution and remote content.
pub const SHELL_INLINE: &str = "shell command via -c/-lc flag";
pub const SCRIPT_INLINE: &str = "script execution via -e/-c flag";
pub const PIPE_REMOTE_TO_SHELL: &str = "pipe remote content to shell";
pub const REMOTE_PROCESS_SUBSTITUTION: &str = "execute remote script via process substitution";
pub const REMOTE_COMMAND_SUBSTITUTION: &str = "execute remote content via command substitution";
pub const PIPE_DECODED_TO_SHELL: &str = "pipe decoded content to shell (possible command obfuscation)";
pub const PIPE_XXD_TO_SHELL: &str = "pipe xxd-decoded content to shell (possible command obfuscation)";
pub const PIPE_TR_TO_SHELL: &str = "pipe tr-transformed output to shell (possible command obfuscation)";
pub const PIPE_OPENSSL_TO_SHELL: &str = "pipe openssl-decoded content to shell (possible command obfuscation)";
pub const SCRIPT_HEREDOC: &str = "script execution via heredoc";
pub const SHELL_HEREDOC: &str = "shell execution via heredoc";
pub const CHMOD_THEN_EXECUTE: &str = "chmod +x followed by immediate execution";
pub const SUDO_PRIVILEGE_FLAG: &str = "sudo with privilege flag (stdin/askpass/shell/list)";
pub const SUDO_COMBINED_FLAG: &str = "sudo with combined-flag privilege escalation";
// Sensitive files.
pub const SYSTEM_FILE_VIA_TEE: &str = "overwrite system file via tee";
pub const SYSTEM_FILE_VIA_REDIRECT: &str = "overwrite system file via redirection";
pub const PROJECT_ENV_VIA_TEE: &str = "overwrite project env/config via tee";
pub const PROJECT_ENV_VIA_REDIRECT: &str = "overwrite project env/config via redirection";
pub const COPY_INTO_SYSTEM_CONFIG: &str = "copy/move file into system config path";
pub const OVERWRITE_PROJECT_ENV: &str = "overwrite project env/config file";
pub const COPY_INTO_SENSITIVE: &str = "copy/move file into sensitive credential/SSH/shell-rc path";
pub const EDIT_SENSITIVE: &str = "in-place edit of sensitive credential/SSH/shell-rc path";
pub const EDIT_SENSITIVE_LONG: &str = "in-place edit of sensitive credential/SSH/shell-rc path (long flag)";
pub const EDIT_SENSITIVE_PERL: &str = "in-place edit of sensitive credential/SSH/shell-rc path (perl/ruby)";
pub const EDIT_SYSTEM_CONFIG: &str = "in-place edit of system config";
pub const EDIT_SYSTEM_CONFIG_LONG: &str = "in-place edit of system config (long flag)";
pub const EDIT_HERMES_CONFIG: &str = "in-place edit of Hermes config/env";
pub const EDIT_HERMES_CONFIG_LONG: &str = "in-place edit of Hermes config/env (long flag)";
pub const EDIT_HERMES_CONFIG_PERL: &str = "in-place edit of Hermes config/env (perl/ruby)";
// Hermes self-preservation.
pub const GATEWAY_STOP: &str = "stop/restart hermes gateway (kills running agents)";
pub const HERMES_UPDATE: &str = "hermes update (restarts gateway, kills running agents)";
pub const COMPOSE_LIFECYCLE: &str = "docker compose restart/stop/kill/down (container lifecycle)";
pub const DOCKER_LIFECYCLE: &str = "docker restart/stop/kill (container lifecycle)";
pub const GATEWAY_OUTSIDE_SYSTEMD: &str = "start gateway outside systemd (use 'systemctl --user restart hermes-gateway')";
pub const SELF_KILL: &str = "kill hermes/gateway process (self-termination)";
pub const KILL_VIA_PGREP: &str = "kill process via pgrep/pidof expansion (self-termination)";
pub const KILL_VIA_PGREP_BACKTICK: &str = "kill process via backtick pgrep/pidof expansion (self-termination)";
pub const LAUNCHD_STOP: &str = "stop/restart hermes launchd service (kills running agents)";
// Git.
pub const GIT_RESET_HARD: &str = "git reset --hard (destroys uncommitted changes)";
pub const GIT_FORCE_PUSH: &str = "git force push (rewrites remote history)";
pub const GIT_FORCE_PUSH_SHORT: &str = "git force push short flag (rewrites remote history)";
pub const GIT_CLEAN_FORCE: &str = "git clean with force (deletes untracked files)";
pub const GIT_BRANCH_FORCE_DELETE: &str = "git branch force delete";
pub const GIT_BRANCH_FORCE_DELETE_LONG: &str = "git branch force delete (long flags)";
pub const GIT_BRANCH_FORCE_DELETE_FORCE_FIRST: &str = "git branch force delete (long flags, force-first)";

/// The distinct keys of the 73 reference patterns (two patterns share the gateway key).
pub const DANGEROUS: &[&str] = &[
    DELETE_IN_ROOT_PATH,
    RECURSIVE_DELETE,
    RECURSIVE_DELETE_LONG,
    WINDOWS_CMD_DELETE,
    POWERSHELL_DELETE,
    POWERSHELL_ENCODED,
    WORLD_WRITABLE,
    WORLD_WRITABLE_RECURSIVE_LONG,
    CHOWN_ROOT,
    CHOWN_ROOT_LONG,
    XARGS_RM,
    FIND_EXEC_RM,
    FIND_DELETE,
    FORMAT_FILESYSTEM,
    DISK_COPY,
    WRITE_BLOCK_DEVICE,
    SQL_DROP,
    SQL_DELETE_WITHOUT_WHERE,
    SQL_TRUNCATE,
    OVERWRITE_SYSTEM_CONFIG,
    STOP_SERVICE,
    KILL_ALL,
    FORCE_KILL,
    FORCE_KILLALL,
    FORCE_KILLALL_SIGNAL,
    KILLALL_REGEX,
    FORK_BOMB,
    SHELL_INLINE,
    SCRIPT_INLINE,
    PIPE_REMOTE_TO_SHELL,
    REMOTE_PROCESS_SUBSTITUTION,
    REMOTE_COMMAND_SUBSTITUTION,
    PIPE_DECODED_TO_SHELL,
    PIPE_XXD_TO_SHELL,
    PIPE_TR_TO_SHELL,
    PIPE_OPENSSL_TO_SHELL,
    SCRIPT_HEREDOC,
    SHELL_HEREDOC,
    CHMOD_THEN_EXECUTE,
    SUDO_PRIVILEGE_FLAG,
    SUDO_COMBINED_FLAG,
    SYSTEM_FILE_VIA_TEE,
    SYSTEM_FILE_VIA_REDIRECT,
    PROJECT_ENV_VIA_TEE,
    PROJECT_ENV_VIA_REDIRECT,
    COPY_INTO_SYSTEM_CONFIG,
    OVERWRITE_PROJECT_ENV,
    COPY_INTO_SENSITIVE,
    EDIT_SENSITIVE,
    EDIT_SENSITIVE_LONG,
    EDIT_SENSITIVE_PERL,
    EDIT_SYSTEM_CONFIG,
    EDIT_SYSTEM_CONFIG_LONG,
    EDIT_HERMES_CONFIG,
    EDIT_HERMES_CONFIG_LONG,
    EDIT_HERMES_CONFIG_PERL,
    GATEWAY_STOP,
    HERMES_UPDATE,
    COMPOSE_LIFECYCLE,
    DOCKER_LIFECYCLE,
    GATEWAY_OUTSIDE_SYSTEMD,
    SELF_KILL,
    KILL_VIA_PGREP,
    KILL_VIA_PGREP_BACKTICK,
    LAUNCHD_STOP,
    GIT_RESET_HARD,
    GIT_FORCE_PUSH,
    GIT_FORCE_PUSH_SHORT,
    GIT_CLEAN_FORCE,
    GIT_BRANCH_FORCE_DELETE,
    GIT_BRANCH_FORCE_DELETE_LONG,
    GIT_BRANCH_FORCE_DELETE_FORCE_FIRST,
];

// The guard's own keys.
pub const UNPARSEABLE: &str = "unparseable command";
pub const DYNAMIC_COMMAND_NAME: &str = "command name known only at run time";
pub const WRITE_OUTSIDE_WORKSPACE: &str = "write outside the workspace";
pub const MOVE_OUTSIDE_WORKSPACE: &str = "move outside the workspace";
pub const DELETE_OUTSIDE_WORKSPACE: &str = "delete outside the workspace";
pub const PERMISSIONS_OUTSIDE_WORKSPACE: &str = "change permissions or ownership outside the workspace";
pub const INLINE_CODE_DELETES: &str = "inline code deletes files";
pub const PIPE_TO_SHELL: &str = "pipe content to shell";
pub const PROCESS_SUBSTITUTION_SCRIPT: &str = "execute script via process substitution";
pub const EVAL_DYNAMIC: &str = "eval of code built at run time";
pub const FIND_EXEC: &str = "find -exec/-execdir runs a command";
pub const XARGS_COMMAND: &str = "xargs runs a command on its input";

/// Every key the guard adds to the reference set.
pub const GUARD: &[&str] = &[
    UNPARSEABLE,
    DYNAMIC_COMMAND_NAME,
    WRITE_OUTSIDE_WORKSPACE,
    MOVE_OUTSIDE_WORKSPACE,
    DELETE_OUTSIDE_WORKSPACE,
    PERMISSIONS_OUTSIDE_WORKSPACE,
    INLINE_CODE_DELETES,
    PIPE_TO_SHELL,
    PROCESS_SUBSTITUTION_SCRIPT,
    EVAL_DYNAMIC,
    FIND_EXEC,
    XARGS_COMMAND,
];

/// Whether `key` is one of the hardline keys.
pub fn is_hardline(key: &str) -> bool {
    HARDLINE.contains(&key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_key_is_spelled_once_and_belongs_to_one_tier() {
        let all: Vec<&str> = HARDLINE.iter().chain(DANGEROUS).chain(GUARD).copied().collect();
        let distinct: HashSet<&str> = all.iter().copied().collect();
        // Two reference patterns are both hardline and dangerous (kill all, fork bomb): the
        // hardline tier wins, the dangerous entry keeps the reference list complete.
        assert_eq!(all.len(), distinct.len() + 2);
        // 73 reference patterns, of which two share the gateway key.
        assert_eq!(DANGEROUS.len(), 72);
    }
}
