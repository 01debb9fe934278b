//! `hermes gateway install | uninstall | start | stop | restart | list`, and the service half of
//! `status`: one systemd unit per HERMES_HOME, rendered from the templates in `systemd/`.
//!
//! Units go to `$XDG_CONFIG_HOME/systemd/user` (or `~/.config/systemd/user`), to
//! `/etc/systemd/system` with `--system`, or to `HERMES_SYSTEMD_DIR` (packaging, tests).
//! Exit codes: 0 done; 1 refused or failed (the message says why and what to do); 78 invalid
//! configuration; 69 (EX_UNAVAILABLE) when `install` wrote the unit but could not start it
//! because systemd is not running here (`--no-start` exits 0 then, nothing was left undone).

mod account;
mod error;
mod status;
mod systemctl;
mod unit;

pub(crate) use status::print_service_status;

use crate::cli::{Cli, config_failure};
use crate::config::{self, Env, Home};
use account::Account;
use error::ServiceError;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use systemctl::{Outcome, Systemctl, Verdict};
use unit::{Launch, Scope, UnitSpec};

/// `install` wrote the unit, but no systemd could enable or start it (EX_UNAVAILABLE).
const EXIT_SYSTEMD_UNAVAILABLE: u8 = 69;

/// What `hermes gateway install` was asked to do.
#[derive(Clone, Debug, Default)]
pub(crate) struct InstallOptions {
    pub system: bool,
    pub run_as_user: Option<String>,
    pub force: bool,
    pub no_start: bool,
}

/// One profile's unit: where it lives and what it runs.
#[derive(Clone, Debug)]
pub(crate) struct Service {
    scope: Scope,
    launch: Launch,
    home: Home,
    dir: PathBuf,
    /// `HERMES_SYSTEMD_DIR` chose the directory (packaging, tests), not systemd's own.
    dir_overridden: bool,
}

impl Service {
    fn name(&self) -> String {
        self.launch.unit_name()
    }

    /// The profile's HERMES_HOME.
    pub(crate) fn home(&self) -> &Home {
        &self.home
    }

    fn path(&self) -> PathBuf {
        self.dir.join(self.name())
    }

    fn installed(&self) -> bool {
        self.path().is_file()
    }

    fn systemctl(&self) -> Systemctl {
        Systemctl { scope: self.scope }
    }
}

/// The directory units of `scope` go to, and whether `HERMES_SYSTEMD_DIR` chose it.
fn unit_dir(scope: Scope) -> Result<(PathBuf, bool), ServiceError> {
    if let Some(dir) = std::env::var_os("HERMES_SYSTEMD_DIR").filter(|d| !d.is_empty()) {
        return Ok((PathBuf::from(dir), true));
    }
    match scope {
        Scope::System => Ok((PathBuf::from("/etc/systemd/system"), false)),
        Scope::User => {
            let config = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from).filter(|p| p.is_absolute());
            let config = match config {
                Some(dir) => dir,
                None => PathBuf::from(std::env::var_os("HOME").ok_or(ServiceError::NoHome)?).join(".config"),
            };
            Ok((config.join("systemd").join("user"), false))
        }
    }
}

/// The profile's home as the command line selects it; `user_home` replaces `HOME` (the
/// `--run-as-user` account's home, when neither `--home` nor `HERMES_HOME` names one).
fn select_home(cli: &Cli, user_home: Option<&Path>) -> Result<(Home, Env), config::ConfigError> {
    let mut process = Env::from_process();
    if let Some(home) = user_home.filter(|_| cli.home.is_none() && process.get("HERMES_HOME").is_none()) {
        process.insert("HOME", home.to_string_lossy());
    }
    let home = Home::resolve(cli.home.clone(), cli.profile.as_deref(), &process)?;
    Ok((home, process))
}

fn service_for(home: Home, scope: Scope, user_home: Option<&Path>) -> Result<Service, ServiceError> {
    let (dir, dir_overridden) = unit_dir(scope)?;
    let launch = Launch::of(&home.root(), home.profile(), user_home);
    Ok(Service { scope, launch, home, dir, dir_overridden })
}

