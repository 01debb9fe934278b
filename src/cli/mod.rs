//! The command line: parse, resolve HERMES_HOME and the configuration, dispatch to one file per
//! top-level command, and map outcomes to exit codes (0 ok, 1 failure, 75 restart requested,
//! 78 invalid configuration).

mod config_cmd;
mod cron_cmd;
mod cron_handoff;
mod doctor;
mod gateway_cmd;
mod mcp_cmd;
mod mcp_serve;
mod outbox_cmd;
mod pairing_cmd;
mod security_cmd;
mod service;
mod store_cmd;

use crate::config::{self, ConfigError, Env, Home, Loaded};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code for an invalid configuration (EX_CONFIG); systemd does not restart on it.
pub const EXIT_CONFIG: u8 = 78;
/// Exit code asking the service manager for a restart (EX_TEMPFAIL).
pub const EXIT_RESTART: u8 = 75;

#[derive(Debug, Parser)]
#[command(name = "hermes", version, about = "A messaging gateway that puts an LLM agent into your chat apps")]
pub struct Cli {
    /// Use ~/.hermes/profiles/NAME as HERMES_HOME.
    #[arg(short = 'p', long, global = true)]
    pub profile: Option<String>,
    /// Use this directory as HERMES_HOME (overrides the HERMES_HOME variable).
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run or inspect the gateway.
    Gateway {
        #[command(subcommand)]
        command: gateway_cmd::GatewayCommand,
    },
    /// Inspect the configuration.
    Config {
        #[command(subcommand)]
        command: config_cmd::ConfigCommand,
    },
    /// Scheduled jobs: list, create, edit, pause, resume, run, remove; the ticker's status; one tick.
    Cron {
        #[command(subcommand)]
        command: cron_cmd::CronCommand,
    },
    /// Check that the configuration, HERMES_HOME, the model provider and the platforms work.
    Doctor {
        /// Only ask the running gateway's admin listener for `/health` (for a container's HEALTHCHECK).
        #[arg(long)]
        health: bool,
    },
    /// MCP servers whose tools the agent uses: list, add, remove, or test one; `serve` offers
    /// the gateway's conversations to an MCP client.
    Mcp {
        #[command(subcommand)]
        command: mcp_cmd::McpCommand,
    },
    /// Messages that could not be delivered: list them (and each platform's queue), resend or drop one.
    Outbox {
        #[command(subcommand)]
        command: outbox_cmd::OutboxCommand,
    },
    /// Let strangers in by pairing code: list requests, approve or revoke users.
    Pairing {
        #[command(subcommand)]
        command: pairing_cmd::PairingCommand,
    },
    /// The store: copy a SQLite home into PostgreSQL for replicas that share it.
    Store {
        #[command(subcommand)]
        command: store_cmd::StoreCommand,
    },
    /// Review the security of this installation.
    Security {
        #[command(subcommand)]
        command: security_cmd::SecurityCommand,
    },
    /// Print the version.
    Version,
}

pub fn main() -> ExitCode {
    crate::tls::install_process_crypto_provider();
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("hermes {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Gateway { ref command } => gateway_cmd::run(&cli, command),
        Command::Config { ref command } => config_cmd::run(&cli, command),
        Command::Cron { ref command } => cron_cmd::run(&cli, command),
        Command::Doctor { health } => doctor::run(&cli, health),
        Command::Security { ref command } => security_cmd::run(&cli, command),
        Command::Pairing { ref command } => pairing_cmd::run(&cli, command),
        Command::Outbox { ref command } => outbox_cmd::run(&cli, command),
        Command::Mcp { ref command } => mcp_cmd::run(&cli, command),
        Command::Store { ref command } => store_cmd::run(&cli, command),
    }
}

/// HERMES_HOME, the layered environment (.env under the process environment) and the config.
pub(crate) struct Resolved {
    pub home: Home,
    pub loaded: Loaded,
}

pub(crate) fn resolve(cli: &Cli) -> Result<Resolved, ConfigError> {
    let process = Env::from_process();
    let home = Home::resolve(cli.home.clone(), cli.profile.as_deref(), &process)?;
    let env = Env::layered(&home.env_file(), process)?;
    let loaded = config::load(&home, &env)?;
    Ok(Resolved { home, loaded })
}

/// Whether process `pid` exists (the gateway named by a status or PID file), whoever owns it:
/// one answer for `gateway status`, `doctor --health` and the cron hand-off.
pub(crate) fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // Signal 0 checks existence without touching the process.
    // SAFETY: kill(2) with signal 0 has no side effects; any pid value is valid to pass.
    let delivered = unsafe { libc::kill(pid, 0) == 0 };
    // EPERM: it exists but belongs to another user.
    delivered || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A subcommand's answer on stdout (exit 0), or its failure on stderr (exit 1).
pub(crate) fn report(outcome: Result<String, impl std::fmt::Display>) -> ExitCode {
    match outcome {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("hermes: {message}");
            ExitCode::FAILURE
        }
    }
}

/// A multi-threaded runtime for one command: a shared store's folders are waited on from the
/// command's own thread while a worker runs the database connections.
pub(crate) fn command_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().map_err(|e| {
        eprintln!("hermes: cannot start the async runtime: {e}");
        ExitCode::FAILURE
    })
}

/// Print a configuration error the way every command does, and give exit code 78.
pub(crate) fn config_failure(err: &ConfigError) -> ExitCode {
    eprintln!("hermes: {err}");
    eprintln!("hermes: fix the setting above (config.yaml, .env or the environment) and try again.");
    ExitCode::from(EXIT_CONFIG)
}
