//! The cron jobs file, `cron/jobs.json` (§7.1): reading it as Hermes writes it, changing it
//! under the cron folder's lock (Hermes' cross-process lock file, or a shared store's row lock:
//! see `store::folders`), and the scheduling decisions that must be taken in one
//! locked write so that no run is lost or doubled across processes: which jobs are due and the
//! claim on each run ([`JobStore::take_due`]), and what a finished run does to its job
//! ([`JobStore::finish_run`]).
//!
//! - The file is `{"jobs": [...], "updated_at": "<iso>"}`; a bare list (or Hermes' id-keyed map)
//!   is read and rewritten in that shape by the next write. It is replaced atomically, mode 0600,
//!   in a 0700 folder.
//! - A record that cannot be read (not an object, no id, a schedule that is not one, a bad
//!   timestamp, a duplicate id) is reported, left out of every operation and written back exactly
//!   as it was, in its place.
//! - A file that is not JSON at all fails every operation with [`JobStoreError::Corrupt`] and is
//!   never overwritten: the user's jobs stay on disk to be fixed by hand.
//! - Every read-modify-write holds the folder's lock, waited for a bounded time (30 s by
//!   default). In HERMES_HOME that is an in-process mutex and an exclusive lock on
//!   `<dir>/.jobs.lock`; when the file lock cannot be had, the error is logged and the write goes
//!   on under the mutex alone, as Hermes does: a wedged old process must not freeze the
//!   scheduler. In a shared store the file is one row, changed in one transaction by whichever
//!   replica holds the row lock, so replicas take due runs one after another.
//!
//! Everything here blocks (on the file system or the database); async callers use
//! `spawn_blocking`.

use super::job::{self, Job, JobState, RecordError, RunClaim};
use super::schedule::{ONE_SHOT_TOLERANCE_SECS, ScheduleError, ScheduleKind, Stamp, Zone};
use crate::store::folders::{FileFolder, Folder, LockWait};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

/// How long a write waits for another process's lock before going on without it (Hermes' 30 s).
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(30);

pub(crate) const JOBS_FILE: &str = "jobs.json";
/// Hermes' lock file for the jobs, in the cron folder.
pub const LOCK_FILE: &str = ".jobs.lock";

/// What `last_error` says of a run whose process stopped before recording it.
pub const INTERRUPTED: &str = "interrupted: the process running it stopped; a one-shot runs at most once";
const INTERRUPTED_RECURRING: &str = "interrupted: the process running it stopped before the run was recorded";

/// The jobs file of one cron folder. Cheap to clone; clones share the in-process lock.
#[derive(Debug, Clone)]
pub struct JobStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// This machine's cron folder (the ticker's markers live there whatever keeps the jobs).
    dir: PathBuf,
    /// Where the jobs are: `dir` itself, or a shared store's folder.
    folder: Arc<dyn Folder>,
    lock_wait: Duration,
    /// Runs that ended and wait for [`JobStore::finish_run`] to record them.
    endings: Mutex<Endings>,
}

/// The jobs that could be read, and the records that could not.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub jobs: Vec<Job>,
    pub skipped: Vec<Skipped>,
}

/// A record left out because it cannot be read; it stays in the file as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Its position in the file's list of jobs.
    pub index: usize,
    pub id: Option<String>,
    pub reason: String,
}

/// What [`JobStore::take_due`] hands out.
#[derive(Debug, Clone, Default)]
pub struct Due {
    /// Runs to start now; each is claimed and its job's next run already advanced.
    pub runs: Vec<DueRun>,
    /// One-shots whose earlier run was cut off (its process died): they are not run again, and
    /// are now disabled in `error`; the caller reports the failure.
    pub abandoned: Vec<Job>,
    /// The earliest next run left, for the ticker to sleep until (read in the same write).
    pub next_run: Option<DateTime<Utc>>,
    /// Jobs that fell due but whose owner may no longer have them run: now paused, with the
    /// reason, instead of run (see [`super::owner`]).
    pub refused: Vec<Job>,
}

/// One claimed run.
#[derive(Debug, Clone)]
pub struct DueRun {
    /// The job as saved with its claim (state `running`, next run advanced).
    pub job: Job,
    /// The scheduled time being run: the job's `next_run_at` that fell due (for a run triggered
    /// by hand, the time of the trigger). [`JobStore::finish_run`] takes it back.
    pub occurrence: DateTime<Utc>,
    /// Started later than the schedule's grace after `occurrence` (after downtime, say).
    pub late: bool,
}

