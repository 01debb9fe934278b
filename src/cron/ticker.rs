//! The ticker: one tick takes the cron folder's tick lock without waiting (`cron/.tick.lock`, or
//! in a shared store a PostgreSQL advisory lock; another process or replica holding it means
//! this tick does nothing), takes the due jobs from the store (recurring ones already
//! advanced, every one claimed, all saved before anything runs) and hands them to the runner,
//! at most `cron.max_parallel_jobs` at once and never the same job twice at once.
//!
//! Inside the gateway [`Ticker::run`] ticks at every minute boundary and earlier when a job is
//! due sooner, when it is woken (a job was created or changed), when `jobs.json` changed on disk
//! (`hermes cron run` makes a job due there) or when another process asked for a tick by touching
//! [`WAKE_FILE`] (`hermes cron tick` beside a running gateway hands its tick over that way); it
//! writes a heartbeat each round and a success marker after each clean tick, which
//! `hermes cron status` reads. [`supervise`] restarts it after a panic, visibly.
//!
//! Before a due job is claimed its owner is asked about ([`super::owner`]): a job whose owner may
//! no longer have it run is paused with the reason instead.

use super::owner::{EveryOwner, OwnerCheck};
use super::run::JobRunner;
use super::status::{Markers, TickerHealth};
use super::store::{Due, JOBS_FILE, JobStore, JobStoreError};
use crate::store::folders::{Folder, Held, LockWait, Revision};
use chrono::{DateTime, Timelike, Utc};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How often the ticker looks at `jobs.json`'s and the wake file's revisions between ticks.
const FILE_POLL: Duration = Duration::from_secs(2);

/// The file in the cron folder another process touches to have the running ticker tick now.
pub const WAKE_FILE: &str = "tick_request";

/// The tick lock's name in the cron folder.
const TICK_LOCK: &str = ".tick.lock";

/// Ask the ticker running on `folder` (in another process or replica) to tick now: its next
/// look at the folder, within [`FILE_POLL`], sees the wake file changed.
pub fn request_tick(folder: &dyn Folder) -> std::io::Result<()> {
    let stamp = format!("{} {}\n", Utc::now().to_rfc3339(), std::process::id());
    let mut lock = folder.lock(LockWait::Forever)?;
    lock.write(WAKE_FILE, stamp.as_bytes())?;
    lock.commit()
}

/// Why a tick failed.
#[derive(Debug, thiserror::Error)]
pub enum TickError {
    #[error("cannot open the tick lock {}: {source}", path.display())]
    Lock { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Store(#[from] JobStoreError),
    #[error("the tick's worker stopped: {0}")]
    Worker(String),
}

/// What one tick did.
#[derive(Debug, Default)]
pub struct TickReport {
    /// Another process held the tick lock: nothing was looked at.
    pub skipped: bool,
    /// Occurrences handed to the runner.
    pub started: usize,
    /// The earliest next run left after this tick.
    pub next_run: Option<DateTime<Utc>>,
}

/// The exclusive tick lock, held while due jobs are taken (released when dropped).
pub struct TickLock {
    _held: Held,
}

impl TickLock {
    /// `None` when another process or replica (or another tick of this one) holds it.
    pub fn try_acquire(folder: &dyn Folder) -> Result<Option<TickLock>, TickError> {
        let held = folder.try_hold(TICK_LOCK).map_err(|source| TickError::Lock { path: folder.locate(TICK_LOCK), source })?;
        Ok(held.map(|held| TickLock { _held: held }))
    }
}

/// What the ticker works with.
pub struct TickerParts {
    pub store: JobStore,
    pub runner: Arc<JobRunner>,
    /// `cron.max_parallel_jobs`; `None` = no limit.
    pub max_parallel: Option<usize>,
    /// Names this process in run claims.
    pub owner: String,
    /// A claim younger than this means the job is running somewhere.
    pub claim_ttl: chrono::Duration,
    /// Notified when a job was created, changed or asked to run now (see [`super::manage`]).
    pub wake: Arc<Notify>,
}

pub struct Ticker {
    parts: TickerParts,
    slots: Option<Arc<Semaphore>>,
    running: Arc<Mutex<HashSet<String>>>,
    runs: tokio::sync::Mutex<JoinSet<()>>,
    pub health: Arc<TickerHealth>,
    markers: Markers,
    /// Asked before each due job is claimed.
    owners: Arc<dyn OwnerCheck>,
}

impl Ticker {
    /// A ticker that runs every due job, whoever owns it.
    pub fn new(parts: TickerParts) -> Arc<Ticker> {
        Ticker::with_owner_check(parts, Arc::new(EveryOwner))
    }

    /// A ticker that asks `owners` about each due job and pauses those it refuses.
    pub fn with_owner_check(parts: TickerParts, owners: Arc<dyn OwnerCheck>) -> Arc<Ticker> {
        let slots = parts.max_parallel.map(|n| Arc::new(Semaphore::new(n.max(1))));
        let markers = Markers::new(parts.store.dir());
        Arc::new(Ticker {
            parts,
            slots,
            running: Arc::default(),
            runs: tokio::sync::Mutex::new(JoinSet::new()),
            health: Arc::new(TickerHealth::default()),
            markers,
            owners,
        })
    }

    /// One tick at `now`: take the lock, take the due jobs, start their runs in the background.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<TickReport, TickError> {
        let folder = self.parts.store.folder().clone();
        let lock = tokio::task::spawn_blocking(move || TickLock::try_acquire(folder.as_ref()))
            .await
            .map_err(|e| TickError::Worker(e.to_string()))??;
        let Some(lock) = lock else {
            tracing::info!("cron tick skipped: another process holds the tick lock");
            return Ok(TickReport { skipped: true, ..TickReport::default() });
        };
        let (store, owner, ttl, zone) =
            (self.parts.store.clone(), self.parts.owner.clone(), self.parts.claim_ttl, self.parts.runner.settings().zone);
        let owners = self.owners.clone();
        let due = tokio::task::spawn_blocking(move || store.take_due_checked(now, zone, &owner, ttl, &|job| owners.refusal(job)))
            .await
            .map_err(|e| TickError::Worker(e.to_string()))??;
        drop(lock);
        let next_run = due.next_run;
        Ok(TickReport { skipped: false, started: self.start(due).await, next_run })
    }

    /// Wait for every run this ticker started; false when some are still going after `timeout`.
    pub async fn finish_runs(&self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.wait_for_runs()).await.is_ok()
    }

