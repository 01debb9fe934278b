//! `hermes gateway install | uninstall | start | stop | restart | status | list` as a user meets
//! them: units for the user, profile and system scopes that the real `systemd-analyze verify`
//! accepts; the systemctl/loginctl calls install makes (recorded by fake tools first on PATH);
//! and, with the real systemctl of this container (PID 1 is not systemd), the "unavailable" path.
//! Units go to a temporary `HERMES_SYSTEMD_DIR`, never to the real ~/.config or /etc.

use crate::support::Setup;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A test's HERMES_HOME (`<temp>/.hermes`, the default home of HOME=`<temp>`), its unit
/// directory, and optionally fake systemd tools that record their arguments.
struct ServiceTest {
    setup: Setup,
    units: tempfile::TempDir,
    tools: tempfile::TempDir,
}

impl ServiceTest {
    fn new() -> ServiceTest {
        let mut setup = Setup::new("http://127.0.0.1:9/v1");
        let units = tempfile::tempdir().unwrap();
        let hermes_home = setup.home.path().join(".hermes");
        setup.set("HERMES_HOME", hermes_home.to_str().unwrap()).set("HERMES_SYSTEMD_DIR", units.path().to_str().unwrap());
        ServiceTest { setup, units, tools: tempfile::tempdir().unwrap() }
    }

    /// `systemctl` and `loginctl` that append their argv to `calls.log` and succeed; `show`
    /// answers like a running service.
    fn with_fake_systemd(mut self) -> ServiceTest {
        let log = self.calls_log();
        for tool in ["systemctl", "loginctl"] {
            let script = format!(
                "#!/bin/sh\necho \"{tool} $*\" >> '{}'\ncase \"$*\" in\n  *is-active*) echo active ;;\n  *show*) printf 'ActiveState=active\\nSubState=running\\nMainPID=4242\\nExecMainStartTimestamp=Fri 2026-11-27 08:00:00 UTC\\nNRestarts=2\\nResult=success\\n' ;;\nesac\nexit 0\n",
                log.display()
            );
            let path = self.tools.path().join(tool);
            std::fs::write(&path, script).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = format!("{}:{}", self.tools.path().display(), std::env::var("PATH").unwrap_or_default());
        self.setup.set("PATH", &path);
        self
    }

    fn calls_log(&self) -> PathBuf {
        self.tools.path().join("calls.log")
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.calls_log()).unwrap_or_default().lines().map(str::to_string).collect()
    }

    fn run(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let (status, stdout, stderr) = self.setup.run(args);
        (status.code(), stdout, stderr)
    }

    fn unit(&self, name: &str) -> PathBuf {
        self.units.path().join(name)
    }

    fn hermes_home(&self) -> PathBuf {
        self.setup.home.path().join(".hermes")
    }
}

fn hermes_binary() -> PathBuf {
    std::fs::canonicalize(env!("CARGO_BIN_EXE_hermes")).unwrap()
}

/// The values of `key=` lines in a unit.
fn values<'t>(unit: &'t str, key: &str) -> Vec<&'t str> {
    unit.lines().filter_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('='))).collect()
}

