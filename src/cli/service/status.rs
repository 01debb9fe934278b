//! The service half of `hermes gateway status`: is the unit installed, does it still match what
//! this binary generates, what systemd says about it, linger, this binary's version, and with
//! `--deep` the last journal lines. The state file's half stays in `gateway_cmd`.

use super::{Service, account, expected_unit, first_difference, select_home, systemctl};
use crate::cli::Cli;
use crate::config::{self, Env};
use std::collections::BTreeMap;
use systemctl::Outcome;

/// Lines of the journal `--deep` shows.
const JOURNAL_LINES: usize = 20;

const SHOWN_PROPERTIES: &[&str] = &["ActiveState", "SubState", "MainPID", "ExecMainStartTimestamp", "NRestarts", "Result"];

/// Prints the service part of the status; never changes the command's exit code, which is the
/// state file's (0 running, 3 not running).
pub(crate) fn print_service_status(cli: &Cli, service: &Service, deep: bool) {
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "unknown path".to_string());
    if !service.installed() {
        println!("✗ Gateway service is not installed — Run: hermes gateway install");
    } else {
        println!("Service {} ({} unit, {})", service.name(), service.scope.label(), service.path().display());
        print_freshness(cli, service);
        print_systemd_state(service);
        print_linger(service);
    }
    println!("hermes {} ({exe})", env!("CARGO_PKG_VERSION"));
    if deep && service.installed() {
        print_journal(service);
    }
}

/// "up to date" or "outdated — run install --force".
fn print_freshness(cli: &Cli, service: &Service) {
    let installed = match std::fs::read_to_string(service.path()) {
        Ok(text) => text,
        Err(e) => return println!("  ⚠ cannot read the unit: {e}"),
    };
    let run_as_name = installed.lines().find_map(|l| l.strip_prefix("User=")).map(str::trim);
    if let Some(name) = run_as_name {
        println!("  Configured to run as: {name}");
    }
    let drain = match drain_secs(cli) {
        Ok(secs) => secs,
        Err(why) => return println!("  ⚠ cannot compare the unit with this hermes: {why}"),
    };
    let run_as = match run_as_name.map(account::by_name).transpose() {
        Ok(account) => account,
        Err(why) => return println!("  ⚠ the unit runs as a user this system does not know: {why}"),
    };
    match expected_unit(service, drain, run_as.as_ref()) {
        Ok(expected) if expected == installed => println!("  ✓ The unit matches what this hermes generates"),
        Ok(expected) => {
            println!("  ⚠ The unit is outdated: it differs from what this hermes generates ({})", first_difference(&installed, &expected));
            let system = if service.scope == super::Scope::System { " --system" } else { "" };
            println!("    Run: hermes gateway install{system} --force");
        }
        Err(why) => println!("  ⚠ cannot compare the unit with this hermes: {why}"),
    }
}

/// Why the profile's drain timeout cannot be read.
#[derive(Debug, thiserror::Error)]
enum DrainUnknown {
    /// HERMES_HOME or its `.env` cannot be resolved.
    #[error(transparent)]
    NoHome(config::ConfigError),
    #[error("invalid configuration: {0}")]
    InvalidConfig(config::ConfigError),
}

/// The profile's drain timeout, which the unit's stop timeout is derived from.
fn drain_secs(cli: &Cli) -> Result<u64, DrainUnknown> {
    let (home, process) = select_home(cli, None).map_err(DrainUnknown::NoHome)?;
    let env = Env::layered(&home.env_file(), process).map_err(DrainUnknown::NoHome)?;
    let loaded = config::load(&home, &env).map_err(DrainUnknown::InvalidConfig)?;
    Ok(loaded.config.gateway.drain_timeout_secs)
}

fn print_systemd_state(service: &Service) {
    match service.systemctl().show(&service.name(), SHOWN_PROPERTIES) {
        Ok(properties) => print_properties(&properties),
        Err(Outcome::Unavailable(why)) => println!("  ✗ systemctl is unavailable ({why}): cannot ask systemd about the service"),
        Err(Outcome::Failed { message, .. }) => println!("  ⚠ systemctl show failed: {message}"),
        Err(Outcome::Done(_)) => {}
    }
}

fn print_properties(p: &BTreeMap<String, String>) {
    let get = |key: &str| p.get(key).map(String::as_str).unwrap_or("");
    let (active, sub) = (get("ActiveState"), get("SubState"));
    let mut line = format!("  systemd: {active} ({sub})");
    if get("MainPID") != "0" && !get("MainPID").is_empty() {
        line.push_str(&format!(", pid {}", get("MainPID")));
    }
    if !get("ExecMainStartTimestamp").is_empty() {
        line.push_str(&format!(", started {}", get("ExecMainStartTimestamp")));
    }
    line.push_str(&format!(", {} restart(s), result {}", get("NRestarts"), get("Result")));
    println!("{line}");
    if active == "activating" && sub == "auto-restart" {
        println!("  ⏳ Restart pending: systemd is waiting to relaunch the gateway");
    }
    if !matches!(get("Result"), "success" | "") {
        println!("  ⚠ Systemd unit result: {} — see: hermes gateway status --deep", get("Result"));
    }
    if matches!(active, "inactive" | "failed") {
        println!("    Run: hermes gateway start");
    }
}

fn print_linger(service: &Service) {
    if service.scope != super::Scope::User {
        return;
    }
    let Ok(user) = account::current() else { return };
    if systemctl::linger_enabled(&user.name) {
        println!("  ✓ Systemd linger is enabled (service survives logout)");
    } else {
        println!("  ⚠ Systemd linger is disabled (gateway may stop when you log out)");
        println!("    Run: sudo loginctl enable-linger {}", user.name);
    }
}

fn print_journal(service: &Service) {
    println!("Recent logs:");
    match service.systemctl().journal(&service.name(), JOURNAL_LINES) {
        Outcome::Done(text) => {
            for line in text.lines() {
                println!("  {line}");
            }
        }
        Outcome::Unavailable(why) => println!("  journald is unavailable: {why}"),
        Outcome::Failed { message, .. } => println!("  journalctl failed: {message}"),
    }
}
