//! The systemd unit of one HERMES_HOME: its name (one unit per profile), how its command line
//! finds that home, and its text rendered from the templates in `systemd/` with systemd's
//! quoting rules (`%` specifiers, `$` substitution, double-quoted words and assignments).

use super::account::Account;
use super::error::ServiceError;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

const USER_TEMPLATE: &str = include_str!("../../../systemd/hermes-gateway-user.service");
const SYSTEM_TEMPLATE: &str = include_str!("../../../systemd/hermes-gateway-system.service");

/// `WatchdogSec=`: the gateway pings at half of it, so a loop stuck for a minute is restarted
/// while a busy 2-core machine never trips it.
pub(crate) const WATCHDOG_SEC: u64 = 60;

/// Whose service manager runs the unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The user's own manager (`systemctl --user`), `~/.config/systemd/user`.
    User,
    /// The system manager, `/etc/systemd/system`; needs root.
    System,
}

impl Scope {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::System => "system",
        }
    }
}

/// How the unit's command line selects its HERMES_HOME.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Launch {
    /// `~/.hermes`: `hermes-gateway.service`.
    Default { base: PathBuf },
    /// `~/.hermes/profiles/NAME`: `hermes-gateway-NAME.service`, run with `HERMES_HOME` set to that directory.
    Profile { base: PathBuf, name: String },
    /// Any other directory: `hermes-gateway-<8 hex of its path's hash>.service`, run with `--home`.
    Custom { root: PathBuf },
}

impl Launch {
    /// Classifies the home at `root`; `user_home` is the home directory of the account the unit
    /// runs as, whose `~/.hermes` is the default.
    pub(crate) fn of(root: &Path, profile: Option<&str>, user_home: Option<&Path>) -> Launch {
        let Some(base) = user_home.map(|h| h.join(".hermes")) else {
            return Launch::Custom { root: root.to_path_buf() };
        };
        if root == base {
            return Launch::Default { base };
        }
        let profile_dir = base.join("profiles");
        let name = profile.map(str::to_string).or_else(|| root.file_name().map(|n| n.to_string_lossy().into_owned()));
        match name {
            Some(name) if root == profile_dir.join(&name) => Launch::Profile { base, name },
            _ => Launch::Custom { root: root.to_path_buf() },
        }
    }

    /// The unit's file name, `.service` included.
    pub(crate) fn unit_name(&self) -> String {
        match self {
            Launch::Default { .. } => "hermes-gateway.service".to_string(),
            Launch::Profile { name, .. } => format!("hermes-gateway-{name}.service"),
            Launch::Custom { root } => {
                let digest = Sha256::digest(root.as_os_str().as_encoded_bytes());
                format!("hermes-gateway-{}.service", &hex::encode(digest)[..8])
            }
        }
    }

    /// What the user calls this gateway: `default`, the profile's name, or the directory.
    pub(crate) fn label(&self) -> String {
        match self {
            Launch::Default { .. } => "default".to_string(),
            Launch::Profile { name, .. } => name.clone(),
            Launch::Custom { root } => root.display().to_string(),
        }
    }

    /// `HERMES_HOME` for the service: the directory the gateway lives in, a profile's own
    /// directory included (as Python Hermes' units set it), so every `hermes` the agent or a cron
    /// script runs inside the service reaches this profile, not the default one.
    fn hermes_home(&self) -> PathBuf {
        match self {
            Launch::Default { base } => base.clone(),
            Launch::Profile { base, name } => base.join("profiles").join(name),
            Launch::Custom { root } => root.clone(),
        }
    }

    fn run_args(&self) -> Vec<String> {
        let mut args = vec!["gateway".to_string(), "run".to_string()];
        match self {
            // HERMES_HOME already is the profile's directory; `--profile` would nest it again.
            Launch::Default { .. } | Launch::Profile { .. } => {}
            Launch::Custom { root } => args.extend(["--home".to_string(), root.to_string_lossy().into_owned()]),
        }
        args
    }
}

/// Everything a unit's text depends on.
#[derive(Clone, Debug)]
pub(crate) struct UnitSpec<'a> {
    pub scope: Scope,
    /// This binary, absolute.
    pub exe: &'a Path,
    pub launch: &'a Launch,
    /// The profile's own directory (`WorkingDirectory=`).
    pub root: &'a Path,
    /// `gateway.drain_timeout_secs` of the profile's config.
    pub drain_secs: u64,
    /// `--run-as-user` of a system unit.
    pub run_as: Option<&'a Account>,
}

/// `TimeoutStopSec=`: longer than the drain, so SIGKILL never cuts a drain short.
pub(crate) fn stop_timeout_secs(drain_secs: u64) -> u64 {
    drain_secs.max(60).saturating_add(30)
}

