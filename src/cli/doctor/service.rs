//! The systemd unit of this HERMES_HOME and linger. A minimal check of its own (the service
//! module's renderer is not shared): is there a unit named for this profile in the user's or the
//! system's unit folder, does its `ExecStart` binary still exist and its `HERMES_HOME` match, and
//! for a user unit, is linger on (without it the gateway stops at logout and waits for a login
//! after boot). No unit is only a warning: the gateway may run in a container or a terminal.

use super::report::{Report, shell_word};
use crate::config::Home;
use std::path::{Path, PathBuf};

const SYSTEM_DIR: &str = "/etc/systemd/system";
const LINGER_DIR: &str = "/var/lib/systemd/linger";

pub(super) fn check(report: &mut Report, home: &Home) {
    let name = unit_name(home.profile());
    let user_dir = user_unit_dir();
    let found = [user_dir.clone().map(|d| (d, true)), Some((PathBuf::from(SYSTEM_DIR), false))]
        .into_iter()
        .flatten()
        .map(|(dir, user)| (dir.join(&name), user))
        .find(|(path, _)| path.is_file());
    let Some((path, user)) = found else {
        report.warn(&format!("no systemd unit {name}: the gateway does not start at boot (run `hermes gateway install` for that)"));
        return;
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => return report.fail(&format!("cannot read {}: {e}", path.display()), "run `hermes gateway install --force`"),
    };
    if unit_matches(report, &path, &text, home) {
        report.ok(&format!("systemd unit {} runs this HERMES_HOME", path.display()));
    }
    if user {
        linger(report);
    }
}

/// `hermes-gateway.service`, or `hermes-gateway-<profile>.service`.
fn unit_name(profile: Option<&str>) -> String {
    match profile {
        Some(p) => format!("hermes-gateway-{p}.service"),
        None => "hermes-gateway.service".to_string(),
    }
}

fn user_unit_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("HERMES_SYSTEMD_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")))?;
    Some(config.join("systemd/user"))
}

/// The unit's binary exists and its HERMES_HOME is this one; each mismatch is a failure.
fn unit_matches(report: &mut Report, path: &Path, text: &str, home: &Home) -> bool {
    let reinstall = "run `hermes gateway install --force` with the binary and HERMES_HOME you use now";
    let mut good = true;
    let value = |key: &str| text.lines().find_map(|l| l.trim().strip_prefix(key)).map(str::trim);
    if let Some(binary) = value("ExecStart=").and_then(|cmd| cmd.trim_start_matches(['-', '@', '+', '!']).split_whitespace().next())
        && !Path::new(binary).is_file()
    {
        good = false;
        report.fail(&format!("{} runs {binary}, which no longer exists", path.display()), reinstall);
    }
    let unit_home = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Environment="))
        .flat_map(|v| v.split_whitespace().map(|w| w.trim_matches('"')))
        .find_map(|w| w.strip_prefix("HERMES_HOME="));
    if let Some(unit_home) = unit_home
        && Path::new(unit_home) != home.root()
    {
        good = false;
        report.fail(&format!("{} runs HERMES_HOME={unit_home}, not {}", path.display(), home.root().display()), reinstall);
    }
    good
}

fn linger(report: &mut Report) {
    let Some(user) = std::env::var_os("USER").or_else(|| std::env::var_os("LOGNAME")) else {
        return report.warn("cannot tell whether linger is on: USER is not set");
    };
    let user = user.to_string_lossy().into_owned();
    if Path::new(LINGER_DIR).join(&user).exists() {
        report.ok(&format!("linger is on for {user}: the user unit runs without a login"));
    } else {
        report.fail(
            &format!("linger is off for {user}: the gateway stops at logout and starts only after a login"),
            &format!("sudo loginctl enable-linger {}", shell_word(Path::new(&user))),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_named_per_profile() {
        assert_eq!(unit_name(None), "hermes-gateway.service");
        assert_eq!(unit_name(Some("work")), "hermes-gateway-work.service");
    }
}
