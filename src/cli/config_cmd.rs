//! `hermes config check`: validate and print the resolved configuration, secrets masked.

use super::{Cli, config_failure, resolve};
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration and print it resolved (file + .env + environment), secrets masked.
    Check,
}

pub(super) fn run(cli: &Cli, command: &ConfigCommand) -> ExitCode {
    match command {
        ConfigCommand::Check => {
            let resolved = match resolve(cli) {
                Ok(r) => r,
                Err(e) => return config_failure(&e),
            };
            for w in &resolved.loaded.warnings {
                eprintln!("warning: {w}");
            }
            println!("# HERMES_HOME: {}", resolved.home.root().display());
            println!("{}", resolved.loaded.config.to_masked_yaml());
            eprintln!("config OK ({} warning(s))", resolved.loaded.warnings.len());
            ExitCode::SUCCESS
        }
    }
}