    /// Wait for every run this ticker started, however long they take (each is bounded by its
    /// own timeouts).
    pub async fn wait_for_runs(&self) {
        let mut runs = self.runs.lock().await;
        while runs.join_next().await.is_some() {}
    }

    async fn start(&self, due: Due) -> usize {
        let mut runs = self.runs.lock().await;
        while runs.try_join_next().is_some() {}
        for job in due.abandoned {
            let runner = self.parts.runner.clone();
            runs.spawn(async move { runner.report_abandoned(&job).await });
        }
        let mut started = 0;
        for run in due.runs {
            let Some(guard) = RunningGuard::enter(&self.running, &run.job.id) else {
                tracing::warn!(job_id = %run.job.id, "cron job is still running here; this occurrence is skipped");
                continue;
            };
            let (runner, slots, health) = (self.parts.runner.clone(), self.slots.clone(), self.health.clone());
            runs.spawn(async move {
                let _slot = match slots {
                    Some(s) => s.acquire_owned().await.ok(),
                    None => None,
                };
                let _guard = guard;
                health.run_started();
                runner.run(run).await;
                health.run_ended();
            });
            started += 1;
        }
        started
    }

    /// Tick until `stop`: at each minute boundary, when a job falls due, when woken, or when
    /// `jobs.json` changed. Tick failures are recorded and the loop goes on.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let watched = Watched { folder: self.parts.store.folder().clone() };
        let mut seen = watched.versions().await;
        while !stop.is_cancelled() {
            self.markers.heartbeat(Utc::now());
            let next_run = match self.tick(Utc::now()).await {
                Ok(report) => {
                    self.markers.success(Utc::now());
                    self.health.ticked(report.started);
                    report.next_run
                }
                Err(e) => {
                    tracing::error!(error = %e, "cron tick failed; the next tick tries again");
                    self.markers.failure(Utc::now(), &e.to_string());
                    self.health.failed(e.to_string());
                    None
                }
            };
            seen = self.sleep_until(next_wake(Utc::now(), next_run), &watched, seen, &stop).await;
        }
    }

    /// Sleep until `until`, a wake, a change of a watched file or `stop`; returns the files'
    /// versions last seen.
    async fn sleep_until(&self, until: DateTime<Utc>, watched: &Watched, mut seen: Versions, stop: &CancellationToken) -> Versions {
        loop {
            let left = (until - Utc::now()).to_std().unwrap_or(Duration::ZERO);
            if left.is_zero() {
                return seen;
            }
            tokio::select! {
                _ = stop.cancelled() => return seen,
                _ = self.parts.wake.notified() => return watched.versions().await,
                _ = tokio::time::sleep(left.min(FILE_POLL)) => {
                    let now_seen = watched.versions().await;
                    if now_seen != seen {
                        return now_seen;
                    }
                    seen = now_seen;
                }
            }
        }
    }
}