/// The service of the selected profile: the `--system` unit if asked, else the user unit, else
/// an installed system unit (so `status` and `stop` find a gateway installed either way).
pub(crate) fn locate(cli: &Cli, system: bool) -> Result<Service, ExitCode> {
    let (home, _) = select_home(cli, None).map_err(|e| config_failure(&e))?;
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    let build = |scope| service_for(home.clone(), scope, user_home.as_deref()).map_err(fail);
    if system {
        return build(Scope::System);
    }
    let user = build(Scope::User)?;
    if user.installed() || user.dir_overridden {
        return Ok(user);
    }
    let system = build(Scope::System)?;
    Ok(if system.installed() { system } else { user })
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("hermes: {message}");
    ExitCode::FAILURE
}

fn not_installed(service: &Service) -> ExitCode {
    eprintln!("✗ Gateway service is not installed ({} not found) — Run: hermes gateway install", service.path().display());
    ExitCode::FAILURE
}

/// This binary, absolute, as the unit's `ExecStart=` must name it.
fn current_exe() -> Result<PathBuf, ServiceError> {
    let exe = std::env::current_exe().map_err(ServiceError::ExeUnknown)?;
    if !exe.is_file() {
        return Err(ServiceError::ExeGone(exe));
    }
    Ok(exe)
}

/// The unit text this binary generates for `service`, given the profile's drain timeout.
fn expected_unit(service: &Service, drain_secs: u64, run_as: Option<&Account>) -> Result<String, ServiceError> {
    let exe = current_exe()?;
    let root = service.home.root();
    unit::render(&UnitSpec { scope: service.scope, exe: &exe, launch: &service.launch, root: &root, drain_secs, run_as })
}

/// A temporary directory dies with the machine's next cleanup; a unit pointing there would
/// start a gateway with an empty home after it.
fn in_temporary_dir(path: &Path) -> bool {
    let temp = [std::env::temp_dir(), PathBuf::from("/tmp"), PathBuf::from("/var/tmp"), PathBuf::from("/dev/shm")];
    temp.iter().any(|t| path.starts_with(t))
}

/// `hermes gateway install`.
pub(crate) fn install(cli: &Cli, options: &InstallOptions) -> ExitCode {
    match try_install(cli, options) {
        Ok(code) => code,
        Err(code) => code,
    }
}

fn try_install(cli: &Cli, options: &InstallOptions) -> Result<ExitCode, ExitCode> {
    let scope = if options.system { Scope::System } else { Scope::User };
    let run_as = options.run_as_user.as_deref().map(account::by_name).transpose().map_err(fail)?;
    let user_home = match &run_as {
        Some(account) => Some(account.home.clone()),
        None => std::env::var_os("HOME").map(PathBuf::from),
    };
    let (home, process) = select_home(cli, run_as.as_ref().map(|a| a.home.as_path())).map_err(|e| config_failure(&e))?;
    let env = Env::layered(&home.env_file(), process).map_err(|e| config_failure(&e))?;
    let loaded = config::load(&home, &env).map_err(|e| config_failure(&e))?;
    let service = service_for(home, scope, user_home.as_deref()).map_err(fail)?;
    check_install_allowed(&service)?;
    prepare_home(&service, run_as.as_ref())?;
    let text = expected_unit(&service, loaded.config.gateway.drain_timeout_secs, run_as.as_ref()).map_err(fail)?;
    check_with_systemd_analyze(&service, &text)?;
    let replaced = write_unit(&service, &text, options.force)?;
    // Linger keeps a user's manager, and so a user unit, running without a login session.
    let linger_user = match scope {
        Scope::User => Some(account::current().map_err(fail)?.name),
        Scope::System => None,
    };
    Ok(activate(&service, replaced, options.no_start, linger_user.as_deref()))
}