/// How a run ended, as the job records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunResult {
    /// `None` = the run succeeded.
    pub error: Option<String>,
    /// Set when the result could not be delivered; clears an earlier one when `None`.
    pub delivery_error: Option<String>,
}

/// What [`JobStore::finish_run`] did with the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    /// Its repeat count was reached (a default one-shot after its run): the job is deleted.
    Removed,
    /// A recurring job, waiting for its next run (`None`: it cannot be computed; the job is in
    /// `error` and stays enabled).
    Scheduled { next_run_at: Option<DateTime<Utc>> },
    /// A one-shot that may run more than once, done: disabled, `completed`.
    Completed,
    /// The job's claim is not on this run (it was taken over, or cleared): nothing recorded.
    NotClaimed,
    /// The job no longer exists (removed while it ran): nothing recorded.
    Missing,
}

#[derive(Debug, thiserror::Error)]
pub enum JobStoreError {
    #[error("cannot read or write {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{} is not a valid cron jobs file ({reason}); it was left as it is: repair it, or move it aside to start with no jobs", path.display())]
    Corrupt { path: PathBuf, reason: FileShapeError },
    #[error("no cron job has the id or name '{reference}'")]
    NotFound { reference: String },
    #[error("'{reference}' is the name of {} cron jobs ({}); use the job's id instead", ids.len(), ids.join(", "))]
    Ambiguous { reference: String, ids: Vec<String> },
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("cron job '{name}' has no next run: its schedule '{schedule}' cannot be computed")]
    NoNextRun { name: String, schedule: String },
    #[error("a cron job with the id {id} already exists")]
    DuplicateId { id: String },
    #[error("cannot store this cron job: {reason}")]
    InvalidJob { reason: RecordError },
    #[error("a cron job's id cannot change ({from} → {to})")]
    IdChanged { from: String, to: String },
    #[error("cannot encode the cron jobs: {0}")]
    Encode(#[from] serde_json::Error),
    /// The batch recording this run was dropped unanswered: its committer panicked mid-write.
    #[error("recording the run failed; see the log")]
    RecordingPanicked,
    /// The failure of a write that recorded several runs at once, shared by each of them.
    #[error(transparent)]
    Shared(Arc<JobStoreError>),
}

