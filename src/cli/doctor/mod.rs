//! `hermes doctor`: one line per check, a fix under every failure, exit 0 when nothing failed
//! (warnings do not fail), 1 otherwise, 78 for an invalid configuration.
//!
//! * [`config`]: the configuration, and the config.yaml keys this build does not support.
//! * [`home`]: HERMES_HOME exists, is writable and private; secret files are not readable by
//!   others; the state database opens.
//! * [`sandbox`]: Landlock and its ABI.
//! * [`provider`]: a one-token completion of the configured model.
//! * [`platforms`]: each enabled adapter asks its platform who it is (credentials and endpoint).
//! * [`mcp`]: each enabled MCP server connects and lists its tools within its `connect_timeout`.
//! * [`service`]: the systemd unit of this profile, and linger.
//! * [`clock`]: this machine's clock against the provider's `Date`.
//!
//! `--health` ([`health`]) asks only whether the running gateway answers `/health`, for a
//! container's HEALTHCHECK.

mod clock;
mod config;
mod health;
mod home;
mod mcp;
mod platforms;
mod provider;
mod report;
mod sandbox;
mod service;

pub(crate) use health::admin_address;

use super::{Cli, config_failure, resolve};
use report::Report;
use std::process::ExitCode;

pub(super) fn run(cli: &Cli, health_only: bool) -> ExitCode {
    let resolved = match resolve(cli) {
        Ok(r) => r,
        Err(e) => return config_failure(&e),
    };
    if health_only {
        return health::run(&resolved.loaded.config, &resolved.home);
    }
    let runtime = match crate::cli::command_runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let mut report = Report::new();
    let config = &resolved.loaded.config;
    config::check(&mut report, &resolved);
    runtime.block_on(async {
        home::check(&mut report, &resolved.home, config).await;
        sandbox::check(&mut report, config);
        let provider_clock = provider::check(&mut report, config).await;
        platforms::check(&mut report, config, &resolved.home).await;
        mcp::check(&mut report, config, &resolved.home).await;
        service::check(&mut report, &resolved.home);
        clock::check(&mut report, provider_clock);
    });
    let warnings = match report.warnings() {
        0 => String::new(),
        n => format!(" ({n} warning(s))"),
    };
    if report.failures() == 0 {
        println!("\nall checks passed{warnings}");
        ExitCode::SUCCESS
    } else {
        println!("\n{} check(s) failed{warnings}", report.failures());
        ExitCode::FAILURE
    }
}
