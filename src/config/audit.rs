//! `hermes security audit`'s findings: the settings and files of a HERMES_HOME that put the
//! owner's machine or accounts at risk, each with its severity and the fix. Pure over the
//! configuration, the home's file modes and the kernel's Landlock support (passed in), so the
//! gateway can also warn at start-up.

use super::{Config, Home};
use hermes_guard::sandbox::Availability;
use std::os::unix::fs::PermissionsExt;

/// How bad a finding is; `High` makes the audit exit non-zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "HIGH",
        }
    }
}

/// One risky setting or file, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub severity: Severity,
    /// Stable short key (for scripts and tests).
    pub key: &'static str,
    pub what: String,
    pub fix: String,
}

/// Files in HERMES_HOME that hold secrets or other users' conversations.
const PRIVATE_FILES: &[&str] = &[".env", "config.yaml", "state.db", "state.db-wal", "auth.json"];

/// Everything risky about this configuration and home on this kernel, worst first.
pub(crate) fn audit(config: &Config, home: &Home) -> Vec<Finding> {
    audit_with(config, home, hermes_guard::sandbox::availability())
}

/// [`audit`] for a kernel whose Landlock support is `landlock`.
pub(crate) fn audit_with(config: &Config, home: &Home, landlock: Availability) -> Vec<Finding> {
    let mut findings = Vec::new();
    listeners(config, &mut findings);
    who_may_talk(config, &mut findings);
    agent_powers(config, &mut findings);
    sandbox_support(config, landlock, &mut findings);
    files(home, &mut findings);
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.key.cmp(b.key)));
    findings
}

/// Only the findings about who may get in and who may act as an admin (for `hermes doctor`).
pub(crate) fn access(config: &Config) -> Vec<Finding> {
    let mut findings = Vec::new();
    who_may_talk(config, &mut findings);
    findings
}

/// The adapters' own judgement of their listeners (a public API without a key, an unsigned
/// public webhook route).
fn listeners(config: &Config, out: &mut Vec<Finding>) {
    for block in config.platforms.others.values() {
        let Some(settings) = &block.settings else { continue };
        for risk in settings.risks(block.is_enabled()) {
            let severity = if risk.high { Severity::High } else { Severity::Medium };
            out.push(Finding { severity, key: risk.key, what: risk.what, fix: risk.fix });
        }
    }
}

fn who_may_talk(config: &Config, out: &mut Vec<Finding>) {
    // The platforms where people write under a user id; there, allowlists decide who gets in.
    let enabled: Vec<&str> = config
        .platforms
        .others
        .iter()
        .filter(|(_, block)| block.is_enabled() && block.facts.is_some_and(|f| f.people))
        .map(|(name, _)| name.as_str())
        .collect();
    for platform in &enabled {
        let listed = config.allowed_users(platform);
        if config.allow_all(platform) || listed.iter().any(|u| u == "*") {
            out.push(Finding {
                severity: Severity::High,
                key: "auth.allow_all",
                what: format!("everyone on {platform} may talk to the agent (allow-all or `*`), and the agent can run commands"),
                fix: format!("list user ids in {}_ALLOWED_USERS and remove the allow-all switch", platform.to_ascii_uppercase()),
            });
        }
    }
    no_admin(config, &enabled, out);
    let users: usize = enabled.iter().map(|p| config.allowed_users(p).iter().filter(|u| *u != "*").count()).sum();
    if users > 1 && config.gateway.admin_users.is_empty() {
        out.push(Finding {
            severity: Severity::Medium,
            key: "auth.no_admins",
            what: format!("{users} users are allowed and no admin is named: every one of them may change the model for everyone, write the agent's memory and skills"),
            fix: "name the owner in gateway.admin_users (or <PLATFORM>_ADMIN_USERS)".into(),
        });
    }
}

/// People can get in (allow-all, `*`, or pairing where the configuration names nobody), yet no
/// admin exists: nobody can use `/yolo`, `/approve always` or `/sethome`, and nobody is told why.
fn no_admin(config: &Config, enabled: &[&str], out: &mut Vec<Finding>) {
    if !config.no_admin_exists() {
        return;
    }
    let pairs = |p: &str| {
        config.platforms.get(p).and_then(|b| b.facts).is_some_and(|f| f.pairing.is_offered())
            && config.allowed_users(p).is_empty()
            && !config.allow_all(p)
    };
    let open: Vec<&str> =
        enabled.iter().copied().filter(|p| config.allow_all(p) || config.allowed_users(p).iter().any(|u| u == "*") || pairs(p)).collect();
    if open.is_empty() {
        return;
    }
    out.push(Finding {
        severity: Severity::Low,
        key: "auth.no_admin",
        what: format!(
            "no admin exists: people get in on {} by allow-all, `*` or pairing, which make nobody an admin, so /yolo, /approve always, /sethome and the global /model are refused to everyone",
            open.join(", ")
        ),
        fix: "name the owner in gateway.admin_users (or <PLATFORM>_ADMIN_USERS)".into(),
    });
}