/// Why `jobs.json` as a whole cannot be read (one bad record only skips that record).
#[derive(Debug, thiserror::Error)]
pub enum FileShapeError {
    #[error(transparent)]
    Json(serde_json::Error),
    #[error("\"jobs\" is {found}, not a list")]
    JobsNotAList { found: &'static str },
    #[error("expected {{\"jobs\": [...]}}, found {found}")]
    NotAJobsFile { found: &'static str },
}

/// Why [`JobStore::edit`] saved nothing: the caller's own check refused the change (`E`, as
/// the caller typed it), or the store failed.
#[derive(Debug, thiserror::Error)]
pub enum EditError<E> {
    #[error("{0}")]
    Refused(E),
    #[error(transparent)]
    Store(#[from] JobStoreError),
}

impl EditError<JobStoreError> {
    /// For checks that fail only with the store's own errors.
    fn flatten(self) -> JobStoreError {
        match self {
            EditError::Refused(e) | EditError::Store(e) => e,
        }
    }
}

impl JobStore {
    /// The store of the cron folder `dir` (created 0700 at the first write).
    pub fn new(dir: PathBuf) -> JobStore {
        JobStore::with_lock_wait(dir, DEFAULT_LOCK_WAIT)
    }

    /// As [`JobStore::new`], waiting at most `lock_wait` for another process's lock.
    pub fn with_lock_wait(dir: PathBuf, lock_wait: Duration) -> JobStore {
        let folder = Arc::new(FileFolder::new(dir.clone(), LOCK_FILE));
        JobStore::in_folder(dir, folder, lock_wait)
    }

    /// The jobs kept in `folder` (a shared store's), this machine's cron folder being `dir`.
    pub fn in_folder(dir: PathBuf, folder: Arc<dyn Folder>, lock_wait: Duration) -> JobStore {
        JobStore { inner: Arc::new(Inner { dir, folder, lock_wait, endings: Mutex::default() }) }
    }

    /// This machine's cron folder.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Where the jobs are kept: the cron folder, or a shared store's.
    pub fn folder(&self) -> &Arc<dyn Folder> {
        &self.inner.folder
    }

    /// Where `jobs.json` is, for people.
    pub fn jobs_path(&self) -> PathBuf {
        self.inner.folder.locate(JOBS_FILE)
    }

    /// Every job, in file order, and the records that cannot be read. Takes no lock: the file is
    /// only ever replaced whole, so a read sees one version or the next.
    pub fn list(&self) -> Result<Listing, JobStoreError> {
        let file = self.read()?;
        Ok(Listing { jobs: file.jobs(), skipped: file.skipped })
    }

    /// The job `reference` names: its id (exactly; an id wins over a name), else its name (any
    /// case). A name shared by several jobs is refused with their ids.
    pub fn find(&self, reference: &str) -> Result<Job, JobStoreError> {
        let jobs = self.list()?.jobs;
        resolve(&jobs, reference).map(|at| jobs[at].clone())
    }

    /// Locks, loads, applies `f` to the jobs, and saves if `f` changed anything (or the file is
    /// to be rewritten in the current shape). Jobs `f` adds are appended; jobs it removes are
    /// deleted; unreadable records stay where they were.
    pub fn update<R>(&self, f: impl FnOnce(&mut Vec<Job>) -> R) -> Result<R, JobStoreError> {
        let io = |source| JobStoreError::Io { path: self.jobs_path(), source };
        let mut lock = self.inner.folder.lock(LockWait::AtMost(self.inner.lock_wait)).map_err(io)?;
        let mut file = self.parse(lock.read(JOBS_FILE).map_err(io)?)?;
        let before = file.jobs();
        let mut jobs = before.clone();
        let result = f(&mut jobs);
        if jobs != before || file.needs_reshape() {
            file.replace_jobs(jobs);
            lock.write(JOBS_FILE, &file.to_bytes()?).map_err(io)?;
        }
        lock.commit().map_err(io)?;
        Ok(result)
    }

    /// Adds `job` (an empty id is given a fresh one). A job that should run must have its next
    /// run ([`Job::planned`] computes it).
    pub fn create(&self, mut job: Job) -> Result<Job, JobStoreError> {
        if job.id.is_empty() {
            job.id = Job::new_id();
        }
        job::check_id(&job.id).map_err(|reason| JobStoreError::InvalidJob { reason })?;
        if job.is_runnable() && job.next_run_at.is_none() {
            return Err(JobStoreError::NoNextRun { name: job.name, schedule: job.schedule.display });
        }
        self.update(|jobs| {
            if jobs.iter().any(|j| j.id == job.id) {
                return Err(JobStoreError::DuplicateId { id: job.id.clone() });
            }
            jobs.push(job.clone());
            Ok(job)
        })?
    }

    /// Deletes the job `reference` names (see [`JobStore::find`]) and returns it.
    pub fn remove(&self, reference: &str) -> Result<Job, JobStoreError> {
        self.update(|jobs| resolve(jobs, reference).map(|at| jobs.remove(at)))?
    }

    /// Changes the job `reference` names with `f`; nothing is saved when `f` fails, and its error
    /// comes back as [`EditError::Refused`]. The id cannot change.
    pub fn edit<E>(&self, reference: &str, f: impl FnOnce(&mut Job) -> Result<(), E>) -> Result<Job, EditError<E>> {
        self.update(|jobs| {
            let at = resolve(jobs, reference)?;
            let mut draft = jobs[at].clone();
            f(&mut draft).map_err(EditError::Refused)?;
            if draft.id != jobs[at].id {
                return Err(JobStoreError::IdChanged { from: jobs[at].id.clone(), to: draft.id }.into());
            }
            jobs[at] = draft.clone();
            Ok(draft)
        })?
    }

    /// [`JobStore::edit`] for changes that fail only with the store's own errors.
    fn change(&self, reference: &str, f: impl FnOnce(&mut Job) -> Result<(), JobStoreError>) -> Result<Job, JobStoreError> {
        self.edit(reference, f).map_err(EditError::flatten)
    }

    /// Stops the job from running until [`JobStore::resume`]; a run already going finishes.
    pub fn pause(&self, reference: &str, reason: Option<String>, now: DateTime<Utc>) -> Result<Job, JobStoreError> {
        self.change(reference, |job| {
            job.enabled = false;
            job.state = JobState::Paused;
            job.paused_at = Some(Stamp(now.fixed_offset()));
            job.paused_reason = reason;
            Ok(())
        })
    }

    /// Lets the job run again, its next run computed from `now`. A one-shot more than 120 s in
    /// the past is refused: it would never run.
    pub fn resume(&self, reference: &str, now: DateTime<Utc>, zone: Zone) -> Result<Job, JobStoreError> {
        self.change(reference, |job| {
            let next = match &job.schedule.kind {
                ScheduleKind::Once { .. } if job.schedule.is_past(now) => {
                    return Err(ScheduleError::Past { input: job.schedule.display.clone() }.into());
                }
                ScheduleKind::Once { run_at } => run_at.utc(),
                _ => job.schedule.next_after(now, zone).ok_or_else(|| no_next_run(job))?,
            };
            activate(job);
            job.next_run_at = Some(Stamp::in_zone(next, zone));
            Ok(())
        })
    }

    /// Runs the job at the next tick (its next run set to `now`), enabled and unpaused; the
    /// schedule is kept and resumes after that run.
    pub fn trigger_now(&self, reference: &str, now: DateTime<Utc>) -> Result<Job, JobStoreError> {
        self.change(reference, |job| {
            activate(job);
            job.next_run_at = Some(Stamp(now.fixed_offset()));
            Ok(())
        })
    }

    /// Takes every run due at `now`, in one locked write, before any of them starts: each run is
    /// claimed by `owner`, and a recurring job's next run is advanced past `now` (missed runs
    /// after downtime collapse into this one), so a crash mid-run never runs the occurrence again.
    /// A job whose claim is younger than `claim_ttl` is running elsewhere and is left alone.
    pub fn take_due(&self, now: DateTime<Utc>, zone: Zone, owner: &str, claim_ttl: chrono::Duration) -> Result<Due, JobStoreError> {
        self.take_due_checked(now, zone, owner, claim_ttl, &|_| None)
    }

    /// [`JobStore::take_due`], asking `refuse` about each job that fell due before claiming it:
    /// a job it refuses (its owner may no longer have it run) is paused with the reason in the
    /// same write, and not run. The occurrence is not advanced: a resume computes the next run.
    pub fn take_due_checked(
        &self,
        now: DateTime<Utc>,
        zone: Zone,
        owner: &str,
        claim_ttl: chrono::Duration,
        refuse: &dyn Fn(&Job) -> Option<String>,
    ) -> Result<Due, JobStoreError> {
        let scan = DueScan { now, zone, owner, claim_ttl, refuse };
        self.update(|jobs| {
            let mut due = Due::default();
            for job in jobs.iter_mut() {
                match scan.consider(job) {
                    Verdict::Run(run) => due.runs.push(*run),
                    Verdict::Abandoned => due.abandoned.push(job.clone()),
                    Verdict::Refused => due.refused.push(job.clone()),
                    Verdict::Wait => {}
                }
            }
            due.next_run = earliest_next_run(jobs);
            due
        })
    }

    /// Records the end of the run of job `id` scheduled at `occurrence`, if the job's claim is on
    /// that run: the claim is released, the result stored, the run counted; a job whose repeat
    /// count is reached is deleted (as Hermes does), another one-shot is completed, a recurring
    /// job waits for its next run.
    ///
    /// Runs that end while others are being recorded are recorded together (a group commit): one
    /// caller at a time commits, each time everything that ended meanwhile, in one rewrite of the
    /// file, while the others only wait for their answer. A thousand runs ending at once cost a
    /// few rewrites, not a thousand.
    pub fn finish_run(
        &self,
        id: &str,
        occurrence: DateTime<Utc>,
        result: RunResult,
        now: DateTime<Utc>,
        zone: Zone,
    ) -> Result<Finished, JobStoreError> {
        let (reply, answer) = mpsc::channel();
        let ending = RunEnding { id: id.to_string(), occurrence, result, now, zone };
        let commits = {
            let mut queue = self.inner.endings.lock().unwrap_or_else(PoisonError::into_inner);
            queue.waiting.push((ending, reply));
            !std::mem::replace(&mut queue.committing, true)
        };
        if commits {
            self.commit_endings();
        }
        match answer.recv() {
            Ok(recorded) => recorded.map_err(JobStoreError::Shared),
            // The committer's batch was dropped unanswered: it panicked mid-write.
            Err(_) => Err(JobStoreError::RecordingPanicked),
        }
    }

    /// Records the waiting run endings, batch after batch, until none wait.
    fn commit_endings(&self) {
        let committing = Committing(&self.inner.endings);
        loop {
            let batch = {
                let mut queue = self.inner.endings.lock().unwrap_or_else(PoisonError::into_inner);
                if queue.waiting.is_empty() {
                    queue.committing = false;
                    std::mem::forget(committing);
                    return;
                }
                std::mem::take(&mut queue.waiting)
            };
            let recorded = self.update(|jobs| batch.iter().map(|(ending, _)| ending.record(jobs)).collect::<Vec<_>>());
            match recorded {
                Ok(outcomes) => {
                    for ((_, reply), outcome) in batch.into_iter().zip(outcomes) {
                        // A caller that stopped waiting has nothing to be told.
                        let _ = reply.send(Ok(outcome));
                    }
                }
                Err(error) => {
                    let error = Arc::new(error);
                    for (_, reply) in batch {
                        let _ = reply.send(Err(error.clone()));
                    }
                }
            }
        }
    }

    /// Sets (or clears) the job's `last_delivery_error`; false when the job no longer exists.
    pub fn record_delivery_error(&self, id: &str, error: Option<String>) -> Result<bool, JobStoreError> {
        self.update(|jobs| match jobs.iter_mut().find(|j| j.id == id) {
            Some(job) => {
                job.last_delivery_error = error;
                true
            }
            None => false,
        })
    }
}

/// One run's end, waiting to be recorded with the others that end meanwhile.
#[derive(Debug)]
struct RunEnding {
    id: String,
    occurrence: DateTime<Utc>,
    result: RunResult,
    now: DateTime<Utc>,
    zone: Zone,
}

type EndingReply = mpsc::Sender<Result<Finished, Arc<JobStoreError>>>;

/// Run endings waiting to be recorded, and whether a caller is recording them.
#[derive(Debug, Default)]
struct Endings {
    waiting: Vec<(RunEnding, EndingReply)>,
    committing: bool,
}

/// If the committer unwinds, every caller still waiting is answered with an error (their replies
/// are dropped) rather than left waiting, and the next ending commits afresh.
struct Committing<'a>(&'a Mutex<Endings>);

impl Drop for Committing<'_> {
    fn drop(&mut self) {
        let mut queue = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        queue.committing = false;
        queue.waiting.clear();
    }
}

impl RunEnding {
    fn record(&self, jobs: &mut Vec<Job>) -> Finished {
        let Some(at) = jobs.iter().position(|j| j.id == self.id) else { return Finished::Missing };
        let job = &mut jobs[at];
        if !holds_claim_on(job, self.occurrence) {
            tracing::warn!(job_id = %self.id, occurrence = %self.occurrence, "cron run finished without holding the job's claim; not recorded");
            return Finished::NotClaimed;
        }
        record_outcome(job, &self.result, self.now, self.zone);
        if job.repeat.is_exhausted() {
            jobs.remove(at);
            return Finished::Removed;
        }
        if !job.schedule.is_recurring() {
            job.enabled = false;
            job.state = JobState::Completed;
            job.next_run_at = None;
            return Finished::Completed;
        }
        settle_after_run(job, self.now, self.zone)
    }
}

/// The earliest next run among the jobs that may run. Jobs being run are left out: their next
/// run is settled when they finish (which rewrites the file, and so wakes the ticker).
fn earliest_next_run(jobs: &[Job]) -> Option<DateTime<Utc>> {
    jobs.iter().filter(|j| j.is_runnable() && j.run_claim.is_none()).filter_map(|j| j.next_run_at).map(|s| s.utc()).min()
}

/// The index of the job `reference` names: exact id first, then the name in any case.
fn resolve(jobs: &[Job], reference: &str) -> Result<usize, JobStoreError> {
    let not_found = || JobStoreError::NotFound { reference: reference.to_string() };
    let wanted = reference.trim();
    if wanted.is_empty() {
        return Err(not_found());
    }
    if let Some(at) = jobs.iter().position(|j| j.id == wanted) {
        return Ok(at);
    }
    let lowered = wanted.to_lowercase();
    let named: Vec<usize> = jobs.iter().enumerate().filter(|(_, j)| j.name.trim().to_lowercase() == lowered).map(|(at, _)| at).collect();
    match named.as_slice() {
        [] => Err(not_found()),
        [at] => Ok(*at),
        _ => Err(JobStoreError::Ambiguous { reference: wanted.to_string(), ids: named.iter().map(|at| jobs[*at].id.clone()).collect() }),
    }
}

/// Whether the job's claim is on the run scheduled at `occurrence` (one of ours: Hermes' claims
/// name no occurrence, and are never finished here).
fn holds_claim_on(job: &Job, occurrence: DateTime<Utc>) -> bool {
    job.run_claim.as_ref().and_then(|claim| claim.occurrence).is_some_and(|claimed| claimed.utc() == occurrence)
}

/// Enabled and unpaused; `running` while a run holds its claim, else `scheduled`.
fn activate(job: &mut Job) {
    job.enabled = true;
    job.state = if job.run_claim.is_some() { JobState::Running } else { JobState::Scheduled };
    job.paused_at = None;
    job.paused_reason = None;
}

fn no_next_run(job: &Job) -> JobStoreError {
    JobStoreError::NoNextRun { name: job.name.clone(), schedule: job.schedule.display.clone() }
}

fn record_outcome(job: &mut Job, result: &RunResult, now: DateTime<Utc>, zone: Zone) {
    job.run_claim = None;
    job.last_run_at = Some(Stamp::in_zone(now, zone));
    job.last_status = Some(if result.error.is_some() { "error" } else { "ok" }.to_string());
    job.last_error = result.error.clone();
    job.last_delivery_error = result.delivery_error.clone();
    job.repeat.completed = job.repeat.completed.saturating_add(1);
}

/// A recurring job after its run: back to `scheduled` (a pause taken meanwhile stands), and if
/// its next run has come already (a trigger during the run, or a run longer than the period),
/// the next run is taken from `now` rather than started at once.
fn settle_after_run(job: &mut Job, now: DateTime<Utc>, zone: Zone) -> Finished {
    if job.state == JobState::Running {
        job.state = JobState::Scheduled;
    }
    if job.next_run_at.is_none_or(|next| next.utc() <= now) {
        match job.schedule.next_after(now, zone) {
            Some(next) => job.next_run_at = Some(Stamp::in_zone(next, zone)),
            None => mark_unschedulable(job),
        }
    }
    Finished::Scheduled { next_run_at: job.next_run_at.map(|next| next.utc()) }
}

/// A recurring job whose next run cannot be computed stays enabled, in `error`, with the reason:
/// it is never silently disabled (Hermes #16265). Without a next run it is not due, and the
/// ticker does not spin on it.
fn mark_unschedulable(job: &mut Job) {
    let reason = format!("cannot compute the next run of the schedule '{}'", job.schedule.display);
    if job.state != JobState::Error || job.last_error.as_deref() != Some(reason.as_str()) {
        tracing::error!(job_id = %job.id, name = %job.name, "{reason}; the job stays enabled, in error");
        job.state = JobState::Error;
        job.last_error = Some(reason);
    }
    job.next_run_at = None;
}

/// The decisions of one [`JobStore::take_due`].
struct DueScan<'a> {
    now: DateTime<Utc>,
    zone: Zone,
    owner: &'a str,
    claim_ttl: chrono::Duration,
    /// `Some(why)` when the job's owner may no longer have it run.
    refuse: &'a dyn Fn(&Job) -> Option<String>,
}