/// The unit's text, or why a path cannot be written into one.
pub(crate) fn render(spec: &UnitSpec<'_>) -> Result<String, ServiceError> {
    let exe = utf8(spec.exe, "the hermes binary's path")?;
    let hermes_home = spec.launch.hermes_home();
    let home = utf8(&hermes_home, "HERMES_HOME")?;
    let root = utf8(spec.root, "HERMES_HOME")?;
    let mut words = vec![exec_word(exe)];
    words.extend(spec.launch.run_args().iter().map(|w| exec_word(w)));
    let mut environment = vec![assignment("HERMES_HOME", home)];
    let (template, run_as) = match spec.scope {
        Scope::User => (USER_TEMPLATE, String::new()),
        Scope::System => (SYSTEM_TEMPLATE, run_as_lines(spec.run_as)?),
    };
    if let Some(account) = spec.run_as {
        let account_home = utf8(&account.home, "the user's home directory")?;
        environment.push(assignment("HOME", account_home));
        environment.push(assignment("USER", &account.name));
        environment.push(assignment("LOGNAME", &account.name));
    }
    let description = match spec.launch {
        Launch::Default { .. } => "Hermes gateway: messaging platforms to the agent".to_string(),
        other => format!("Hermes gateway ({}): messaging platforms to the agent", specifiers(&other.label())),
    };
    Ok(template
        .replace("@DESCRIPTION@", &description)
        .replace("@RUN_AS@", &run_as)
        .replace("@EXEC_START@", &words.join(" "))
        .replace("@ENVIRONMENT@", &format!("Environment={}", environment.join(" ")))
        .replace("@WORKING_DIRECTORY@", &specifiers(root))
        .replace("@WATCHDOG_SEC@", &WATCHDOG_SEC.to_string())
        .replace("@TIMEOUT_STOP_SEC@", &stop_timeout_secs(spec.drain_secs).to_string()))
}

fn run_as_lines(account: Option<&Account>) -> Result<String, ServiceError> {
    let Some(account) = account else {
        return Ok("# No --run-as-user: the gateway runs as root.".to_string());
    };
    for name in [&account.name, &account.group] {
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control() || c == '%') {
            return Err(ServiceError::UnusableAccountName { name: name.clone() });
        }
    }
    Ok(format!("User={}\nGroup={}", account.name, account.group))
}

/// A path as unit-file text: UTF-8, one line, no control characters (systemd reads unit files
/// as UTF-8 lines and has no escape for a newline in `WorkingDirectory=`).
fn utf8<'p>(path: &'p Path, what: &'static str) -> Result<&'p str, ServiceError> {
    let text = path.to_str().ok_or_else(|| ServiceError::PathNotUtf8 { what, path: path.to_path_buf() })?;
    if text.chars().any(char::is_control) || text.ends_with('\\') {
        return Err(ServiceError::PathUnprintable { what, text: text.to_string() });
    }
    Ok(text)
}

/// `%` starts a specifier (`%h`, `%n`…) in every setting used here; `%%` is a literal `%`.
fn specifiers(text: &str) -> String {
    text.replace('%', "%%")
}

/// One word of `ExecStart=`: specifiers escaped, `$` doubled (systemd substitutes `$VAR` and
/// `${VAR}` in command lines), and double quotes when it holds anything but plain characters.
fn exec_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@".contains(c));
    let escaped = specifiers(word).replace('$', "$$");
    if plain { escaped } else { quoted(&escaped) }
}

/// `"NAME=value"` for `Environment=`, which splits on spaces unless quoted; no `$` expansion
/// happens there, specifiers do.
fn assignment(name: &str, value: &str) -> String {
    quoted(&specifiers(&format!("{name}={value}")))
}