/// The real `systemd-analyze verify` on an installed unit file.
fn systemd_analyze_accepts(unit: &Path, user: bool) {
    let runtime = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("systemd-analyze");
    if user {
        cmd.arg("--user").env("XDG_RUNTIME_DIR", runtime.path());
    }
    let out = cmd.arg("verify").arg(unit).output().expect("systemd-analyze (Debian package systemd) is installed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("ignoring"), "systemd dropped a setting: {stderr}");
}

#[test]
fn user_profile_and_system_units_are_generated_and_accepted_by_systemd_analyze() {
    let t = ServiceTest::new().with_fake_systemd();
    let binary = hermes_binary();
    let binary = binary.to_str().unwrap();

    let (code, stdout, stderr) = t.run(&["gateway", "install", "--no-start"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("systemd-analyze verify accepts"), "{stdout}");
    let path = t.unit("hermes-gateway.service");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
    systemd_analyze_accepts(&path, true);
    let unit = std::fs::read_to_string(&path).unwrap();
    let home = t.hermes_home();
    assert_eq!(values(&unit, "ExecStart"), [format!("{binary} gateway run")]);
    assert_eq!(values(&unit, "Environment"), [format!("\"HERMES_HOME={}\"", home.display())]);
    assert_eq!(values(&unit, "WorkingDirectory"), [home.to_str().unwrap()]);
    assert!(home.is_dir(), "install creates the working directory");
    for (key, value) in [
        ("Type", "notify"),
        ("NotifyAccess", "main"),
        ("Restart", "always"),
        ("RestartSec", "5"),
        ("RestartForceExitStatus", "75"),
        ("SuccessExitStatus", "75"),
        ("RestartPreventExitStatus", "78"),
        ("StartLimitIntervalSec", "0"),
        ("KillMode", "mixed"),
        ("KillSignal", "SIGTERM"),
        ("TimeoutStopSec", "90"),
        ("StandardOutput", "journal"),
        ("StandardError", "journal"),
        ("After", "network-online.target"),
        ("Wants", "network-online.target"),
        ("WantedBy", "default.target"),
    ] {
        assert_eq!(values(&unit, key), [value], "{key} in\n{unit}");
    }
    assert_eq!(values(&unit, "WatchdogSec").len(), 1);
    assert!(values(&unit, "NoNewPrivileges").is_empty(), "sudo in the terminal tool needs privileges");

    // A profile: its own unit, with HERMES_HOME set to the profile's own directory (as Python
    // Hermes' units do), so whatever `hermes` the agent runs inside the service reaches it.
    std::fs::create_dir_all(home.join("profiles/work")).unwrap();
    let (code, stdout, stderr) = t.run(&["--profile", "work", "gateway", "install", "--no-start"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let path = t.unit("hermes-gateway-work.service");
    systemd_analyze_accepts(&path, true);
    let unit = std::fs::read_to_string(&path).unwrap();
    assert_eq!(values(&unit, "ExecStart"), [format!("{binary} gateway run")]);
    assert_eq!(values(&unit, "Environment"), [format!("\"HERMES_HOME={}\"", home.join("profiles/work").display())]);
    assert_eq!(values(&unit, "WorkingDirectory"), [home.join("profiles/work").to_str().unwrap()]);

    // A system unit run as another user, with a longer drain; systemd's hardening included.
    std::fs::write(home.join("config.yaml"), "gateway:\n  drain_timeout_secs: 120\n").unwrap();
    let (code, stdout, stderr) = t.run(&["gateway", "install", "--system", "--run-as-user", "www-data", "--no-start"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // www-data's default home is /var/www/.hermes, so this HERMES_HOME is a custom one: hashed name.
    let name = std::fs::read_dir(t.units.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("hermes-gateway-") && n != "hermes-gateway-work.service")
        .expect("a system unit with a hashed name");
    assert_eq!(name.len(), "hermes-gateway-".len() + 8 + ".service".len(), "{name}");
    let path = t.unit(&name);
    systemd_analyze_accepts(&path, false);
    let unit = std::fs::read_to_string(&path).unwrap();
    assert_eq!(values(&unit, "User"), ["www-data"]);
    assert_eq!(values(&unit, "Group"), ["www-data"]);
    assert_eq!(values(&unit, "ExecStart"), [format!("{binary} gateway run --home {}", home.display())]);
    assert_eq!(
        values(&unit, "Environment"),
        [format!("\"HERMES_HOME={}\" \"HOME=/var/www\" \"USER=www-data\" \"LOGNAME=www-data\"", home.display())]
    );
    assert_eq!(values(&unit, "TimeoutStopSec"), ["150"], "max(60, drain 120) + 30");
    assert_eq!(values(&unit, "WantedBy"), ["multi-user.target"]);
    for option in
        ["ProtectKernelModules", "ProtectKernelTunables", "ProtectControlGroups", "ProtectClock", "LockPersonality", "RestrictRealtime"]
    {
        assert_eq!(values(&unit, option), ["yes"], "{option}");
    }
}

#[test]
fn a_home_with_spaces_and_percent_signs_is_quoted_so_systemd_reads_it_back() {
    let mut t = ServiceTest::new().with_fake_systemd();
    let home = t.setup.home.path().join("my hermes 100%");
    t.setup.set("HERMES_HOME", home.to_str().unwrap());
    let (code, stdout, stderr) = t.run(&["gateway", "install", "--no-start"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let path = std::fs::read_dir(t.units.path()).unwrap().next().unwrap().unwrap().path();
    systemd_analyze_accepts(&path, true);
    let unit = std::fs::read_to_string(&path).unwrap();
    let escaped = home.to_str().unwrap().replace('%', "%%");
    assert_eq!(values(&unit, "Environment"), [format!("\"HERMES_HOME={escaped}\"")]);
    assert!(values(&unit, "ExecStart")[0].ends_with(&format!("gateway run --home \"{escaped}\"")), "{unit}");
}

#[test]
fn install_reloads_enables_starts_and_enables_linger_in_that_order_and_uninstall_undoes_it() {
    let t = ServiceTest::new().with_fake_systemd();
    let (code, stdout, stderr) = t.run(&["gateway", "install"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    assert_eq!(
        t.calls(),
        [
            "systemctl --user daemon-reload".to_string(),
            "systemctl --user enable hermes-gateway.service".to_string(),
            "systemctl --user start hermes-gateway.service".to_string(),
            format!("loginctl enable-linger {}", user.trim()),
        ]
    );

    // status shows what systemd says; restart goes to the profile's unit.
    let (_, stdout, _) = t.run(&["gateway", "status"]);
    assert!(stdout.contains("Service hermes-gateway.service (user unit"), "{stdout}");
    assert!(stdout.contains("systemd: active (running), pid 4242"), "{stdout}");
    assert!(stdout.contains("2 restart(s)"), "{stdout}");
    assert!(stdout.contains(&format!("hermes {}", env!("CARGO_PKG_VERSION"))), "{stdout}");
    let (code, _, stderr) = t.run(&["gateway", "restart"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(t.calls().last().unwrap(), "systemctl --user restart hermes-gateway.service");

    let before = t.calls().len();
    let (code, stdout, stderr) = t.run(&["gateway", "uninstall"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(!t.unit("hermes-gateway.service").exists(), "uninstall removes the unit");
    assert_eq!(
        t.calls()[before..],
        [
            "systemctl --user stop hermes-gateway.service",
            "systemctl --user disable hermes-gateway.service",
            "systemctl --user daemon-reload"
        ]
    );
    let (code, _, stderr) = t.run(&["gateway", "start"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("Gateway service is not installed") && stderr.contains("Run: hermes gateway install"), "{stderr}");
}

#[test]
fn status_reports_a_hand_edited_unit_which_install_refuses_to_overwrite_without_force() {
    let t = ServiceTest::new().with_fake_systemd();
    assert_eq!(t.run(&["gateway", "install", "--no-start"]).0, Some(0));
    let path = t.unit("hermes-gateway.service");
    let generated = std::fs::read_to_string(&path).unwrap();
    let (_, stdout, _) = t.run(&["gateway", "status"]);
    assert!(stdout.contains("matches what this hermes generates"), "{stdout}");

    std::fs::write(&path, generated.replace("RestartSec=5", "RestartSec=1")).unwrap();
    let (code, stdout, _) = t.run(&["gateway", "status"]);
    assert_eq!(code, Some(3), "no gateway runs: {stdout}");
    assert!(stdout.contains("outdated") && stdout.contains("RestartSec=1"), "{stdout}");
    assert!(stdout.contains("Run: hermes gateway install --force"), "{stdout}");

    let (code, _, stderr) = t.run(&["gateway", "install", "--no-start"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("--force") && stderr.contains("RestartSec=1"), "{stderr}");
    assert!(std::fs::read_to_string(&path).unwrap().contains("RestartSec=1"), "the edited unit is kept");

    let (code, stdout, stderr) = t.run(&["gateway", "install", "--force", "--no-start"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), generated);
    let (_, stdout, _) = t.run(&["gateway", "status"]);
    assert!(!stdout.contains("outdated"), "{stdout}");
}

#[test]
fn without_systemd_install_writes_the_unit_and_prints_the_commands() {
    // The real systemctl: PID 1 of the CI container is not systemd.
    let t = ServiceTest::new();
    let (code, stdout, stderr) = t.run(&["gateway", "install", "--no-start"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("systemctl is unavailable"), "{stdout}");
    assert!(
        stdout.contains("systemctl --user daemon-reload") && stdout.contains("systemctl --user enable hermes-gateway.service"),
        "{stdout}"
    );
    assert!(stdout.contains("loginctl enable-linger"), "{stdout}");
    assert!(t.unit("hermes-gateway.service").is_file());

    // Asked to start it, install says the gateway is not running: EX_UNAVAILABLE.
    let (code, stdout, stderr) = t.run(&["--profile", "work", "gateway", "install"]);
    assert_eq!(code, Some(69), "{stdout}{stderr}");
    assert!(stderr.contains("not started"), "{stderr}");
    assert!(t.unit("hermes-gateway-work.service").is_file());

    // No systemctl at all.
    let mut t = ServiceTest::new();
    let bare = tempfile::tempdir().unwrap();
    t.setup.set("PATH", bare.path().to_str().unwrap());
    let (code, stdout, stderr) = t.run(&["gateway", "install", "--no-start"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("systemctl is unavailable") && stdout.contains("not found"), "{stdout}");
    assert!(stdout.contains("not checked with systemd-analyze"), "{stdout}");
    let (code, stdout, _) = t.run(&["gateway", "uninstall"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("systemctl is unavailable"), "{stdout}");
    assert!(!t.unit("hermes-gateway.service").exists());
}

#[test]
fn a_temporary_hermes_home_is_not_baked_into_a_real_unit_directory() {
    // Setup's HERMES_HOME is a temporary directory; without HERMES_SYSTEMD_DIR the unit would
    // go to $XDG_CONFIG_HOME/systemd/user, here itself a temporary directory.
    let mut t = ServiceTest::new().with_fake_systemd();
    let config_home = tempfile::tempdir().unwrap();
    let temp_home = t.setup.home.path().to_str().unwrap().to_string();
    t.setup.set("HERMES_HOME", &temp_home).set("HERMES_SYSTEMD_DIR", "").set("XDG_CONFIG_HOME", config_home.path().to_str().unwrap());
    let (code, stdout, stderr) = t.run(&["gateway", "install", "--no-start"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("temporary directory") && stderr.contains(&temp_home), "{stderr}");
    assert!(!config_home.path().join("systemd").exists(), "nothing was written");
    assert!(t.calls().is_empty(), "systemd was not touched: {:?}", t.calls());
}

#[test]
fn a_unit_systemd_analyze_rejects_is_not_written() {
    // A drain timeout systemd cannot represent: it would silently drop TimeoutStopSec=.
    let t = ServiceTest::new().with_fake_systemd();
    std::fs::create_dir_all(t.hermes_home()).unwrap();
    std::fs::write(t.hermes_home().join("config.yaml"), "gateway:\n  drain_timeout_secs: 18446744073709551000\n").unwrap();
    let (code, stdout, stderr) = t.run(&["gateway", "install", "--no-start"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("systemd-analyze verify rejects") && stderr.contains("18446744073709551030"), "{stderr}");
    assert!(!t.unit("hermes-gateway.service").exists());
    assert!(t.calls().is_empty());
}

#[test]
fn list_shows_every_profile_with_its_state() {
    let t = ServiceTest::new().with_fake_systemd();
    std::fs::create_dir_all(t.hermes_home().join("profiles/work")).unwrap();
    assert_eq!(t.run(&["gateway", "install", "--no-start"]).0, Some(0));
    let (code, stdout, stderr) = t.run(&["gateway", "list"]);
    assert_eq!(code, Some(0), "{stderr}");
    let row =
        |profile: &str| stdout.lines().find(|l| l.starts_with(&format!("{profile} "))).map(|l| l.split_whitespace().collect::<Vec<_>>());
    assert_eq!(row("default"), Some(vec!["default", "hermes-gateway.service", "user", "active"]), "{stdout}");
    assert_eq!(row("work"), Some(vec!["work", "hermes-gateway-work.service", "no", "-"]), "{stdout}");
}