enum Verdict {
    Run(Box<DueRun>),
    Abandoned,
    /// Paused because its owner may no longer have it run.
    Refused,
    Wait,
}

impl DueScan<'_> {
    fn consider(&self, job: &mut Job) -> Verdict {
        if !job.is_runnable() || self.claim_is_live(job) {
            return Verdict::Wait;
        }
        let Some(next) = job.next_run_at else { return self.recover_next_run(job) };
        if next.utc() > self.now {
            self.release_expired_recurring_claim(job);
            return Verdict::Wait;
        }
        if job.schedule.is_recurring() { self.take_recurring(job, next) } else { self.take_one_shot(job, next) }
    }

    /// The owner may no longer have the job run: paused with the reason (a stale claim left by
    /// an earlier, cut-off run goes with it), for an admin to resume.
    fn pause_for_owner(&self, job: &mut Job, why: String) -> Verdict {
        tracing::warn!(job_id = %job.id, name = %job.name, reason = %why, "cron job not run and paused: its owner may no longer have it run");
        job.enabled = false;
        job.state = JobState::Paused;
        job.paused_at = Some(Stamp::in_zone(self.now, self.zone));
        job.paused_reason = Some(why);
        job.run_claim = None;
        Verdict::Refused
    }

    /// Claimed by a run still going: younger than the TTL, by a process not known to be gone.
    fn claim_is_live(&self, job: &Job) -> bool {
        job.run_claim.as_ref().is_some_and(|claim| claim.is_live(self.now, self.claim_ttl) && !claim.owner_is_gone())
    }

    /// Claimed by a run that is over without having been recorded.
    fn claim_is_dead(&self, job: &Job) -> bool {
        job.run_claim.as_ref().is_some_and(|claim| claim.is_expired(self.now, self.claim_ttl) || claim.owner_is_gone())
    }

    /// A job without a next run (a hand edit, an older writer): a recurring job's is computed from
    /// now; a one-shot is re-armed only within 120 s of its time, else it was missed for good.
    fn recover_next_run(&self, job: &mut Job) -> Verdict {
        let run_at = match &job.schedule.kind {
            ScheduleKind::Once { run_at } => *run_at,
            _ => {
                match job.schedule.first_run(self.now, self.zone) {
                    Some(next) => job.next_run_at = Some(Stamp::in_zone(next, self.zone)),
                    None => mark_unschedulable(job),
                }
                return Verdict::Wait;
            }
        };
        if job.last_run_at.is_none() && self.now - run_at.utc() <= chrono::Duration::seconds(ONE_SHOT_TOLERANCE_SECS) {
            job.next_run_at = Some(run_at);
            return self.consider(job);
        }
        let missed = format!("missed: it was due at {} and no scheduler ran it in time", self.zone.stamp(run_at.utc()));
        tracing::warn!(job_id = %job.id, name = %job.name, "{missed}; the one-shot is disabled");
        job.enabled = false;
        job.state = JobState::Error;
        job.last_status = Some("error".into());
        job.last_error = Some(missed);
        Verdict::Wait
    }

    fn take_recurring(&self, job: &mut Job, occurrence: Stamp) -> Verdict {
        let Some(following) = job.schedule.next_after(self.now, self.zone) else {
            mark_unschedulable(job);
            return Verdict::Wait;
        };
        job.next_run_at = Some(Stamp::in_zone(following, self.zone));
        self.claim(job, occurrence)
    }

    /// A one-shot runs at most once: a claim left on this run by a process that died means it
    /// may have run already, so it is given up and reported rather than run again.
    fn take_one_shot(&self, job: &mut Job, occurrence: Stamp) -> Verdict {
        if job.run_claim.as_ref().is_some_and(|claim| claim.is_for(occurrence.utc())) {
            tracing::warn!(job_id = %job.id, name = %job.name, "a one-shot's run was interrupted; it is not run again");
            job.enabled = false;
            job.state = JobState::Error;
            job.last_status = Some("error".into());
            job.last_error = Some(INTERRUPTED.into());
            job.run_claim = None;
            return Verdict::Abandoned;
        }
        self.claim(job, occurrence)
    }

    /// Claim the occurrence for this process, unless the job's owner may no longer have it run.
    fn claim(&self, job: &mut Job, occurrence: Stamp) -> Verdict {
        if let Some(why) = (self.refuse)(job) {
            return self.pause_for_owner(job, why);
        }
        let claimed_at = Stamp::in_zone(self.now, self.zone);
        job.run_claim = Some(RunClaim { owner: self.owner.to_string(), claimed_at, occurrence: Some(occurrence) });
        job.state = JobState::Running;
        let late = self.now - occurrence.utc() > job.schedule.grace(occurrence.utc(), self.zone);
        Verdict::Run(Box::new(DueRun { job: job.clone(), occurrence: occurrence.utc(), late }))
    }

    /// A recurring job whose run was cut off (its claim expired unrecorded) shows it, instead of
    /// looking `running` until its next run. Its schedule was advanced before the run, so
    /// nothing is run again.
    fn release_expired_recurring_claim(&self, job: &mut Job) {
        if !job.schedule.is_recurring() || !self.claim_is_dead(job) {
            return;
        }
        job.run_claim = None;
        job.state = JobState::Scheduled;
        job.last_status = Some("error".into());
        job.last_error = Some(INTERRUPTED_RECURRING.into());
    }
}

