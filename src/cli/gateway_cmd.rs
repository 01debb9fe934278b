//! `hermes gateway run [--replace]`, `status [--deep]`, and the systemd service commands
//! (`install`, `uninstall`, `start`, `stop`, `restart`, `list`) implemented in `cli::service`.

use super::{Cli, EXIT_RESTART, config_failure, resolve, service};
use crate::config::LogFormat;
use crate::gateway::ops::status_file::StatusFile;
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
    /// Show the service (installed, current, systemd's view, linger) and the gateway's state.
    /// Exit 0 when the gateway runs, 3 when it does not.
    Status {
        /// Also show the last 20 lines of the service's journal.
        #[arg(long)]
        deep: bool,
        /// Look at the system unit (/etc/systemd/system) rather than the user's.
        #[arg(long)]
        system: bool,
    },
    /// Install this profile's systemd unit, enable it, start it and enable linger. Without a
    /// running systemd the unit is still written and the commands to run are printed (exit 0
    /// with --no-start, else 69).
    Install {
        /// A system unit in /etc/systemd/system (needs root) instead of a user unit.
        #[arg(long)]
        system: bool,
        /// Run the system unit as this user (User=, Group=, HOME, USER, LOGNAME).
        #[arg(long, value_name = "USER", requires = "system")]
        run_as_user: Option<String>,
        /// Replace an installed unit that differs from the generated one (hand edits are lost).
        #[arg(long)]
        force: bool,
        /// Enable the unit but do not start it now.
        #[arg(long)]
        no_start: bool,
    },
    /// Stop and disable this profile's service and remove its unit.
    Uninstall {
        #[arg(long)]
        system: bool,
    },
    /// Start this profile's service.
    Start {
        #[arg(long)]
        system: bool,
    },
    /// Stop this profile's service (running turns drain first).
    Stop {
        #[arg(long)]
        system: bool,
    },
    /// Restart this profile's service.
    Restart {
        #[arg(long)]
        system: bool,
    },
    /// List every profile's service with its installed and active state.
    List,
}

pub(super) fn run(cli: &Cli, command: &GatewayCommand) -> ExitCode {
    // Service commands must work with a broken config.yaml (to stop or inspect the gateway
    // that fails on it), so only `run` and `install` load it.
    match command {
        GatewayCommand::Run { replace } => match resolve(cli) {
            Ok(resolved) => run_gateway(resolved, *replace),
            Err(e) => config_failure(&e),
        },
        GatewayCommand::Status { deep, system } => match service::locate(cli, *system) {
            Ok(located) => {
                service::print_service_status(cli, &located, *deep);
                status(located.home())
            }
            Err(code) => code,
        },
        GatewayCommand::Install { system, run_as_user, force, no_start } => service::install(
            cli,
            &service::InstallOptions { system: *system, run_as_user: run_as_user.clone(), force: *force, no_start: *no_start },
        ),
        GatewayCommand::Uninstall { system } => service::uninstall(cli, *system),
        GatewayCommand::Start { system } => service::control(cli, *system, "start"),
        GatewayCommand::Stop { system } => service::control(cli, *system, "stop"),
        GatewayCommand::Restart { system } => service::control(cli, *system, "restart"),
        GatewayCommand::List => service::list(cli),
    }
}

fn run_gateway(resolved: super::Resolved, replace: bool) -> ExitCode {
    let config = resolved.loaded.config;
    let format = match config.logging.format {
        LogFormat::Text => observe::LogFormat::Text,
        LogFormat::Json => observe::LogFormat::Json,
    };
    let files = observe::logfile::Rotation {
        dir: resolved.home.logs_dir(),
        max_bytes: config.logging.max_size_mb.saturating_mul(1024 * 1024),
        backups: config.logging.backup_count,
    };
    observe::init_with_files(&config.logging.level.to_lowercase(), format, config.secret_values(), Some(files));
    for warning in &resolved.loaded.warnings {
        tracing::warn!("{warning}");
    }
    gateway::ops::heap_trim::limit_arenas(config.gateway.memory.malloc_arenas);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("hermes").build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hermes: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let credential_lock_dir = gateway::ops::credential_lock::lock_dir(|name| std::env::var_os(name));
    if credential_lock_dir.is_none() {
        tracing::warn!("neither HOME, XDG_STATE_HOME nor HERMES_GATEWAY_LOCK_DIR is set: running without the one-gateway-per-token guard");
    }
    let outcome =
        runtime.block_on(gateway::run(resolved.home, config, RunOptions { replace, credential_lock_dir, ..RunOptions::default() }));
    // Adapters' background tasks must not keep a stopped gateway alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match outcome {
        Ok(ExitReason::Stopped) => ExitCode::SUCCESS,
        Ok(ExitReason::RestartRequested | ExitReason::LeaseLost) => ExitCode::from(EXIT_RESTART),
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
    let alive = super::process_alive(status.pid);
    // The running gateway's own answer is now; the status file is up to a few seconds old.
    if let Some(live) = alive.then(|| live_health(home)).flatten() {
        for line in live {
            println!("{line}");
        }
    }
    println!("Recent gateway health:");
    for line in status.health_lines(alive) {
        println!("{line}");
    }
    if alive { ExitCode::SUCCESS } else { ExitCode::from(3) }
}

/// What the running gateway's admin listener (`gateway.admin_port`) says about its adapters now,
/// when the configuration names one and it answers; `None` otherwise (the status file stays).
fn live_health(home: &crate::config::Home) -> Option<Vec<String>> {
    let env = crate::config::Env::layered(&home.env_file(), crate::config::Env::from_process()).ok()?;
    let config = crate::config::load(home, &env).ok()?.config;
    let addr = super::doctor::admin_address(&config.gateway.admin_host, config.gateway.admin_port?);
    let url = format!("http://{addr}/readyz");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
    let body: serde_json::Value = runtime.block_on(async {
        let client = reqwest::Client::builder().timeout(std::time::Duration::from_secs(3)).build().ok()?;
        client.get(&url).send().await.ok()?.json().await.ok()
    })?;
    let mut lines = vec![format!("Live ({url}): {}", body["status"].as_str().unwrap_or("unknown"))];
    for adapter in body["adapters"].as_array().into_iter().flatten() {
        let detail = adapter["detail"].as_str().map(|d| format!(" — {d}")).unwrap_or_default();
        lines.push(format!("  {}: {}{detail}", adapter["platform"].as_str().unwrap_or("?"), adapter["state"].as_str().unwrap_or("?")));
    }
    // MCP servers, apart: one that is down costs its tools, not readiness.
    for server in body["mcp"].as_array().into_iter().flatten() {
        let error = server["last_error"].as_str().map(|e| format!(" — {e}")).unwrap_or_default();
        let (name, state) = (server["name"].as_str().unwrap_or("?"), server["state"].as_str().unwrap_or("?"));
        lines.push(format!("  mcp {name}: {state}, {} tool(s){error}", server["tools"].as_u64().unwrap_or(0)));
    }
    Some(lines)
}
