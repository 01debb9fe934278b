//! `hermes gateway run [--replace]` and `hermes gateway status`.

use super::{Cli, EXIT_RESTART, config_failure, resolve};
use crate::config::LogFormat;
use crate::gateway::status_file::StatusFile;
use crate::gateway::{self, ExitReason, GatewayError, RunOptions};
use crate::observe;
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum GatewayCommand {
    /// Run the gateway in the foreground until SIGTERM/SIGINT (exit 0) or a restart request (75).
    Run {
        /// Stop the gateway already running on this HERMES_HOME and take over.
        #[arg(long)]
        replace: bool,
    },
    /// Show the state of the gateway running on this HERMES_HOME.
    Status,
}

pub(super) fn run(cli: &Cli, command: &GatewayCommand) -> ExitCode {
    let resolved = match resolve(cli) {
        Ok(r) => r,
        Err(e) => return config_failure(&e),
    };
    match command {
        GatewayCommand::Run { replace } => run_gateway(resolved, *replace),
        GatewayCommand::Status => status(&resolved.home),
    }
}

fn run_gateway(resolved: super::Resolved, replace: bool) -> ExitCode {
    let config = resolved.loaded.config;
    let format = match config.logging.format {
        LogFormat::Text => observe::LogFormat::Text,
        LogFormat::Json => observe::LogFormat::Json,
    };
    observe::init(&config.logging.level.to_lowercase(), format, config.secret_values());
    for warning in &resolved.loaded.warnings {
        tracing::warn!("{warning}");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("hermes").build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hermes: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let credential_lock_dir = gateway::credential_lock::lock_dir(|name| std::env::var_os(name));
    if credential_lock_dir.is_none() {
        tracing::warn!("neither HOME, XDG_STATE_HOME nor HERMES_GATEWAY_LOCK_DIR is set: running without the one-gateway-per-token guard");
    }
    let outcome =
        runtime.block_on(gateway::run(resolved.home, config, RunOptions { replace, credential_lock_dir, ..RunOptions::default() }));
    // Adapters' background tasks must not keep a stopped gateway alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match outcome {
        Ok(ExitReason::Stopped) => ExitCode::SUCCESS,
        Ok(ExitReason::RestartRequested) => ExitCode::from(EXIT_RESTART),
        Err(GatewayError::Config(message)) => {
            tracing::error!("{message}");
            eprintln!("hermes: invalid configuration: {message}");
            ExitCode::from(super::EXIT_CONFIG)
        }
        Err(e) => {
            tracing::error!(error = %e, "the gateway stopped with an error");
            eprintln!("hermes: {e}");
            ExitCode::FAILURE
        }
    }
}

fn status(home: &crate::config::Home) -> ExitCode {
    let path = home.status_file();
    let status = match StatusFile::read(&path) {
        Ok(s) => s,
        Err(_) => {
            println!("gateway: not running (no status file at {})", path.display());
            return ExitCode::from(3);
        }
    };
    let alive = process_alive(status.pid);
    let state = if alive { status.gateway_state.as_str() } else { "stopped" };
    println!("gateway: {state} (pid {}, started {})", status.pid, status.start_time.format("%Y-%m-%d %H:%M:%S UTC"));
    if let Some(reason) = &status.exit_reason {
        println!("last exit: {reason}");
    }
    if alive {
        println!("active turns: {}", status.active_turns);
        if let Some(platforms) = status.platforms.as_object() {
            for (name, p) in platforms {
                let state = p.get("state").and_then(|v| v.as_str()).unwrap_or("unknown");
                match p.get("detail").and_then(|v| v.as_str()) {
                    Some(detail) => println!("  {name}: {state} — {detail}"),
                    None => println!("  {name}: {state}"),
                }
            }
        }
        println!("updated: {}", status.updated_at.format("%Y-%m-%d %H:%M:%S UTC"));
    }
    if !status.poisoned.is_empty() {
        println!("parked events (never replayed; processing them crashed): {}", status.poisoned.len());
        for parked in &status.poisoned {
            println!(
                "  {} ({}, received {}): {}",
                parked.event_id,
                parked.platform,
                parked.received_at.format("%Y-%m-%d %H:%M:%S UTC"),
                parked.reason
            );
        }
    }
    if alive { ExitCode::SUCCESS } else { ExitCode::from(3) }
}

fn process_alive(pid: u32) -> bool {
    // Signal 0 checks existence without touching the process.
    // SAFETY: kill(2) with signal 0 has no side effects; any pid value is valid to pass.
    let delivered = unsafe { libc::kill(pid as libc::pid_t, 0) == 0 };
    // EPERM: it exists but belongs to another user.
    delivered || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