/// `jobs.json` as read: its records in order, the keys beside `jobs`, and its shape.
struct JobsFile {
    records: Vec<Record>,
    others: Map<String, Value>,
    /// Already `{"jobs": [...]}`.
    canonical: bool,
    skipped: Vec<Skipped>,
}

enum Record {
    Job(Box<Job>),
    /// Unreadable; written back exactly as read.
    Kept(Value),
}

impl JobsFile {
    fn empty() -> JobsFile {
        JobsFile { records: Vec::new(), others: Map::new(), canonical: true, skipped: Vec::new() }
    }

    fn parse(records: Vec<Value>, others: Map<String, Value>, canonical: bool) -> JobsFile {
        let mut file = JobsFile { records: Vec::with_capacity(records.len()), others, canonical, skipped: Vec::new() };
        let mut ids = HashSet::with_capacity(records.len());
        for (index, record) in records.into_iter().enumerate() {
            let id = record.get("id").and_then(Value::as_str).map(str::to_string);
            let reason = match Job::from_record(&record) {
                Ok(job) if ids.contains(&job.id) => "another record before it has the same id".to_string(),
                Ok(job) => {
                    ids.insert(job.id.clone());
                    file.records.push(Record::Job(Box::new(job)));
                    continue;
                }
                Err(reason) => reason.to_string(),
            };
            file.skipped.push(Skipped { index, id, reason });
            file.records.push(Record::Kept(record));
        }
        file
    }

