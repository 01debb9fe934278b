//! `hermes cron list | create | edit | pause | resume | run | remove | status | tick`: the jobs
//! of the selected HERMES_HOME from the shell, beside a running gateway or without one. The
//! shell is the machine's owner, so it manages every job.
//!
//! `run` makes a job due now; `tick` runs the due jobs. Where they run:
//! - A gateway is running (its PID file names a live process and its ticker's heartbeat is
//!   fresh): it runs them, with its connected adapters. `run` changes `jobs.json` (which wakes
//!   its ticker) and follows the job until its run is recorded; `tick` touches the ticker's wake
//!   file ([`crate::cron::ticker::request_tick`]). Nothing is delivered from this process.
//! - None is running: one tick here, under the same tick lock as the gateway's ticker (a held
//!   lock means it does nothing), with the gateway's agent and the adapters built but not
//!   connected: a part a platform does not take from here (Matrix needs its sync connection)
//!   stays in the outbox, and the gateway's courier sends it, once, when it starts.
//!
//! Exit 0 on success, 1 on failure (and when a job was not run), 78 on a bad config.

use super::{Cli, config_failure, report, resolve};
use crate::config::Config;
use crate::cron::manage::{Actor, CronJobs, JobEdit, ManageError, NewJob, describe};
use crate::cron::status::Markers;
use crate::cron::store::Listing;
use crate::cron::ticker::{TickError, TickReport};
use crate::gateway::{self, GatewayError};
use chrono::Utc;
use clap::{Args, Subcommand};
use std::process::ExitCode;
use std::time::Duration;

use super::cron_handoff as handoff;

/// How long `hermes cron run` run here tries again for a tick lock another process holds (its
/// tick takes moments; the job it made due must not wait for the next minute).
const LOCK_PATIENCE: Duration = Duration::from_secs(30);
/// Between those tries.
const LOCK_RETRY: Duration = Duration::from_millis(250);

