//! The gateway's answer to "may this job's owner still have it run?" ([`OwnerCheck`]): the owner
//! recorded in the job's origin is judged as a message from them would be, by the allowlists
//! and admin lists of the configuration this process loaded and by the pairing approvals as they
//! are on disk now.
//!
//! When a change applies: pairing approvals and revocations at once (the approvals file is read
//! again whenever it changed); an edited allowlist (`config.yaml`, `.env`) when the process that
//! runs the job reads it, that is after a gateway restart (as for chat messages, which the same
//! lists admit) and at every `hermes cron tick|run|resume`, each a fresh process.
//!
//! Jobs without an owner (made from the shell) and jobs made on a platform whose callers the
//! operator authenticates upstream (an API key, a signed webhook: no people) are the operator's
//! and always run.

use crate::config::Config;
use crate::cron::job::{Job, Origin};
use crate::cron::owner::{OwnerCheck, revoked};
use crate::gateway::folders::Folders;
use crate::gateway::intake::auth::{AuthDecision, AuthPolicy};
use crate::gateway::intake::pairing::Pairing;
use hermes_adapter::{ChatType, Platform, SessionSource};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Judges owners by the configuration loaded at start and the pairing approvals kept now.
pub(crate) struct OwnerGate {
    policy: AuthPolicy,
    /// Platforms whose callers are authenticated upstream: their jobs belong to the operator.
    endpoints: HashSet<String>,
    /// Per platform, the admins named in the configuration (admins are always let in).
    admins: HashMap<String, Vec<String>>,
}

impl OwnerGate {
    pub(crate) fn new(config: &Config, folders: &Folders) -> OwnerGate {
        let platforms: Vec<String> = config.platforms.others.keys().cloned().collect();
        let pairing = Pairing::new(folders.pairing(), std::iter::empty::<String>());
        let policy = crate::gateway::intake::access::auth_policy(config, &platforms).with_pairing(Arc::new(pairing));
        let endpoints = config
            .platforms
            .others
            .iter()
            .filter(|(_, block)| block.facts.is_some_and(|facts| !facts.people))
            .map(|(name, _)| name.clone())
            .collect();
        let admins = platforms.iter().map(|p| (p.clone(), config.admin_users(p))).collect();
        OwnerGate { policy, endpoints, admins }
    }

    /// Why `user` on `origin`'s platform is no longer let in, if they are not.
    fn refusal_of(&self, origin: &Origin, user: &str) -> Option<String> {
        let platform = origin.platform.to_ascii_lowercase();
        if self.endpoints.contains(&platform) {
            return None;
        }
        let source = sender(origin, &platform, user);
        if self.policy.decide_sender(&source) == AuthDecision::Allowed || self.is_named_admin(&platform, user) {
            return None;
        }
        // Where the configuration names who may talk, the allowlist is what let them in; where
        // it names nobody, only a pairing approval could have.
        let why = if self.policy.names_users_on(&platform) { "removed from the allowlist" } else { "their pairing was revoked" };
        Some(revoked(&format!("{platform}:{user}"), why))
    }

    fn is_named_admin(&self, platform: &str, user: &str) -> bool {
        self.admins.get(platform).is_some_and(|admins| admins.iter().any(|a| a == user))
    }
}

impl OwnerCheck for OwnerGate {
    fn refusal(&self, job: &Job) -> Option<String> {
        let origin = job.origin.as_ref()?;
        let user = origin.user_id.as_deref().map(str::trim).filter(|u| !u.is_empty())?;
        self.refusal_of(origin, user)
    }
}

/// The owner as the sender of a message in the job's chat, with what the platform vouched for
/// when the job was made (the verified handle, whether it was a bot).
fn sender(origin: &Origin, platform: &str, user: &str) -> SessionSource {
    let mut source = SessionSource::new(Platform::new(platform), origin.chat_id.clone(), ChatType::Dm).with_user(user.to_string());
    source.user_handle = origin.extra.get("user_handle").and_then(Value::as_str).map(str::to_string);
    source.is_bot = origin.extra.get("is_bot").and_then(Value::as_bool).unwrap_or(false);
    source
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Home;
    use crate::gateway::intake::pairing::store::PairingStore;

    fn job(platform: &str, user: Option<&str>) -> Job {
        let mut job = Job::for_tests("j1", "ping");
        let mut origin = Origin::new(platform, "c1", None);
        origin.user_id = user.map(str::to_string);
        job.origin = Some(origin);
        job
    }

    fn gate(policy: AuthPolicy, home: &Home) -> OwnerGate {
        let pairing = Pairing::new(PairingStore::new(home.pairing_dir()), std::iter::empty::<String>());
        OwnerGate {
            policy: policy.with_pairing(Arc::new(pairing)),
            endpoints: HashSet::from(["api_server".to_string()]),
            admins: HashMap::new(),
        }
    }

    #[test]
    fn an_owner_off_the_allowlist_is_refused_by_name_and_the_operators_jobs_always_run() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let gate = gate(AuthPolicy::new(vec![], false).with_platform("telegram", vec!["1".into()], false), &home);
        assert_eq!(gate.refusal(&job("telegram", Some("1"))), None, "still on the allowlist");
        let why = gate.refusal(&job("telegram", Some("2"))).expect("off the allowlist");
        assert_eq!(why, "owner telegram:2 is no longer allowed (removed from the allowlist)");
        assert_eq!(gate.refusal(&Job::for_tests("j2", "shell job")), None, "no origin: the operator's");
        assert_eq!(gate.refusal(&job("telegram", None)), None, "no owner recorded: the operator's");
        assert_eq!(gate.refusal(&job("api_server", Some("anyone"))), None, "callers authenticated upstream");
    }

    #[test]
    fn a_paired_owner_runs_until_unpaired_and_the_file_is_read_again() {
        use crate::gateway::intake::pairing::store::{CodeRequest, now};
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let gate = gate(AuthPolicy::new(vec![], false), &home);
        assert!(gate.refusal(&job("telegram", Some("9"))).is_some(), "a stranger's job does not run");
        let store = PairingStore::new(home.pairing_dir());
        let CodeRequest::Issued(code) = store.request_code("telegram", "9", "Nine", now()).unwrap() else { panic!("no code") };
        store.approve("telegram", &code, now()).unwrap();
        assert_eq!(gate.refusal(&job("telegram", Some("9"))), None, "approved by pairing");
        assert!(store.revoke("telegram", "9").unwrap());
        let why = gate.refusal(&job("telegram", Some("9"))).expect("unpaired, without a restart");
        assert_eq!(why, "owner telegram:9 is no longer allowed (their pairing was revoked)");
    }

    #[test]
    fn a_bot_or_a_spoofed_handle_is_not_an_allowed_owner() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let gate = gate(AuthPolicy::new(vec![], false).with_platform("telegram", vec!["@alice".into()], false), &home);
        let mut alice = job("telegram", Some("7"));
        alice.origin.as_mut().unwrap().extra.insert("user_handle".into(), Value::String("alice".into()));
        assert_eq!(gate.refusal(&alice), None, "named by her verified handle");
        let mut display_only = job("telegram", Some("8"));
        display_only.origin.as_mut().unwrap().user_name = Some("alice".into());
        assert!(gate.refusal(&display_only).is_some(), "a display name is never an allowlist match");
        alice.origin.as_mut().unwrap().extra.insert("is_bot".into(), Value::Bool(true));
        assert!(gate.refusal(&alice).is_some(), "a bot is never an allowed owner");
    }
}