    fn jobs_iter(&self) -> impl Iterator<Item = &Job> {
        self.records.iter().filter_map(|r| if let Record::Job(job) = r { Some(job.as_ref()) } else { None })
    }

    fn jobs(&self) -> Vec<Job> {
        self.jobs_iter().cloned().collect()
    }

    /// Hermes rewrites a file in an older shape as soon as it reads it; so do we, at the next
    /// locked operation.
    fn needs_reshape(&self) -> bool {
        !self.canonical && !self.records.is_empty()
    }

    /// Puts `jobs` in place of the file's jobs: each one where the job with its id was, new ones
    /// at the end; unreadable records keep their places.
    fn replace_jobs(&mut self, jobs: Vec<Job>) {
        let mut pending: Vec<Option<Job>> = jobs.into_iter().map(Some).collect();
        let places: HashMap<String, usize> = pending.iter().flatten().enumerate().map(|(at, job)| (job.id.clone(), at)).collect();
        let old = std::mem::take(&mut self.records);
        for record in old {
            match record {
                Record::Job(job) => {
                    let kept = places.get(&job.id).and_then(|at| pending[*at].take());
                    self.records.extend(kept.map(|job| Record::Job(Box::new(job))));
                }
                kept => self.records.push(kept),
            }
        }
        self.records.extend(pending.into_iter().flatten().map(|job| Record::Job(Box::new(job))));
    }