/// C-style double quoting, as systemd unquotes words: `\` and `"` are escaped.
fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(scope: Scope, launch: &'a Launch, root: &'a Path, run_as: Option<&'a Account>) -> UnitSpec<'a> {
        UnitSpec { scope, exe: Path::new("/usr/local/bin/hermes"), launch, root, drain_secs: 30, run_as }
    }

    fn line<'t>(unit: &'t str, key: &str) -> Vec<&'t str> {
        unit.lines().filter_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('='))).collect()
    }

    #[test]
    fn names_follow_the_home() {
        let user_home = Path::new("/home/ann");
        let default = Launch::of(Path::new("/home/ann/.hermes"), None, Some(user_home));
        assert_eq!(default.unit_name(), "hermes-gateway.service");
        let work = Launch::of(Path::new("/home/ann/.hermes/profiles/work"), Some("work"), Some(user_home));
        assert_eq!(work.unit_name(), "hermes-gateway-work.service");
        // `--home ~/.hermes/profiles/work` is the same gateway as `--profile work`.
        assert_eq!(Launch::of(Path::new("/home/ann/.hermes/profiles/work"), None, Some(user_home)), work);
        let custom = Launch::of(Path::new("/srv/hermes"), None, Some(user_home));
        let name = custom.unit_name();
        assert!(name.starts_with("hermes-gateway-") && name.ends_with(".service"), "{name}");
        let hash = &name["hermes-gateway-".len()..name.len() - ".service".len()];
        assert!(hash.len() == 8 && hash.chars().all(|c| c.is_ascii_hexdigit()), "{name}");
        assert_ne!(Launch::of(Path::new("/srv/hermes2"), None, Some(user_home)).unit_name(), name);
        // A profile of another base is not the user's profile of the same name.
        let other = Launch::of(Path::new("/srv/hermes/profiles/work"), Some("work"), Some(user_home));
        assert!(matches!(other, Launch::Custom { .. }), "{other:?}");
    }

    #[test]
    fn user_unit_has_the_lifecycle_directives() {
        let launch = Launch::Default { base: "/home/ann/.hermes".into() };
        let unit = render(&spec(Scope::User, &launch, Path::new("/home/ann/.hermes"), None)).unwrap();
        assert_eq!(line(&unit, "ExecStart"), ["/usr/local/bin/hermes gateway run"]);
        assert_eq!(line(&unit, "Environment"), ["\"HERMES_HOME=/home/ann/.hermes\""]);
        assert_eq!(line(&unit, "WorkingDirectory"), ["/home/ann/.hermes"]);
        for (key, value) in [
            ("Type", "notify"),
            ("NotifyAccess", "main"),
            ("WatchdogSec", "60"),
            ("Restart", "always"),
            ("RestartSec", "5"),
            ("RestartForceExitStatus", "75"),
            ("SuccessExitStatus", "75"),
            ("RestartPreventExitStatus", "78"),
            ("KillMode", "mixed"),
            ("KillSignal", "SIGTERM"),
            ("TimeoutStopSec", "90"),
            ("StandardOutput", "journal"),
            ("StandardError", "journal"),
            ("WantedBy", "default.target"),
            ("UMask", "0077"),
        ] {
            assert_eq!(line(&unit, key), [value], "{key}");
        }
        assert!(!unit.contains('@'), "a placeholder was left:\n{unit}");
        // Options that would imply NoNewPrivileges in a user manager, or break the terminal tool.
        for absent in ["NoNewPrivileges", "MemoryDenyWriteExecute", "PrivateTmp", "ProtectHome", "ProtectKernelModules", "User"] {
            assert!(line(&unit, absent).is_empty(), "{absent} must not be set:\n{unit}");
        }
    }

    #[test]
    fn system_unit_runs_as_the_user_with_their_environment() {
        let ann = Account { name: "ann".into(), group: "staff".into(), home: "/home/ann".into() };
        let launch = Launch::Profile { base: "/home/ann/.hermes".into(), name: "work".into() };
        let unit = render(&spec(Scope::System, &launch, Path::new("/home/ann/.hermes/profiles/work"), Some(&ann))).unwrap();
        assert_eq!(line(&unit, "User"), ["ann"]);
        assert_eq!(line(&unit, "Group"), ["staff"]);
        // The profile's own directory, as Python Hermes' units set it: a `hermes cron list` the
        // agent runs inside the service sees this profile's jobs, not the default profile's.
        assert_eq!(line(&unit, "ExecStart"), ["/usr/local/bin/hermes gateway run"]);
        assert_eq!(
            line(&unit, "Environment"),
            ["\"HERMES_HOME=/home/ann/.hermes/profiles/work\" \"HOME=/home/ann\" \"USER=ann\" \"LOGNAME=ann\""]
        );
        assert_eq!(line(&unit, "WorkingDirectory"), ["/home/ann/.hermes/profiles/work"]);
        assert_eq!(line(&unit, "WantedBy"), ["multi-user.target"]);
        for present in
            ["ProtectKernelModules", "ProtectKernelTunables", "ProtectControlGroups", "ProtectClock", "LockPersonality", "RestrictRealtime"]
        {
            assert_eq!(line(&unit, present), ["yes"], "{present}");
        }
        let as_root = render(&spec(Scope::System, &launch, Path::new("/root/.hermes/profiles/work"), None)).unwrap();
        assert!(line(&as_root, "User").is_empty());
    }

    #[test]
    fn awkward_paths_are_quoted_the_way_systemd_unquotes_them() {
        let root = PathBuf::from("/data/my \"hermes\" 100%\\$HOME");
        let launch = Launch::Custom { root: root.clone() };
        let mut s = spec(Scope::User, &launch, &root, None);
        let exe = PathBuf::from("/opt/Hermes Agent/hermes");
        s.exe = &exe;
        let unit = render(&s).unwrap();
        assert_eq!(line(&unit, "ExecStart"), [r#""/opt/Hermes Agent/hermes" gateway run --home "/data/my \"hermes\" 100%%\\$$HOME""#]);
        assert_eq!(line(&unit, "Environment"), [r#""HERMES_HOME=/data/my \"hermes\" 100%%\\$HOME""#]);
        assert_eq!(line(&unit, "WorkingDirectory"), [r#"/data/my "hermes" 100%%\$HOME"#]);
    }

    #[test]
    fn a_path_systemd_cannot_hold_is_refused_by_name() {
        let root = PathBuf::from("/data/two\nlines");
        let launch = Launch::Custom { root: root.clone() };
        let err = render(&spec(Scope::User, &launch, &root, None)).unwrap_err().to_string();
        assert!(err.contains("HERMES_HOME") && err.contains("control character"), "{err}");
    }

    #[test]
    fn stop_timeout_outlasts_the_drain() {
        assert_eq!(stop_timeout_secs(0), 90);
        assert_eq!(stop_timeout_secs(30), 90);
        assert_eq!(stop_timeout_secs(300), 330);
    }
}
