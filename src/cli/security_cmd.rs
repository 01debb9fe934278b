//! `hermes security audit`: the risky settings and files of this HERMES_HOME, worst first, each
//! with its fix. Exit 0 when nothing is high, 1 when something is, 78 for an invalid config.

use super::{Cli, config_failure, resolve};
use crate::config::audit::{Severity, audit};
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum SecurityCommand {
    /// List risky settings (public listeners without auth, allow-all users, no admins, sandbox
    /// off, approvals off, webhook routes with acting tools, files open to other users).
    Audit,
}

pub(super) fn run(cli: &Cli, command: &SecurityCommand) -> ExitCode {
    match command {
        SecurityCommand::Audit => audit_command(cli),
    }
}

fn audit_command(cli: &Cli) -> ExitCode {
    let resolved = match resolve(cli) {
        Ok(r) => r,
        Err(e) => return config_failure(&e),
    };
    let findings = audit(&resolved.loaded.config, &resolved.home);
    if findings.is_empty() {
        println!("✓ no risky settings found in {}", resolved.home.root().display());
        return ExitCode::SUCCESS;
    }
    for finding in &findings {
        println!("[{}] {} ({})\n    → {}", finding.severity.label(), finding.what, finding.key, finding.fix);
    }
    let high = findings.iter().filter(|f| f.severity == Severity::High).count();
    println!("{} finding(s), {high} high", findings.len());
    if high > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
