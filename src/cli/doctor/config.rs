//! The configuration as loaded: valid (or doctor would have exited 78 already), and the keys of
//! config.yaml this build does not support — typically settings of the Python Hermes that an
//! existing `~/.hermes` carries — listed so their owner knows they have no effect here.

use super::report::Report;
use crate::cli::Resolved;

pub(super) fn check(report: &mut Report, resolved: &Resolved) {
    report.ok(&format!("configuration valid ({})", resolved.home.config_file().display()));
    let (unsupported, other): (Vec<&String>, Vec<&String>) = resolved.loaded.warnings.iter().partition(|w| unsupported_key(w).is_some());
    if !unsupported.is_empty() {
        report.warn(&format!("{} config.yaml key(s) are not supported by hermes and have no effect:", unsupported.len()));
        for key in unsupported.iter().filter_map(|w| unsupported_key(w)) {
            println!("    - {key}");
        }
    }
    for warning in other {
        report.warn(warning);
    }
    access(report, &resolved.loaded.config);
}

/// Who may get in and who may act as an admin: the audit's findings about it, and the platforms
/// whose strangers are not offered pairing (with the registration's reason).
fn access(report: &mut Report, config: &crate::config::Config) {
    for finding in crate::config::audit::access(config) {
        report.warn(&format!("{} — {}", finding.what, finding.fix));
    }
    for (name, block) in config.platforms.others.iter().filter(|(_, b)| b.is_enabled()) {
        let Some(facts) = block.facts.filter(|f| f.people) else { continue };
        if let hermes_adapter::PairingOffer::NotOffered { why } = facts.pairing
            && config.allowed_users(name).is_empty()
            && !config.allow_all(name)
        {
            report.warn(&format!("{name}: nobody is allowed and strangers are not offered pairing ({why})"));
        }
    }
}

/// The key path of a loader warning about an unknown key (``config.yaml: unknown key `a.b` ...``).
fn unsupported_key(warning: &str) -> Option<&str> {
    let (_, rest) = warning.split_once("unknown key `")?;
    rest.split_once('`').map(|(key, _)| key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_read_from_the_loader_warning() {
        assert_eq!(unsupported_key("config.yaml: unknown key `streaming.cursor` (ignored)"), Some("streaming.cursor"));
        assert_eq!(unsupported_key("config.yaml: unknown key `platforms.telegram.extra.x` (ignored)"), Some("platforms.telegram.extra.x"));
        assert_eq!(unsupported_key("TELEGRAM_ALLOWED_USERS: the entry \"bob\" never matches"), None);
    }
}