fn check_install_allowed(service: &Service) -> Result<(), ExitCode> {
    if service.scope == Scope::System && !service.dir_overridden && !systemctl::is_root() {
        return Err(fail(format!(
            "--system writes {} and needs root: run it with sudo (add --run-as-user $USER to keep the gateway running as you)",
            service.path().display()
        )));
    }
    let root = service.home.root();
    if in_temporary_dir(&root) && !service.dir_overridden {
        return Err(fail(format!(
            "HERMES_HOME {} is in a temporary directory, which is emptied on reboot or by cleanup jobs; \
             a service must not depend on it. Use a lasting directory (e.g. unset HERMES_HOME for ~/.hermes, or pass --home DIR)",
            root.display()
        )));
    }
    Ok(())
}

/// `WorkingDirectory=` must exist when the service starts. A user unit's home is created here;
/// a system unit's belongs to the account it runs as, which root must not create files for.
fn prepare_home(service: &Service, run_as: Option<&Account>) -> Result<(), ExitCode> {
    let root = service.home.root();
    match service.scope {
        Scope::User => service.home.ensure_dirs().map_err(|e| fail(format!("cannot create HERMES_HOME {}: {e}", root.display()))),
        Scope::System if root.is_dir() => Ok(()),
        Scope::System => {
            let as_user = run_as.map(|a| format!("sudo -u {} ", a.name)).unwrap_or_default();
            println!("⚠ HERMES_HOME {} does not exist yet; the service cannot start until it does.", root.display());
            println!("  Run: {as_user}mkdir -p {}", root.display());
            Ok(())
        }
    }
}

fn check_with_systemd_analyze(service: &Service, text: &str) -> Result<(), ExitCode> {
    match systemctl::verify(service.scope, &service.name(), text, &service.path()) {
        Verdict::Accepted(warnings) => {
            println!("✓ systemd-analyze verify accepts {}", service.name());
            for line in warnings.lines() {
                println!("  {line}");
            }
            Ok(())
        }
        Verdict::Skipped(why) => {
            println!("⚠ The unit was not checked with systemd-analyze verify: {why}");
            Ok(())
        }
        Verdict::Rejected(messages) => {
            eprintln!("hermes: systemd-analyze verify rejects the generated unit {}; nothing was written:", service.name());
            for line in messages.lines() {
                eprintln!("  {line}");
            }
            Err(ExitCode::FAILURE)
        }
    }
}

/// Writes the unit unless an identical one is there; a different one only with `force`.
/// Returns whether a previous, different unit was replaced.
fn write_unit(service: &Service, text: &str, force: bool) -> Result<bool, ExitCode> {
    let path = service.path();
    let existing = std::fs::read_to_string(&path).ok();
    match existing {
        Some(old) if old == text => {
            println!("✓ {} is already installed and up to date", path.display());
            return Ok(false);
        }
        Some(old) if !force => {
            eprintln!("hermes: {} already exists and differs from the unit this hermes generates:", path.display());
            eprintln!("  {}", first_difference(&old, text));
            eprintln!("  Run: hermes gateway install --force   (to replace it; hand edits are lost)");
            return Err(ExitCode::FAILURE);
        }
        _ => {}
    }
    write_0644(&path, text).map_err(|e| fail(format!("cannot write {}: {e}", path.display())))?;
    println!("✓ Wrote {}", path.display());
    Ok(existing.is_some())
}

/// Where an installed unit and the generated one part, for the user to judge.
pub(crate) fn first_difference(installed: &str, generated: &str) -> String {
    let mut installed_lines = installed.lines();
    let mut generated_lines = generated.lines();
    for number in 1.. {
        match (installed_lines.next(), generated_lines.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (None, None) => break,
            (a, b) => {
                return format!("line {number}: installed `{}`, generated `{}`", a.unwrap_or("(end)"), b.unwrap_or("(end)"));
            }
        }
    }
    "only line endings differ".to_string()
}

