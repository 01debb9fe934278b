//! The command sandbox: Landlock and its ABI on this kernel, which `terminal.sandbox` needs
//! unless it is off.

use super::report::Report;
use crate::config::{Config, SandboxSetting};

pub(super) fn check(report: &mut Report, config: &Config) {
    let landlock = hermes_guard::sandbox::availability();
    match (config.terminal.sandbox, landlock.is_supported()) {
        (_, true) => report.ok(&format!("command sandbox: {landlock}; terminal.sandbox is {}", setting_name(config))),
        (SandboxSetting::Off, false) => report.warn(&format!("command sandbox: {landlock}; terminal.sandbox is off anyway")),
        (_, false) => report.fail(
            &format!("command sandbox: {landlock}. Commands would run unconfined, and flagged ones are refused"),
            "run on Linux 5.13+ with Landlock enabled (boot with lsm=...,landlock), or set terminal.sandbox: off knowingly",
        ),
    }
}

fn setting_name(config: &Config) -> &'static str {
    match config.terminal.sandbox {
        SandboxSetting::WorkspaceWrite => "workspace-write",
        SandboxSetting::ReadOnly => "read-only",
        SandboxSetting::Off => "off",
    }
}
