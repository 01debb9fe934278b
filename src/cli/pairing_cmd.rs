//! `hermes pairing list | approve <platform> <code> | revoke <platform> <user_id> | clear-pending`:
//! the operator's side of DM pairing (see `gateway::intake::pairing`). Works on the files of the selected
//! HERMES_HOME (or, when its store is PostgreSQL, the pairing folder every replica shares),
//! beside a running gateway (both take the folder's lock), so an approval or a revocation
//! applies to the user's next message without a restart. Exit 0 on success, 1 when
//! the code is wrong or expired, approvals are locked, or the user was not approved; 78 when
//! HERMES_HOME cannot be resolved.

use super::{Cli, command_runtime, config_failure, report, resolve};
use crate::gateway::folders::{Folders, shared_store};
use crate::gateway::intake::pairing::store::{self, PairingError, PairingStore};
use clap::Subcommand;
use std::process::ExitCode;

/// Why a `hermes pairing` subcommand failed (printed after "hermes: ", exit 1).
#[derive(Debug, thiserror::Error)]
enum PairingCliError {
    #[error(transparent)]
    Pairing(#[from] PairingError),
    #[error("user id {user_id} is not an approved {platform} user (see `hermes pairing list`)")]
    NotApproved { user_id: String, platform: String },
}

#[derive(Debug, Subcommand)]
pub enum PairingCommand {
    /// Show pending pairing requests (who asked, when, until when) and the approved users. The
    /// codes themselves are not shown: only their hashes are kept.
    List,
    /// Approve the user who was sent CODE on PLATFORM (the code is not case-sensitive). Five
    /// wrong codes lock the platform's approvals for an hour.
    Approve {
        /// The platform the user wrote on, e.g. `telegram`.
        platform: String,
        /// The 8-character code the bot sent them.
        code: String,
    },
    /// Take a user's approval away; their next message is ignored again.
    Revoke {
        platform: String,
        /// The platform's user id (as `hermes pairing list` shows it), never a display name.
        user_id: String,
    },
    /// Drop every pending code (of one platform, or of all).
    ClearPending { platform: Option<String> },
}

pub(super) fn run(cli: &Cli, command: &PairingCommand) -> ExitCode {
    let resolved = match resolve(cli) {
        Ok(resolved) => resolved,
        Err(e) => return config_failure(&e),
    };
    let runtime = match command_runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let (home, config) = (resolved.home, resolved.loaded.config);
    let shared = match runtime.block_on(shared_store(&config, &home)) {
        Ok(shared) => shared,
        Err(e) => return report(Err::<String, _>(e)),
    };
    // Called from this thread, outside the runtime: a shared folder waits on the runtime's worker.
    let store = Folders::of(&home, shared.as_ref()).pairing();
    let outcome = match command {
        PairingCommand::List => list(&store),
        PairingCommand::Approve { platform, code } => approve(&store, platform, code),
        PairingCommand::Revoke { platform, user_id } => revoke(&store, platform, user_id),
        PairingCommand::ClearPending { platform } => clear_pending(&store, platform.as_deref()),
    };
    report(outcome)
}

fn approve(store: &PairingStore, platform: &str, code: &str) -> Result<String, PairingCliError> {
    let user = store.approve(platform, code, store::now())?;
    let name = if user.user_name.is_empty() { String::new() } else { format!("{} ", user.user_name) };
    Ok(format!("Approved {name}(user id {}) on {}. Their next message reaches the agent; no restart needed.", user.user_id, user.platform))
}

fn revoke(store: &PairingStore, platform: &str, user_id: &str) -> Result<String, PairingCliError> {
    let platform = store::platform_name(platform)?;
    if store.revoke(&platform, user_id)? {
        Ok(format!("Revoked user id {user_id} on {platform}: their next message is ignored."))
    } else {
        Err(PairingCliError::NotApproved { user_id: user_id.to_string(), platform })
    }
}

fn clear_pending(store: &PairingStore, platform: Option<&str>) -> Result<String, PairingCliError> {
    let dropped = store.clear_pending(platform)?;
    Ok(format!("Cleared {dropped} pending pairing code(s)."))
}

fn list(store: &PairingStore) -> Result<String, PairingCliError> {
    let now = store::now();
    let pending = store.pending(now)?;
    let approved = store.approved()?;
    let mut out = String::from("Pending pairing requests (each code is only in the chat it was sent to):\n");
    if pending.is_empty() {
        out.push_str("  (none)\n");
    }
    for p in &pending {
        let age = minutes(now - p.created_at);
        let left = minutes(p.created_at + store::CODE_TTL_SECS - now);
        out.push_str(&format!(
            "  {:<10} user id {:<20} {:<24} asked {age} min ago, expires in {left} min\n",
            p.platform,
            p.user_id,
            quoted(&p.user_name)
        ));
    }
    for (platform, until) in store.lockouts(now)? {
        out.push_str(&format!("  {platform}: approvals locked for another {} min after failed attempts\n", minutes(until - now)));
    }
    if !pending.is_empty() {
        out.push_str("  Approve one with `hermes pairing approve <platform> <code>`.\n");
    }
    out.push_str("Approved users:\n");
    if approved.is_empty() {
        out.push_str("  (none)\n");
    }
    for a in &approved {
        let when = chrono::DateTime::from_timestamp(a.approved_at as i64, 0).map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string());
        out.push_str(&format!(
            "  {:<10} user id {:<20} {:<24} approved {}\n",
            a.platform,
            a.user_id,
            quoted(&a.user_name),
            when.unwrap_or_else(|| "at an unknown time".into())
        ));
    }
    Ok(out.trim_end().to_string())
}