/// Atomically: a world-readable temporary file in the same directory, renamed over the unit.
fn write_0644(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::Builder::new().prefix(".hermes-gateway").suffix(".tmp").tempfile_in(dir)?;
    // systemd (and, for user units, the user's manager) only needs to read it; nothing secret is in it.
    file.as_file().set_permissions(std::fs::Permissions::from_mode(0o644))?;
    file.write_all(text.as_bytes())?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// daemon-reload, enable, start (or restart a replaced unit), enable-linger; without systemd,
/// the commands to run instead.
fn activate(service: &Service, replaced: bool, no_start: bool, linger_user: Option<&str>) -> ExitCode {
    let systemctl = service.systemctl();
    let name = service.name();
    let start_verb = if replaced { "restart" } else { "start" };
    let mut steps: Vec<Vec<&str>> = vec![vec!["daemon-reload"], vec!["enable", &name]];
    if !no_start {
        steps.push(vec![start_verb, &name]);
    }
    for (done, step) in steps.iter().enumerate() {
        match systemctl.run(step) {
            Outcome::Done(_) => println!("✓ {}", systemctl.command_line(step)),
            Outcome::Unavailable(why) => return systemd_unavailable(service, &why, &steps[done..], no_start, linger_user),
            Outcome::Failed { message, .. } => {
                eprintln!("hermes: `{}` failed: {message}", systemctl.command_line(step));
                eprintln!("  The unit is written; fix the problem above, then run the remaining commands:");
                for rest in &steps[done..] {
                    eprintln!("    {}", systemctl.command_line(rest));
                }
                return ExitCode::FAILURE;
            }
        }
    }
    if let Some(user) = linger_user {
        match systemctl::enable_linger(user) {
            Outcome::Done(_) => println!("✓ loginctl enable-linger {user} (the gateway keeps running after you log out)"),
            Outcome::Failed { message: why, .. } | Outcome::Unavailable(why) => {
                println!("⚠ Could not enable linger ({why}); without it the gateway stops when you log out.");
                println!("  Run: sudo loginctl enable-linger {user}");
            }
        }
    }
    if no_start {
        println!("Installed; start it with: hermes gateway start");
    } else {
        println!("✓ Gateway service {name} is running; see it with: hermes gateway status");
    }
    ExitCode::SUCCESS
}

fn systemd_unavailable(service: &Service, why: &str, remaining: &[Vec<&str>], no_start: bool, linger_user: Option<&str>) -> ExitCode {
    let systemctl = service.systemctl();
    println!("✗ systemctl is unavailable ({why}).");
    println!("  The unit {} is written, but systemd was not told about it.", service.path().display());
    println!("  Where systemd runs (not in a container without it), run:");
    for step in remaining {
        println!("    {}", systemctl.command_line(step));
    }
    if no_start {
        println!("    {}", systemctl.command_line(&["start", &service.name()]));
    }
    if let Some(user) = linger_user {
        println!("    sudo loginctl enable-linger {user}");
    }
    if no_start {
        ExitCode::SUCCESS
    } else {
        eprintln!("hermes: the gateway was not started: systemd is not running here");
        ExitCode::from(EXIT_SYSTEMD_UNAVAILABLE)
    }
}

/// `hermes gateway uninstall`: stop, disable, remove, daemon-reload.
pub(crate) fn uninstall(cli: &Cli, system: bool) -> ExitCode {
    let service = match locate(cli, system) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let path = service.path();
    if !service.installed() {
        println!("✓ Nothing to remove: {} is not installed", path.display());
        return ExitCode::SUCCESS;
    }
    let systemctl = service.systemctl();
    let name = service.name();
    let mut unavailable = None;
    for step in [vec!["stop", name.as_str()], vec!["disable", name.as_str()]] {
        match systemctl.run(&step) {
            Outcome::Done(_) => println!("✓ {}", systemctl.command_line(&step)),
            Outcome::Unavailable(why) => {
                unavailable = Some(why);
                break;
            }
            Outcome::Failed { message, .. } => println!("⚠ `{}`: {message}", systemctl.command_line(&step)),
        }
    }
    if let Err(e) = std::fs::remove_file(&path) {
        return fail(format!("cannot remove {}: {e}", path.display()));
    }
    println!("✓ Removed {}", path.display());
    if unavailable.is_none() {
        match systemctl.run(&["daemon-reload"]) {
            Outcome::Done(_) => println!("✓ {}", systemctl.command_line(&["daemon-reload"])),
            Outcome::Unavailable(why) | Outcome::Failed { message: why, .. } => unavailable = Some(why),
        }
    }
    if let Some(why) = unavailable {
        println!("⚠ systemctl is unavailable ({why}): nothing ran under systemd here, only the unit file was removed.");
    }
    ExitCode::SUCCESS
}

/// `hermes gateway start | stop | restart`.
pub(crate) fn control(cli: &Cli, system: bool, verb: &str) -> ExitCode {
    let service = match locate(cli, system) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if !service.installed() {
        return not_installed(&service);
    }
    let systemctl = service.systemctl();
    let step = [verb, &service.name()];
    match systemctl.run(&step) {
        Outcome::Done(_) => {
            println!("✓ {}", systemctl.command_line(&step));
            ExitCode::SUCCESS
        }
        Outcome::Unavailable(why) => {
            fail(format!("systemctl is unavailable ({why}); `hermes gateway run` runs the gateway in the foreground"))
        }
        Outcome::Failed { message, .. } => {
            let hint = format!("see why with: hermes gateway status --deep{}", if system { " --system" } else { "" });
            fail(format!("`{}` failed: {message}\n  {hint}", systemctl.command_line(&step)))
        }
    }
}

/// `hermes gateway list`: every profile's unit with its installed and active state.
pub(crate) fn list(cli: &Cli) -> ExitCode {
    let process = Env::from_process();
    let base = match Home::resolve(cli.home.clone(), None, &process) {
        Ok(home) => home,
        Err(e) => return config_failure(&e),
    };
    let mut homes = vec![base.clone()];
    if let Ok(entries) = std::fs::read_dir(base.root().join("profiles")) {
        let mut names: Vec<String> =
            entries.flatten().filter(|e| e.path().is_dir()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        // Directories that are not valid profile names are not profiles.
        homes.extend(names.iter().filter_map(|name| Home::resolve(cli.home.clone(), Some(name), &process).ok()));
    }
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    println!("{:<16} {:<40} {:<10} STATE", "PROFILE", "UNIT", "INSTALLED");
    for home in homes {
        let mut found = None;
        for scope in [Scope::User, Scope::System] {
            match service_for(home.clone(), scope, user_home.as_deref()) {
                Ok(service) if service.installed() && found.is_none() => found = Some(service),
                Ok(_) => {}
                Err(e) => return fail(e),
            }
        }
        let launch = Launch::of(&home.root(), home.profile(), user_home.as_deref());
        let (installed, state) = match &found {
            None => ("no".to_string(), "-".to_string()),
            Some(service) => (service.scope.label().to_string(), active_state(service)),
        };
        println!("{:<16} {:<40} {:<10} {state}", launch.label(), launch.unit_name(), installed);
    }
    ExitCode::SUCCESS
}

/// `systemctl is-active`'s word, or why there is none.
fn active_state(service: &Service) -> String {
    match service.systemctl().run(&["is-active", &service.name()]) {
        Outcome::Done(out) => out.trim().to_string(),
        Outcome::Failed { message, .. } => message.lines().next().unwrap_or("inactive").trim().to_string(),
        Outcome::Unavailable(_) => "unknown (systemd is not running)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_difference_names_the_line() {
        assert_eq!(first_difference("a\nb\nc\n", "a\nB\nc\n"), "line 2: installed `b`, generated `B`");
        assert_eq!(first_difference("a\n", "a\nb\n"), "line 2: installed `(end)`, generated `b`");
    }

    #[test]
    fn temporary_directories_are_recognised() {
        assert!(in_temporary_dir(Path::new("/tmp/x/.hermes")));
        assert!(in_temporary_dir(&std::env::temp_dir().join("h")));
        assert!(!in_temporary_dir(Path::new("/home/ann/.hermes")));
        assert!(!in_temporary_dir(Path::new("/tmpfoo/.hermes")));
    }
}