fn agent_powers(config: &Config, out: &mut Vec<Finding>) {
    if config.approvals.mode == "off" {
        out.push(Finding {
            severity: Severity::High,
            key: "approvals.off",
            what: "approvals.mode is off: destructive commands the agent flags run without asking anyone".into(),
            fix: "set approvals.mode: manual (or smart)".into(),
        });
    }
    if config.terminal.sandbox == super::SandboxSetting::Off {
        out.push(Finding {
            severity: Severity::High,
            key: "terminal.sandbox_off",
            what: "terminal.sandbox is off: the agent's commands can read and write anything this user can".into(),
            fix: "set terminal.sandbox: workspace-write".into(),
        });
    }
    for (name, block) in config.platforms.others.iter().filter(|(_, b)| b.is_enabled()) {
        for (key, sets) in block.settings.iter().flat_map(|s| s.toolsets()) {
            let acting: Vec<&str> = sets.iter().map(String::as_str).filter(|s| super::toolset_acts(s)).collect();
            if !acting.is_empty() {
                out.push(Finding {
                    severity: Severity::Medium,
                    key: "platform.acting_toolsets",
                    what: format!("platforms.{name}.{key} lets whoever can send {name} a payload use {}", acting.join(", ")),
                    fix: format!("remove them from platforms.{name}.{key} unless the payload is fully trusted"),
                });
            }
        }
    }
}

/// A sandbox asked for on a kernel that cannot enforce it.
fn sandbox_support(config: &Config, landlock: Availability, out: &mut Vec<Finding>) {
    if config.terminal.sandbox != super::SandboxSetting::Off && !landlock.is_supported() {
        out.push(Finding {
            severity: Severity::High,
            key: "terminal.sandbox_unavailable",
            what: format!("{landlock}: the agent's commands run unconfined (HERMES_HOME readable to them); flagged commands are refused"),
            fix: "run the gateway on Linux 5.13+ with Landlock enabled (lsm=...,landlock)".into(),
        });
    }
}

fn files(home: &Home, out: &mut Vec<Finding>) {
    let root = home.root();
    if let Ok(meta) = std::fs::metadata(&root)
        && meta.permissions().mode() & 0o077 != 0
    {
        out.push(Finding {
            severity: Severity::Medium,
            key: "files.home_open",
            what: format!("{} is readable or writable by other users (mode {:o})", root.display(), meta.permissions().mode() & 0o777),
            fix: format!("chmod 700 {}", root.display()),
        });
    }
    for name in PRIVATE_FILES {
        let path = root.join(name);
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            out.push(Finding {
                severity: if mode & 0o004 != 0 { Severity::High } else { Severity::Medium },
                key: "files.private_file_open",
                what: format!("{} holds secrets or conversations and is open to other users (mode {mode:o})", path.display()),
                fix: format!("chmod 600 {}", path.display()),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(findings: &[Finding]) -> Vec<&'static str> {
        findings.iter().map(|f| f.key).collect()
    }

    #[test]
    fn a_careful_setup_has_no_findings() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(audit_with(&Config::default(), &Home::at(dir.path()), Availability::Supported { abi: 7 }), vec![]);
    }

    #[test]
    fn a_sandbox_the_kernel_cannot_enforce_is_a_high_finding() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let findings = audit_with(&Config::default(), &Home::at(dir.path()), Availability::NotEnabled);
        assert_eq!(keys(&findings), vec!["terminal.sandbox_unavailable"]);
        assert_eq!(findings[0].severity, Severity::High);
        let mut off = Config::default();
        off.terminal.sandbox = crate::config::SandboxSetting::Off;
        assert_eq!(keys(&audit_with(&off, &Home::at(dir.path()), Availability::NotEnabled)), vec!["terminal.sandbox_off"]);
    }

    #[test]
    #[cfg(feature = "api-server")]
    fn risky_settings_and_files_are_named_with_their_fix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join(".env"), "TELEGRAM_BOT_TOKEN=1:x\n").unwrap();
        std::fs::set_permissions(dir.path().join(".env"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let yaml = "platforms:\n  api_server:\n    enabled: true\n    host: 0.0.0.0\n";
        let mut config = crate::config::load_str(yaml, std::path::Path::new("config.yaml"), &crate::config::Env::default()).unwrap().config;
        config.approvals.mode = "off".into();
        let findings = audit(&config, &Home::at(dir.path()));
        let found = keys(&findings);
        for key in ["api_server.public_without_auth", "approvals.off", "files.private_file_open", "files.home_open"] {
            assert!(found.contains(&key), "{key} missing from {found:?}");
        }
        assert_eq!(findings[0].severity, Severity::High, "worst first");
        assert!(findings.iter().all(|f| !f.fix.is_empty()));
    }
}
