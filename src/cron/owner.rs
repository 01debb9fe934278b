//! Whether a job's owner may still have it run. A job made from a chat runs for the person who
//! made it (its `origin`); when that person is no longer let in (taken off the allowlist, their
//! pairing revoked), their jobs must stop with them rather than keep posting on their behalf.
//!
//! The question is asked where each run starts (the store's due selection, which serves the
//! ticker and `run`); a refused job is paused with the reason, shown by `hermes cron list` and
//! `/cron list`, and only an admin (or the shell) resumes it. Jobs without an owner (made from
//! the shell, or by a caller the operator authenticated upstream) are the operator's and always
//! run. The answer itself ([`OwnerCheck`]) comes from the gateway, which knows the allowlists
//! and pairings; this module knows only the question and the shape of the pause.

use super::job::Job;

/// Says whether a job's owner may still have it run.
pub trait OwnerCheck: Send + Sync + 'static {
    /// `Some(why)` when the job must not run because of its owner: the pause reason, naming the
    /// owner and what changed (made with [`revoked`]).
    fn refusal(&self, job: &Job) -> Option<String>;
}

/// Every owner may: for tests and tools that judge no one.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct EveryOwner;

impl OwnerCheck for EveryOwner {
    fn refusal(&self, _job: &Job) -> Option<String> {
        None
    }
}

/// The start of every owner pause reason; [`is_owner_pause`] recognises it.
const PREFIX: &str = "owner ";
const MIDDLE: &str = " is no longer allowed";

/// The pause reason for a job whose owner (`platform:user`) is no longer let in, and why.
pub(crate) fn revoked(owner: &str, why: &str) -> String {
    format!("{PREFIX}{owner}{MIDDLE} ({why})")
}

/// Whether the job was paused because its owner is no longer allowed (not by a person).
pub(crate) fn is_owner_pause(job: &Job) -> bool {
    !job.enabled && job.paused_reason.as_deref().is_some_and(|r| r.starts_with(PREFIX) && r.contains(MIDDLE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_pause_is_told_from_a_pause_by_hand() {
        let mut job = Job::for_tests("j1", "ping");
        job.enabled = false;
        job.paused_reason = Some(revoked("telegram:123", "removed from the allowlist"));
        assert!(is_owner_pause(&job));
        assert_eq!(job.paused_reason.as_deref(), Some("owner telegram:123 is no longer allowed (removed from the allowlist)"));
        job.paused_reason = Some("paused by hand".into());
        assert!(!is_owner_pause(&job));
        job.paused_reason = None;
        assert!(!is_owner_pause(&job));
        job.paused_reason = Some(revoked("telegram:123", "x"));
        job.enabled = true;
        assert!(!is_owner_pause(&job), "a resumed job is no longer paused, whatever text is left");
    }
}