/// A name the user chose, marked as such.
fn quoted(name: &str) -> String {
    if name.is_empty() { "(no name)".into() } else { format!("{name:?}") }
}

/// Whole minutes, rounded up, never negative.
fn minutes(secs: f64) -> u64 {
    (secs.max(0.0) / 60.0).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Home;
    use crate::gateway::intake::pairing::store::CodeRequest;

    fn store_with_code() -> (tempfile::TempDir, PairingStore, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = PairingStore::new(Home::at(dir.path()).pairing_dir());
        let CodeRequest::Issued(code) = store.request_code("telegram", "6001", "Mallory", store::now()).unwrap() else {
            panic!("no code issued")
        };
        (dir, store, code)
    }

    #[test]
    fn a_wrong_code_fails_and_the_right_one_approves() {
        let (_dir, store, code) = store_with_code();
        let err = approve(&store, "telegram", "WRONGCOD").unwrap_err().to_string();
        assert!(err.contains("`WRONGCOD` is not a pending pairing code for telegram"), "{err}");
        assert!(err.contains("4 more failed attempt(s)"), "{err}");
        let listing = list(&store).unwrap();
        assert!(listing.contains("6001") && listing.contains("\"Mallory\""), "{listing}");
        assert!(!listing.contains(&code), "the listing never shows a code:\n{listing}");
        let ok = approve(&store, "TELEGRAM", &code.to_ascii_lowercase()).unwrap();
        assert!(ok.contains("Approved Mallory (user id 6001) on telegram"), "{ok}");
        let listing = list(&store).unwrap();
        assert!(listing.contains("Pending pairing requests (each code is only in the chat it was sent to):\n  (none)"), "{listing}");
        assert!(listing.contains("telegram   user id 6001"), "{listing}");
    }

    #[test]
    fn after_five_wrong_codes_the_right_one_is_refused_and_the_listing_says_why() {
        let (_dir, store, code) = store_with_code();
        for _ in 0..5 {
            approve(&store, "telegram", "WRONGCOD").unwrap_err();
        }
        let err = approve(&store, "telegram", &code).unwrap_err().to_string();
        assert!(err.contains("pairing approvals for telegram are locked for another 60 min"), "{err}");
        let listing = list(&store).unwrap();
        assert!(listing.contains("telegram: approvals locked for another 60 min"), "{listing}");
    }

    #[test]
    fn revoking_an_unknown_user_fails_and_a_known_one_succeeds() {
        let (_dir, store, code) = store_with_code();
        assert!(revoke(&store, "telegram", "6001").unwrap_err().to_string().contains("is not an approved telegram user"));
        approve(&store, "telegram", &code).unwrap();
        assert!(revoke(&store, "telegram", "6001").unwrap().contains("Revoked user id 6001"));
        assert!(store.approved_ids("telegram").unwrap().is_empty());
    }

    #[test]
    fn clearing_pending_codes_makes_them_unapprovable() {
        let (_dir, store, code) = store_with_code();
        assert_eq!(clear_pending(&store, None).unwrap(), "Cleared 1 pending pairing code(s).");
        assert!(approve(&store, "telegram", &code).is_err());
    }
}