/// Why a `hermes cron` subcommand failed (printed after "hermes: ", exit 1).
#[derive(Debug, thiserror::Error)]
pub(super) enum CronCliError {
    #[error(transparent)]
    Manage(#[from] ManageError),
    #[error("cannot ask the running gateway to tick: {0}")]
    WakeTicker(std::io::Error),
    /// The gateway's parts (agent, adapters, store) could not be built for a tick here.
    #[error(transparent)]
    Wiring(#[from] GatewayError),
    #[error("the tick failed: {0}")]
    Tick(TickError),
    /// The job's owner may no longer have it run, so the run paused it.
    #[error("'{name}' was not run and is paused: {why}")]
    PausedForOwner { name: String, why: String },
}

#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// List the jobs (paused and completed ones with --all).
    List {
        #[arg(long)]
        all: bool,
    },
    /// Create a job: `hermes cron create "every 1h" "check the build" --deliver telegram`.
    Create {
        /// `30m`, `every 2h`, `0 9 * * mon-fri`, `2026-02-03T14:00` (quote it).
        schedule: String,
        /// What the agent does at each run.
        prompt: Option<String>,
        #[command(flatten)]
        fields: JobFields,
        /// Run only the script (from HERMES_HOME/scripts) and deliver its output.
        #[arg(long)]
        no_agent: bool,
    },
    /// Change a job; unnamed fields stay as they are.
    Edit {
        /// The job's id or name.
        job: String,
        #[arg(long)]
        schedule: Option<String>,
        #[arg(long)]
        prompt: Option<String>,
        #[command(flatten)]
        fields: JobFields,
    },
    /// Stop a job from running until it is resumed.
    Pause { job: String },
    /// Let a paused job run again (its next run is computed from now).
    Resume { job: String },
    /// Run a job now, here or in the running gateway (whichever ticks first).
    Run { job: String },
    /// Delete a job.
    Remove { job: String },
    /// Whether a ticker is running ("no ticker", "alive but failing", "firing") and the next runs.
    Status,
    /// Run one tick now, under the tick lock.
    Tick,
}

/// Fields shared by `create` and `edit`.
#[derive(Debug, Args)]
pub struct JobFields {
    #[arg(long)]
    name: Option<String>,
    /// local | origin | <platform> | <platform>:<chat_id>[:<thread_id>] | all | a comma list.
    // The text above is the `--help` line, not rustdoc: its brackets are an optional part.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long)]
    deliver: Option<String>,
    /// Runs before the job ends (0 = forever).
    #[arg(long)]
    repeat: Option<i64>,
    /// A skill loaded into each run (repeatable).
    #[arg(long = "skill")]
    skills: Vec<String>,
    #[arg(long)]
    model: Option<String>,
    /// A script in HERMES_HOME/scripts, run before the agent.
    #[arg(long)]
    script: Option<String>,
}

pub(super) fn run(cli: &Cli, command: &CronCommand) -> ExitCode {
    let resolved = match resolve(cli) {
        Ok(r) => r,
        Err(e) => return config_failure(&e),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hermes: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (home, config) = (resolved.home, resolved.loaded.config);
    // Runs started by `tick` and `run` log their warnings and errors here.
    crate::observe::init("warn", crate::observe::LogFormat::Text, config.secret_values());
    let shared = match runtime.block_on(gateway::folders::shared_store(&config, &home)) {
        Ok(shared) => shared,
        Err(e) => return report(Err::<String, _>(e)),
    };
    let jobs = gateway::cron::ticker::jobs(&config, &home, &gateway::folders::Folders::of(&home, shared.as_ref()));
    let outcome = runtime.block_on(dispatch(&home, config, &jobs, command));
    runtime.shutdown_timeout(Duration::from_secs(2));
    report(outcome)
}

async fn dispatch(home: &crate::config::Home, config: Config, jobs: &CronJobs, command: &CronCommand) -> Result<String, CronCliError> {
    let shell = Actor::shell();
    let shown = |job: crate::cron::job::Job, what: &str| format!("{what} '{}' (id {})\n{}", job.name, job.id, describe(&job, jobs.zone()));
    match command {
        CronCommand::List { all } => list(jobs, *all).await,
        CronCommand::Create { schedule, prompt, fields, no_agent } => {
            let spec = NewJob {
                schedule: schedule.clone(),
                prompt: prompt.clone().unwrap_or_default(),
                name: fields.name.clone(),
                deliver: fields.deliver.clone(),
                repeat: fields.repeat,
                skills: fields.skills.clone(),
                model: fields.model.clone(),
                script: fields.script.clone(),
                no_agent: *no_agent,
                ..NewJob::default()
            };
            let job = jobs.create(spec).await?;
            Ok(format!("{}{}", shown(job, "created"), ticker_warning(home)))
        }
        CronCommand::Edit { job, schedule, prompt, fields } => {
            let edit = JobEdit {
                schedule: schedule.clone(),
                prompt: prompt.clone(),
                name: fields.name.clone(),
                deliver: fields.deliver.clone(),
                repeat: fields.repeat,
                skills: Some(fields.skills.clone()).filter(|s| !s.is_empty()),
                model: fields.model.clone(),
                script: fields.script.clone(),
                ..JobEdit::default()
            };
            Ok(shown(jobs.edit(&shell, job, edit).await?, "updated"))
        }
        CronCommand::Pause { job } => Ok(shown(jobs.pause(&shell, job).await?, "paused")),
        CronCommand::Resume { job } => Ok(shown(jobs.resume(&shell, job).await?, "resumed")),
        CronCommand::Remove { job } => {
            let j = jobs.remove(&shell, job).await?;
            Ok(format!("removed '{}' (id {})", j.name, j.id))
        }
        CronCommand::Run { job } => run_now(home, config, jobs, job).await,
        CronCommand::Status => status(home, jobs).await,
        CronCommand::Tick => {
            if let Some(pid) = handoff::running_gateway(home) {
                request_tick(jobs).await.map_err(CronCliError::WakeTicker)?;
                return Ok(format!("handed to the running gateway (PID {pid}): it ticks now and runs what is due"));
            }
            let (report, waiting) = tick(home, config, Duration::ZERO).await?;
            Ok(if report.skipped {
                "tick skipped: another process (the gateway, or another tick) holds the tick lock".into()
            } else {
                format!("tick done here (no gateway is running): {} run(s){waiting}", report.started)
            })
        }
    }
}

/// `hermes cron run`: make the job due now, then let the running gateway run it (and follow the
/// run to its record), or run it here when no gateway runs.
async fn run_now(home: &crate::config::Home, config: Config, jobs: &CronJobs, reference: &str) -> Result<String, CronCliError> {
    let before = jobs.find(&Actor::shell(), reference).await?;
    let job = jobs.run_now(&Actor::shell(), &before.id).await?;
    if let Some(pid) = handoff::running_gateway(home) {
        // `jobs.json` changed, which wakes its ticker within seconds; the wake file says "now".
        if let Err(e) = request_tick(jobs).await {
            tracing::debug!(error = %e, "cannot touch the ticker's wake file; its next look at jobs.json picks the run up");
        }
        let taken = format!("'{}' handed to the running gateway (PID {pid}), which delivers through its connected adapters", job.name);
        return handoff::follow(jobs, &before, &taken).await;
    }
    let (_, waiting) = tick(home, config, LOCK_PATIENCE).await?;
    let after = handoff::after_run(jobs, &before).await?;
    Ok(format!("ran '{}' here (no gateway is running): {after}{waiting}", job.name))
}

/// Touch the ticker's wake document (off the runtime's threads: the folder may be shared).
async fn request_tick(jobs: &CronJobs) -> std::io::Result<()> {
    let folder = jobs.store().folder().clone();
    tokio::task::spawn_blocking(move || crate::cron::ticker::request_tick(folder.as_ref())).await.map_err(std::io::Error::other)?
}

async fn list(jobs: &CronJobs, all: bool) -> Result<String, CronCliError> {
    let Listing { jobs: listed, skipped } = jobs.list(&Actor::shell(), all).await?;
    let shown: Vec<String> = listed.iter().map(|j| describe(j, jobs.zone())).collect();
    let mut text = if shown.is_empty() { "no cron jobs".to_string() } else { shown.join("\n") };
    for s in skipped {
        text.push_str(&format!("\n! record {} in jobs.json is skipped: {}", s.index, s.reason));
    }
    Ok(text)
}

/// One tick in this process, with the gateway's agent and adapters (built, not connected);
/// waits for the runs it began. Also says how many parts wait in the outbox afterwards (those a
/// platform would not take from here, for the gateway to send; with a store shared by replicas,
/// all of them, for the replica serving their platform).
///
/// `lock_patience`: how long a tick that finds the tick lock held tries again. Another process
/// (a replica's ticker, another shell) holds it only for its own tick; a job made due by
/// `hermes cron run` after that tick read the jobs would otherwise wait for the next minute.
async fn tick(home: &crate::config::Home, config: Config, lock_patience: Duration) -> Result<(TickReport, String), CronCliError> {
    let wiring = gateway::headless(home, config, &crate::registry::Registry::builtin()).await?;
    let shared = wiring.health.tenures().is_shared();
    let ticker = &wiring.cron.ticker;
    let markers = Markers::new(&home.cron_dir());
    let patient_until = std::time::Instant::now() + lock_patience;
    let report = loop {
        match ticker.tick(Utc::now()).await {
            Ok(r) if r.skipped && std::time::Instant::now() < patient_until => tokio::time::sleep(LOCK_RETRY).await,
            Ok(r) => break r,
            Err(e) => {
                markers.failure(Utc::now(), &e.to_string());
                return Err(CronCliError::Tick(e));
            }
        }
    };
    ticker.wait_for_runs().await;
    let waiting = match wiring.store.outbox_summary().await {
        Ok(queues) => queues.iter().map(|q| q.pending).sum(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot count the messages waiting in the outbox");
            0
        }
    };
    Ok((report, handoff::waiting_note(waiting, shared)))
}

async fn status(home: &crate::config::Home, jobs: &CronJobs) -> Result<String, CronCliError> {
    let now = Utc::now();
    let verdict = Markers::new(&home.cron_dir()).verdict(now).describe(now);
    // A jobs file that cannot be read is the likeliest reason for a failing ticker: say so, and
    // still say what the ticker is doing.
    let listed = match jobs.list(&Actor::shell(), true).await {
        Ok(listed) => listed.jobs,
        Err(e) => return Ok(format!("ticker: {verdict}\njobs: {e}")),
    };
    let active: Vec<_> = listed.iter().filter(|j| j.enabled).collect();
    let mut text = format!("ticker: {verdict}\njobs: {} ({} active)", listed.len(), active.len());
    for job in active.iter().take(5) {
        text.push('\n');
        text.push_str(&describe(job, jobs.zone()));
    }
    Ok(text)
}

/// A warning when no ticker is running: the job would never fire (field lesson: the most common
/// cron report is "my jobs never fired" with no gateway up).
fn ticker_warning(home: &crate::config::Home) -> String {
    let now = Utc::now();
    match Markers::new(&home.cron_dir()).verdict(now) {
        crate::cron::status::Verdict::NoTicker { .. } => {
            "\nwarning: no gateway is ticking in this HERMES_HOME, so the job will not run until one starts (`hermes gateway run`) or `hermes cron tick` runs".into()
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_worded_as_before_the_errors_were_typed() {
        let paused = CronCliError::PausedForOwner { name: "digest".into(), why: "owner telegram:1 is no longer allowed".into() };
        assert_eq!(paused.to_string(), "'digest' was not run and is paused: owner telegram:1 is no longer allowed");
        let wake = CronCliError::WakeTicker(std::io::Error::other("read-only file system"));
        assert_eq!(wake.to_string(), "cannot ask the running gateway to tick: read-only file system");
    }
}
