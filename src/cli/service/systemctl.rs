//! Talking to systemd through its own tools: `systemctl`, `loginctl`, `journalctl` and
//! `systemd-analyze verify`, found on PATH. Each call's outcome tells a systemd that is not
//! there (no binary, or no running manager as in a container) apart from a refusal, so callers
//! can still write the unit and print the commands to run.

use super::unit::Scope;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// What running one systemd tool gave.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Exit 0, with its standard output.
    Done(String),
    /// The manager answered and refused (or the state asked about is false), with its message.
    Failed { message: String },
    /// No systemd to talk to, and why.
    Unavailable(String),
}

/// Runs `program args`, classifying the result.
fn run(program: &str, args: &[&str]) -> Outcome {
    let output = match Command::new(program).args(args).output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Outcome::Unavailable(format!("`{program}` was not found on PATH"));
        }
        Err(e) => return Outcome::Unavailable(format!("cannot run `{program}`: {e}")),
    };
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    if output.status.success() {
        return Outcome::Done(stdout);
    }
    // What systemctl says in a container or a session without a user manager.
    if stderr.contains("booted with systemd") || stderr.contains("Failed to connect to") {
        return Outcome::Unavailable(stderr.lines().next().unwrap_or_default().to_string());
    }
    let message = if stderr.is_empty() { stdout.trim().to_string() } else { stderr };
    Outcome::Failed { message }
}

/// `systemctl` for one scope.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Systemctl {
    pub scope: Scope,
}

impl Systemctl {
    fn scoped<'a>(&self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = Vec::with_capacity(args.len() + 1);
        if self.scope == Scope::User {
            all.push("--user");
        }
        all.extend_from_slice(args);
        all
    }

    pub(crate) fn run(&self, args: &[&str]) -> Outcome {
        run("systemctl", &self.scoped(args))
    }

    /// The command line a user would type for `args`.
    pub(crate) fn command_line(&self, args: &[&str]) -> String {
        let prefix = if self.scope == Scope::System && !is_root() { "sudo systemctl" } else { "systemctl" };
        format!("{prefix} {}", self.scoped(args).join(" "))
    }

    /// `systemctl show` of a few properties, as a map.
    pub(crate) fn show(&self, unit: &str, properties: &[&str]) -> Result<BTreeMap<String, String>, Outcome> {
        let list = format!("--property={}", properties.join(","));
        match self.run(&["show", unit, &list]) {
            Outcome::Done(text) => {
                Ok(text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect())
            }
            other => Err(other),
        }
    }

    /// `journalctl [--user] -u UNIT -n LINES --no-pager`.
    pub(crate) fn journal(&self, unit: &str, lines: usize) -> Outcome {
        let count = lines.to_string();
        let mut args = Vec::new();
        if self.scope == Scope::User {
            args.push("--user");
        }
        args.extend(["-u", unit, "-n", &count, "--no-pager"]);
        let output = match Command::new("journalctl").args(&args).output() {
            Ok(output) => output,
            Err(e) => return Outcome::Unavailable(format!("cannot run `journalctl`: {e}")),
        };
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("No journal files were found") {
            return Outcome::Unavailable("journald has no journal files here (it is not running)".to_string());
        }
        if output.status.success() {
            Outcome::Done(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Outcome::Failed { message: stderr.trim().to_string() }
        }
    }
}

/// `loginctl enable-linger USER`: the user's manager, and so the gateway, outlives their logins.
pub(crate) fn enable_linger(user: &str) -> Outcome {
    run("loginctl", &["enable-linger", user])
}

/// Whether `user` has linger enabled: logind keeps one file per such user, readable without a
/// running logind.
pub(crate) fn linger_enabled(user: &str) -> bool {
    Path::new("/var/lib/systemd/linger").join(user).exists()
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and has no side effects.
    unsafe { libc::geteuid() == 0 }
}

/// What `systemd-analyze verify` thought of a unit.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Accepted; any warnings it printed.
    Accepted(String),
    /// Not checked, and why.
    Skipped(String),
    /// Rejected, with its messages.
    Rejected(String),
}

/// Runs `systemd-analyze [--user] verify` on `text` saved as `name` in a private temporary
/// directory. systemd only warns about settings it cannot parse ("…, ignoring"), and a unit
/// whose settings are silently dropped is not the unit we meant: such warnings about the unit
/// itself count as a rejection. `shown_as` replaces the temporary path in the messages.
pub(crate) fn verify(scope: Scope, name: &str, text: &str, shown_as: &Path) -> Verdict {
    let scratch = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => return Verdict::Skipped(format!("no temporary directory to check the unit in: {e}")),
    };
    let file = scratch.path().join(name);
    let runtime = scratch.path().join("runtime");
    if let Err(e) = std::fs::write(&file, text).and_then(|()| std::fs::create_dir(&runtime)) {
        return Verdict::Skipped(format!("cannot write the unit to check it: {e}"));
    }
    let mut command = Command::new("systemd-analyze");
    if scope == Scope::User {
        // A user-mode check needs a runtime directory; a private one works without a session.
        command.arg("--user").env("XDG_RUNTIME_DIR", &runtime);
    }
    let output = match command.arg("verify").arg(&file).output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Verdict::Skipped("`systemd-analyze` is not installed (Debian: apt install systemd)".to_string());
        }
        Err(e) => return Verdict::Skipped(format!("cannot run `systemd-analyze`: {e}")),
    };
    let temp_path = file.to_string_lossy().into_owned();
    let messages = String::from_utf8_lossy(&output.stderr).replace(&temp_path, &shown_as.to_string_lossy()).trim().to_string();
    let own_setting_dropped = String::from_utf8_lossy(&output.stderr)
        .lines()
        .any(|l| l.starts_with(&format!("{temp_path}:")) && l.to_lowercase().contains("ignoring"));
    if output.status.success() && !own_setting_dropped { Verdict::Accepted(messages) } else { Verdict::Rejected(messages) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_name_the_scope() {
        let user = Systemctl { scope: Scope::User };
        assert_eq!(user.command_line(&["enable", "hermes-gateway.service"]), "systemctl --user enable hermes-gateway.service");
        let system = Systemctl { scope: Scope::System };
        assert!(system.command_line(&["daemon-reload"]).ends_with("systemctl daemon-reload"));
    }

    #[test]
    fn a_missing_tool_is_unavailable_not_a_refusal() {
        assert!(matches!(run("hermes-no-such-systemctl", &["daemon-reload"]), Outcome::Unavailable(_)));
    }

    #[test]
    fn verify_rejects_a_unit_whose_settings_systemd_would_drop() {
        let good = "[Service]\nType=notify\nExecStart=/bin/true\n";
        let bad = "[Service]\nType=notify\nWatchdogSec=sixty\nExecStart=/bin/true\n";
        let shown = Path::new("/etc/systemd/system/hermes-gateway.service");
        match verify(Scope::System, "hermes-gateway.service", good, shown) {
            Verdict::Accepted(_) => {}
            Verdict::Skipped(why) => assert!(why.contains("not installed"), "{why}"),
            Verdict::Rejected(why) => panic!("a valid unit was rejected: {why}"),
        }
        match verify(Scope::User, "hermes-gateway.service", bad, shown) {
            Verdict::Rejected(why) => assert!(why.contains("sixty") && why.contains(&*shown.to_string_lossy()), "{why}"),
            Verdict::Skipped(why) => assert!(why.contains("not installed"), "{why}"),
            Verdict::Accepted(_) => panic!("WatchdogSec=sixty was accepted"),
        }
    }
}
