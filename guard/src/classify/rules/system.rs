//! Disks, processes, power and services: `mkfs`, disk wipers, `kill`/`pkill`/`killall`,
//! `shutdown` and friends, `init`/`telinit`, `systemctl`, `service`.

use super::super::invocation::Invocation;
use super::super::judge::Judge;
use super::super::paths::Place;
use super::{Syntax, parse_args};
use crate::keys;

/// Names that mean Hermes itself (killing them kills the running agents).
const HERMES_PROCESS_NAMES: &[&str] = &["hermes", "gateway", "cli.py"];

impl Judge<'_> {
    pub(crate) fn mkfs(&mut self, invocation: &Invocation) {
        self.flag(keys::FORMAT_FILESYSTEM_MKFS, format!("{} {}", invocation.name, invocation.texts().collect::<Vec<_>>().join(" ")));
    }

    /// `shred`, `wipefs -a`, `blkdiscard`, `sgdisk --zap-all`, `mkswap` on a raw disk. On a
    /// file, `shred` destroys it like a delete.
    pub(crate) fn wipe(&mut self, invocation: &Invocation) {
        let args =
            parse_args(&invocation.args, &Syntax { short_values: "nsot", long_values: &["--iterations", "--size", "--offset", "--types"] });
        let dry_run = args.has("-n") && invocation.name == "wipefs" || args.has("--no-act");
        let destructive = match invocation.name.as_str() {
            "wipefs" => args.has("-a") || args.has("--all"),
            "sgdisk" => args.has("-Z") || args.has("-z") || args.has("-o") || args.has("--zap-all") || args.has("--clear"),
            _ => true,
        };
        for operand in &args.operands {
            let target = self.context.target(&operand.text, operand.dynamic, operand.glob, invocation.cwd.as_deref());
            if target.place == Place::RawDevice && destructive && !dry_run {
                self.flag(keys::WIPE_RAW_DEVICE, format!("{} {}", invocation.name, target.shown()));
            } else if invocation.name == "shred" && target.place.is_outside() {
                self.flag(keys::DELETE_OUTSIDE_WORKSPACE, format!("shred {}", target.shown()));
            }
        }
    }

    /// `kill -9 -1` (every process) is hardline; `kill $(pgrep …)` may be Hermes itself.
    pub(crate) fn kill(&mut self, invocation: &Invocation) {
        let mut signal_given = false;
        for (at, field) in invocation.args.iter().enumerate() {
            let text = field.text.as_str();
            let is_signal_option = !signal_given && at == 0 && text.starts_with('-') && text != "-1" && text != "--";
            if text == "-1" && (signal_given || at > 0 || invocation.args.len() == 1) {
                self.flag(keys::KILL_ALL, format!("kill {}", invocation.texts().collect::<Vec<_>>().join(" ")));
            }
            signal_given |= is_signal_option || (at == 0 && text == "-1");
            let names_hermes = field.substituted.iter().any(|name| name == "pgrep" || name == "pidof");
            if names_hermes {
                let key = if field.backtick { keys::KILL_VIA_PGREP_BACKTICK } else { keys::KILL_VIA_PGREP };
                self.flag(key, format!("kill {}", field.text));
            }
        }
    }

    /// `pkill`/`killall`: force, regex and self-termination.
    pub(crate) fn kill_by_name(&mut self, invocation: &Invocation) {
        let texts: Vec<&str> = invocation.texts().collect();
        let shown = format!("{} {}", invocation.name, texts.join(" "));
        let kill_signal = |text: &str| matches!(text.trim_start_matches('-').to_ascii_uppercase().as_str(), "9" | "KILL" | "SIGKILL");
        if invocation.name == "pkill" {
            let forced = texts.iter().enumerate().any(|(at, text)| {
                (text.starts_with('-') && kill_signal(text))
                    || ((*text == "--signal" || *text == "-s") && texts.get(at + 1).is_some_and(|next| kill_signal(next)))
            });
            if forced {
                self.flag(keys::FORCE_KILL, shown.clone());
            }
        } else {
            if texts.iter().any(|text| text.starts_with('-') && !text.starts_with("--") && kill_signal(text)) {
                self.flag(keys::FORCE_KILLALL, shown.clone());
            }
            if texts.windows(2).any(|pair| (pair[0] == "-s" || pair[0] == "--signal") && kill_signal(pair[1])) {
                self.flag(keys::FORCE_KILLALL_SIGNAL, shown.clone());
            }
            if texts.iter().any(|text| *text == "-r" || *text == "--regexp") {
                self.flag(keys::KILLALL_REGEX, shown.clone());
            }
        }
        let names_hermes = invocation
            .args
            .iter()
            .any(|field| field.dynamic || HERMES_PROCESS_NAMES.iter().any(|name| field.text.to_lowercase().contains(name)));
        if names_hermes {
            self.flag(keys::SELF_KILL, shown);
        }
    }

    pub(crate) fn shutdown(&mut self, invocation: &Invocation) {
        self.flag(
            keys::SHUTDOWN,
            format!("{} {}", invocation.name, invocation.texts().collect::<Vec<_>>().join(" ")).trim_end().to_owned(),
        );
    }

    pub(crate) fn init(&mut self, invocation: &Invocation) {
        let runlevel = invocation.args.iter().find(|field| !field.text.starts_with('-'));
        if runlevel.is_some_and(|level| level.text == "0" || level.text == "6" || level.dynamic) {
            let key = if invocation.name == "telinit" { keys::TELINIT_SHUTDOWN } else { keys::INIT_SHUTDOWN };
            self.flag(key, format!("{} {}", invocation.name, runlevel.map_or("", |level| level.text.as_str())));
        }
    }

    pub(crate) fn systemctl(&mut self, invocation: &Invocation) {
        let args = parse_args(
            &invocation.args,
            &Syntax {
                short_values: "HMtpsonP",
                long_values: &[
                    "--host",
                    "--machine",
                    "--type",
                    "--property",
                    "--signal",
                    "--output",
                    "--lines",
                    "--root",
                    "--kill-whom",
                    "--job-mode",
                ],
            },
        );
        let Some(verb) = args.operands.first() else { return };
        let verb_text = verb.text.to_lowercase();
        let shown = format!("systemctl {}", args.operands.iter().map(|field| field.text.as_str()).collect::<Vec<_>>().join(" "));
        if matches!(verb_text.as_str(), "poweroff" | "reboot" | "halt" | "kexec" | "soft-reboot") || verb.dynamic {
            self.flag(keys::SYSTEMCTL_SHUTDOWN, shown);
        } else if matches!(verb_text.as_str(), "stop" | "disable" | "mask" | "kill") || verb_text.ends_with("restart") {
            self.flag(keys::STOP_SERVICE, shown);
        }
    }

    pub(crate) fn service(&mut self, invocation: &Invocation) {
        let verb = invocation.args.get(1).map(|field| field.text.to_lowercase());
        if verb.is_some_and(|verb| matches!(verb.as_str(), "stop" | "restart" | "force-reload")) {
            self.flag(keys::STOP_SERVICE, format!("service {}", invocation.texts().collect::<Vec<_>>().join(" ")));
        }
    }
}