    fn to_bytes(&self) -> Result<Vec<u8>, JobStoreError> {
        let mut records = Vec::with_capacity(self.records.len());
        for record in &self.records {
            records.push(match record {
                Record::Job(job) => job.to_record()?,
                Record::Kept(value) => value.clone(),
            });
        }
        let mut top = self.others.clone();
        top.insert("jobs".into(), Value::Array(records));
        top.insert("updated_at".into(), Value::String(Stamp(Utc::now().fixed_offset()).to_string()));
        let mut bytes = serde_json::to_vec_pretty(&Value::Object(top))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

/// The file from its parsed JSON: `{"jobs": [...]}`, or one of the older shapes Hermes also
/// reads, a bare list and a map of id → record.
fn from_top_level(data: Value) -> Result<JobsFile, FileShapeError> {
    match data {
        Value::Array(records) => Ok(JobsFile::parse(records, Map::new(), false)),
        Value::Object(mut top) => match top.remove("jobs") {
            Some(Value::Array(records)) => Ok(JobsFile::parse(records, top, true)),
            None | Some(Value::Null) => Ok(JobsFile::parse(Vec::new(), top, false)),
            Some(Value::Object(by_id)) => {
                Ok(JobsFile::parse(by_id.into_iter().map(|(id, record)| with_id(record, id)).collect(), top, false))
            }
            Some(other) => Err(FileShapeError::JobsNotAList { found: kind_of(&other) }),
        },
        other => Err(FileShapeError::NotAJobsFile { found: kind_of(&other) }),
    }
}

/// A record of an id-keyed map gets its key as id unless it has one.
fn with_id(mut record: Value, id: String) -> Value {
    if let Value::Object(fields) = &mut record
        && fields.get("id").is_none_or(|v| v.is_null() || v.as_str() == Some(""))
    {
        fields.insert("id".into(), Value::String(id));
    }
    record
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

impl JobStore {
    fn read(&self) -> Result<JobsFile, JobStoreError> {
        let bytes = self.inner.folder.read(JOBS_FILE).map_err(|source| JobStoreError::Io { path: self.jobs_path(), source })?;
        self.parse(bytes)
    }

    /// The file's content as Hermes reads it; none at all is no jobs.
    fn parse(&self, bytes: Option<Vec<u8>>) -> Result<JobsFile, JobStoreError> {
        let Some(bytes) = bytes else { return Ok(JobsFile::empty()) };
        let path = self.jobs_path();
        // Hermes reads with utf-8-sig: a byte-order mark from a Windows editor is not an error.
        let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
        let corrupt = |reason: FileShapeError| JobStoreError::Corrupt { path: path.clone(), reason };
        let data: Value = serde_json::from_slice(text).map_err(|e| corrupt(FileShapeError::Json(e)))?;
        let file = from_top_level(data).map_err(corrupt)?;
        for skipped in &file.skipped {
            tracing::warn!(file = %path.display(), index = skipped.index, id = ?skipped.id, reason = %skipped.reason, "skipping a cron job record that cannot be read; it is kept in the file as it is");
        }
        Ok(file)
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
