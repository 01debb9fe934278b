//! Where `hermes cron run|tick` runs a job: handed to the running gateway, whose adapters are
//! connected, or here when none runs. This module tells whether one runs, follows a handed-over
//! run until the job records it, and says what became of a run and of its deliveries.

use super::cron_cmd::CronCliError;
use crate::config::Home;
use crate::cron::job::Job;
use crate::cron::manage::{Actor, CronJobs, ManageError};
use crate::cron::owner;
use crate::cron::status::{Markers, Verdict};
use crate::cron::store::JobStoreError;
use chrono::Utc;
use std::time::{Duration, Instant};

/// How long `hermes cron run` follows a run the gateway took before it leaves it to run on.
const FOLLOW_FOR: Duration = Duration::from_secs(120);
/// How often the job record is read while following.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// The PID of the gateway running on this HERMES_HOME, if one is: its PID file names a live
/// process (the file is removed when the gateway stops) and its ticker's heartbeat is fresh (a
/// hung or crashed gateway's is not). When in doubt the answer is "none": the run then happens
/// here, under the tick lock that keeps it from running twice.
pub(super) fn running_gateway(home: &Home) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(home.pid_file()).ok()?.trim().parse().ok()?;
    let alive = pid != std::process::id() && super::process_alive(pid);
    let ticking = !matches!(Markers::new(&home.cron_dir()).verdict(Utc::now()), Verdict::NoTicker { .. });
    (alive && ticking).then_some(pid)
}

/// What became of the job's run since `before` was read, as one line.
enum Seen {
    Recorded(Box<Job>),
    /// A finished one-shot is deleted with its run.
    Removed,
    /// Not run: its owner may no longer have it run.
    Refused(String),
    /// Not recorded yet; `started`: a run holds the job's claim.
    Pending {
        started: bool,
    },
}

async fn look(jobs: &CronJobs, before: &Job) -> Result<Seen, CronCliError> {
    let job = match jobs.find(&Actor::shell(), &before.id).await {
        Ok(job) => job,
        Err(ManageError::Store(JobStoreError::NotFound { .. })) => return Ok(Seen::Removed),
        Err(e) => return Err(e.into()),
    };
    if owner::is_owner_pause(&job) {
        return Ok(Seen::Refused(job.paused_reason.clone().unwrap_or_default()));
    }
    let recorded = job.last_run_at != before.last_run_at && job.run_claim.is_none();
    Ok(if recorded { Seen::Recorded(Box::new(job)) } else { Seen::Pending { started: job.run_claim.is_some() } })
}

/// Follow a run the gateway took (`taken` says so) until the job records it, for at most
/// [`FOLLOW_FOR`]; a job refused for its owner is an error.
pub(super) async fn follow(jobs: &CronJobs, before: &Job, taken: &str) -> Result<String, CronCliError> {
    let deadline = Instant::now() + FOLLOW_FOR;
    loop {
        match look(jobs, before).await? {
            Seen::Pending { .. } if Instant::now() < deadline => tokio::time::sleep(FOLLOW_POLL).await,
            Seen::Pending { started: true } => {
                return Ok(format!("{taken}; it is still running after {} s (see `hermes cron list`)", FOLLOW_FOR.as_secs()));
            }
            Seen::Pending { started: false } => {
                return Ok(format!(
                    "{taken}; it has not started within {} s (is the gateway stopping?); it stays due and runs at the next tick",
                    FOLLOW_FOR.as_secs()
                ));
            }
            Seen::Refused(why) => return Err(CronCliError::PausedForOwner { name: before.name.clone(), why }),
            seen => return Ok(format!("{taken}: {}", outcome(&seen))),
        }
    }
}

/// What the run made here left in the job record. A run another process holds the job's claim
/// for (a replica's ticker took it while this one waited for the tick lock) is followed to its
/// record, for at most [`FOLLOW_FOR`].
pub(super) async fn after_run(jobs: &CronJobs, before: &Job) -> Result<String, CronCliError> {
    let deadline = Instant::now() + FOLLOW_FOR;
    loop {
        match look(jobs, before).await? {
            Seen::Refused(why) => return Err(CronCliError::PausedForOwner { name: before.name.clone(), why }),
            Seen::Pending { started: true } if Instant::now() < deadline => tokio::time::sleep(FOLLOW_POLL).await,
            Seen::Pending { started: true } => {
                return Ok(format!("another process runs it; still running after {} s (see `hermes cron list`)", FOLLOW_FOR.as_secs()));
            }
            Seen::Pending { started: false } => {
                return Ok("it did not run here (another process held the tick lock throughout); it stays due for the next tick".into());
            }
            seen => return Ok(outcome(&seen)),
        }
    }
}

fn outcome(seen: &Seen) -> String {
    match seen {
        Seen::Removed => "it ran, and the one-shot is done".into(),
        Seen::Recorded(job) => {
            let mut line = match job.last_error.as_deref().filter(|_| job.last_status.as_deref() == Some("error")) {
                Some(error) => format!("it ran and failed: {error}"),
                None => "it ran".to_string(),
            };
            if let Some(error) = &job.last_delivery_error {
                line.push_str(&format!("; a delivery failed: {error}"));
            }
            line
        }
        Seen::Refused(why) => format!("not run: {why}"),
        Seen::Pending { .. } => "not recorded yet".into(),
    }
}

/// A note on the parts waiting in the outbox: they go out when the gateway starts, or with a
/// `shared` store, from the replica serving their platform.
pub(super) fn waiting_note(waiting: u64, shared: bool) -> String {
    match waiting {
        0 => String::new(),
        n if shared => format!(
            "\n{n} message(s) wait in the outbox for the replica serving their platform, which delivers them, once (`hermes outbox list`)"
        ),
        n => format!(
            "\n{n} message(s) wait in the outbox for a platform this shell cannot send to; the gateway delivers them, once, when it starts (`hermes outbox list`)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_counts_as_running_only_with_a_live_pid_and_a_fresh_heartbeat() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        std::fs::create_dir_all(home.cron_dir()).unwrap();
        let mut gateway = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = gateway.id();
        assert_eq!(running_gateway(&home), None, "no PID file: none runs");
        std::fs::write(home.pid_file(), pid.to_string()).unwrap();
        assert_eq!(running_gateway(&home), None, "a live process without a ticker's heartbeat (hung, or not a gateway)");
        let markers = Markers::new(&home.cron_dir());
        markers.heartbeat(Utc::now() - chrono::Duration::minutes(10));
        assert_eq!(running_gateway(&home), None, "a stale heartbeat");
        markers.heartbeat(Utc::now());
        assert_eq!(running_gateway(&home), Some(pid));
        std::fs::write(home.pid_file(), "not a pid").unwrap();
        assert_eq!(running_gateway(&home), None, "a PID file that says nothing");
        std::fs::write(home.pid_file(), pid.to_string()).unwrap();
        gateway.kill().unwrap();
        gateway.wait().unwrap();
        assert_eq!(running_gateway(&home), None, "the process is gone (a crash left its PID file)");
    }
}