/// The documents whose change wakes the ticker: `jobs.json` (a job made due or changed by
/// another process) and [`WAKE_FILE`] (a tick asked for).
struct Watched {
    folder: Arc<dyn Folder>,
}

/// Their revisions as last seen.
type Versions = [Option<Revision>; 2];

impl Watched {
    /// A document that cannot be looked at counts as unchanged (the minute tick still comes).
    async fn versions(&self) -> Versions {
        let folder = self.folder.clone();
        let look = move || [JOBS_FILE, WAKE_FILE].map(|name| folder.revision(name).ok().flatten());
        tokio::task::spawn_blocking(look).await.unwrap_or([None, None])
    }
}

/// The next minute boundary, or the earliest next run when it comes sooner.
fn next_wake(now: DateTime<Utc>, next_run: Option<DateTime<Utc>>) -> DateTime<Utc> {
    let minute = next_minute(now);
    next_run.filter(|at| *at < minute).map(|at| at.max(now)).unwrap_or(minute)
}

/// The start of the next minute (ticks are aligned to the minute, as cron's are).
pub fn next_minute(now: DateTime<Utc>) -> DateTime<Utc> {
    let start = now.with_second(0).and_then(|t| t.with_nanosecond(0)).unwrap_or(now);
    start + chrono::Duration::minutes(1)
}

/// Marks a job as running in this process until dropped.
struct RunningGuard {
    set: Arc<Mutex<HashSet<String>>>,
    id: String,
}

impl RunningGuard {
    fn enter(set: &Arc<Mutex<HashSet<String>>>, id: &str) -> Option<RunningGuard> {
        let mut ids = set.lock().unwrap_or_else(|p| p.into_inner());
        ids.insert(id.to_string()).then(|| RunningGuard { set: set.clone(), id: id.to_string() })
    }
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.set.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}

/// Run the ticker until `stop`, restarting it (after a growing pause, at most a minute) when it
/// panics; each restart is counted in its health and logged.
pub async fn supervise(ticker: Arc<Ticker>, stop: CancellationToken) {
    supervise_with(ticker.health.clone(), stop.clone(), move || ticker.clone().run(stop.clone())).await
}

async fn supervise_with<F, Fut>(health: Arc<TickerHealth>, stop: CancellationToken, start: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut pause = Duration::from_secs(1);
    while !stop.is_cancelled() {
        match tokio::spawn(start()).await {
            Ok(()) => return,
            Err(e) => {
                let why = if e.is_panic() { "the cron ticker panicked" } else { "the cron ticker was cancelled" };
                tracing::error!(error = %e, "{why}; restarting it in {} s", pause.as_secs());
                health.restarted(why);
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(Duration::from_secs(60));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn the_tick_lock_is_exclusive_across_open_files() {
        let dir = tempfile::tempdir().unwrap();
        let folder = crate::store::folders::FileFolder::new(dir.path().to_path_buf(), super::super::store::LOCK_FILE);
        let held = TickLock::try_acquire(&folder).unwrap().expect("free at first");
        assert!(TickLock::try_acquire(&folder).unwrap().is_none(), "a second holder is refused at once");
        drop(held);
        assert!(TickLock::try_acquire(&folder).unwrap().is_some(), "free again once released");
    }

    #[test]
    fn ticks_align_to_the_minute() {
        let t = DateTime::parse_from_rfc3339("2026-11-25T10:15:42.5Z").unwrap().with_timezone(&Utc);
        assert_eq!(next_minute(t).to_rfc3339(), "2026-11-25T10:16:00+00:00");
    }

    #[tokio::test]
    async fn a_panicking_ticker_is_restarted_and_the_restart_shows() {
        let health = Arc::new(TickerHealth::default());
        let starts = Arc::new(AtomicU32::new(0));
        let stop = CancellationToken::new();
        let counter = starts.clone();
        supervise_with(health.clone(), stop, move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    panic!("boom");
                }
            }
        })
        .await;
        assert_eq!(starts.load(Ordering::SeqCst), 2, "started again after the panic");
        let snapshot = health.snapshot();
        assert_eq!(snapshot.restarts, 1);
        assert!(snapshot.last_error.unwrap().contains("panicked"));
    }
}
