//! Hermes' own life: stopping or updating the gateway, starting it outside systemd, its
//! containers, its launchd service.

use super::super::invocation::Invocation;
use super::super::judge::Judge;
use crate::keys;

/// Docker and compose global options that take a separate value.
const DOCKER_GLOBAL_WITH_VALUE: &[&str] = &[
    "-H",
    "--host",
    "-c",
    "--context",
    "--config",
    "-l",
    "--log-level",
    "--tlscacert",
    "--tlscert",
    "--tlskey",
    "-f",
    "--file",
    "-p",
    "--project-name",
    "--project-directory",
    "--env-file",
    "--profile",
    "--url",
    "--connection",
    "--identity",
];

impl Judge<'_> {
    pub(crate) fn hermes(&mut self, invocation: &Invocation) {
        let words: Vec<&str> = invocation.texts().filter(|text| !text.starts_with('-')).collect();
        let shown = format!("hermes {}", invocation.texts().collect::<Vec<_>>().join(" "));
        // Global options may carry a value (`hermes -p work gateway stop`), so the subcommand
        // is looked for among the first words rather than at a fixed place.
        let subcommand = |first: &str, second: Option<&str>| {
            words
                .iter()
                .take(3)
                .position(|word| *word == first)
                .is_some_and(|at| second.is_none_or(|second| words.get(at + 1) == Some(&second)))
        };
        if subcommand("gateway", Some("stop")) || subcommand("gateway", Some("restart")) {
            self.flag(keys::GATEWAY_STOP, shown);
        } else if subcommand("update", None) && words.iter().position(|word| *word == "update").is_some_and(|at| at <= 1) {
            self.flag(keys::HERMES_UPDATE, shown);
        } else if subcommand("gateway", Some("run")) && (invocation.background || invocation.behind("setsid") || invocation.behind("nohup"))
        {
            self.flag(keys::GATEWAY_OUTSIDE_SYSTEMD, shown);
        }
    }

    pub(crate) fn docker(&mut self, invocation: &Invocation) {
        let mut words = Vec::new();
        let mut args = invocation.texts();
        while let Some(text) = args.next() {
            if DOCKER_GLOBAL_WITH_VALUE.contains(&text) {
                args.next();
            } else if !text.starts_with('-') {
                words.push(text);
            }
        }
        let compose = invocation.name.ends_with("-compose") || words.first() == Some(&"compose");
        let verb = if compose && !invocation.name.ends_with("-compose") { words.get(1) } else { words.first() };
        let shown = format!("{} {}", invocation.name, invocation.texts().collect::<Vec<_>>().join(" "));
        match verb.copied() {
            Some("restart" | "stop" | "kill" | "down") if compose => self.flag(keys::COMPOSE_LIFECYCLE, shown),
            Some("restart" | "stop" | "kill") => self.flag(keys::DOCKER_LIFECYCLE, shown),
            _ => {}
        }
    }

    /// `launchctl stop|kickstart|bootout|… <hermes label>`; a label known only at run time
    /// may be Hermes' too.
    pub(crate) fn launchctl(&mut self, invocation: &Invocation) {
        const STOPPING: &[&str] = &["stop", "kickstart", "bootout", "unload", "kill", "disable", "remove"];
        let stops = invocation.args.first().is_some_and(|verb| STOPPING.contains(&verb.text.as_str()));
        let hermes = invocation.args.iter().any(|field| field.dynamic || field.text.to_lowercase().contains("hermes"));
        if stops && hermes {
            self.flag(keys::LAUNCHD_STOP, format!("launchctl {}", invocation.texts().collect::<Vec<_>>().join(" ")));
        }
    }
}
