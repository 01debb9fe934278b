//! Cron benchmark: what one tick costs with 10,000 jobs in `jobs.json`, 1,000 of them due —
//! the locked read-modify-write that claims the due runs and advances their schedules before
//! anything runs (`JobStore::take_due`), the whole tick as the ticker does it (the tick lock, the
//! claim, handing the runs out), and the 1,000 runs recorded afterwards (each `finish_run` is
//! another locked rewrite of the file), with a host whose agent answers `[SILENT]` at once so
//! only the scheduler's own cost is measured.
//!
//! Run with `cargo bench --bench cron`. It prints numbers; it asserts nothing.

use async_trait::async_trait;
use chrono::{DateTime, Duration as Span, Utc};
use hermes::cron::delivery::{Homes, Occurrence};
use hermes::cron::job::{Job, RunClaim};
use hermes::cron::run::{AgentRun, AgentRunError, CronHost, JobRunner, RunSettings, Sent};
use hermes::cron::schedule::{Schedule, ScheduleKind, Zone};
use hermes::cron::store::JobStore;
use hermes::cron::ticker::{Ticker, TickerParts};
use hermes_adapter::ChatTarget;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

const JOBS: usize = 10_000;
const DUE: usize = 1_000;
const ROUNDS: usize = 7;

/// Answers every run with silence, at once: nothing is delivered, only the scheduler works.
struct SilentHost;

#[async_trait]
impl CronHost for SilentHost {
    async fn run_agent(&self, _run: AgentRun) -> Result<String, AgentRunError> {
        Ok("[SILENT]".into())
    }
    async fn deliver(&self, _target: &ChatTarget, _text: &str, _occurrence: &Occurrence) -> Sent {
        Sent::Delivered
    }
    fn homes(&self) -> Homes {
        Homes::new()
    }
}

fn hourly() -> Schedule {
    Schedule { kind: ScheduleKind::Interval { minutes: 60 }, display: "every 60m".into() }
}

/// 10,000 hourly jobs; the first 1,000 were created two hours ago (due an hour ago), the rest
/// just now (due in an hour).
fn seed(store: &JobStore, now: DateTime<Utc>) {
    let zone = Zone::Named(chrono_tz::UTC);
    let jobs: Vec<Job> = (0..JOBS)
        .map(|n| {
            let created = if n < DUE { now - Span::hours(2) } else { now };
            let prompt = format!("Summarise the notifications of repository number {n} and list what needs me today");
            Job::planned(&format!("job {n}"), &prompt, hourly(), created, zone).expect("a valid job")
        })
        .collect();
    store.update(|all| all.extend(jobs)).expect("seed the jobs file");
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let cron_dir = dir.path().join("cron");
    let store = JobStore::new(cron_dir.clone());
    let now = Utc::now();
    seed(&store, now);
    let jobs_file = store.jobs_path();
    let pristine = std::fs::read(&jobs_file).expect("the seeded file");
    let restore = || std::fs::write(&jobs_file, &pristine).expect("restore the jobs file");
    println!("jobs.json: {JOBS} jobs, {DUE} due, {:.1} MB", pristine.len() as f64 / 1e6);

    let mut list = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let listing = store.list().expect("list");
        assert_eq!(listing.jobs.len(), JOBS);
        list.push(started.elapsed());
    }
    println!("read and parse the file (list):          {:>9}", ms(median(list)));

    let zone = Zone::Named(chrono_tz::UTC);
    let owner = RunClaim::owner_for_this_process();
    let mut take = Vec::new();
    for _ in 0..ROUNDS {
        restore();
        let started = Instant::now();
        let due = store.take_due(now, zone, &owner, Span::hours(1)).expect("take_due");
        take.push(started.elapsed());
        assert_eq!(due.runs.len(), DUE);
    }
    println!("claim and advance the due jobs (take_due): {:>9}", ms(median(take)));

    let (tick, finish) = runtime.block_on(whole_ticks(&cron_dir, &restore, now));
    println!("whole tick: lock, claim, hand out {DUE} runs: {:>9}", ms(tick));
    println!(
        "then {DUE} silent runs recorded (finish_run): {:>9} ({:.2} ms a run)",
        ms(finish),
        finish.as_secs_f64() * 1000.0 / DUE as f64
    );
}

/// The ticker's own tick, timed to the hand-out and to the last run recorded.
async fn whole_ticks(cron_dir: &Path, restore: &dyn Fn(), now: DateTime<Utc>) -> (Duration, Duration) {
    let (mut ticks, mut finishes) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        restore();
        let store = JobStore::new(cron_dir.to_path_buf());
        let settings = RunSettings {
            cron_dir: cron_dir.to_path_buf(),
            skills_dir: cron_dir.join("skills"),
            scripts_dir: cron_dir.join("scripts"),
            zone: Zone::Named(chrono_tz::UTC),
            wrap: true,
            retention: 50,
            agent_timeout: Duration::from_secs(60),
            script_timeout: Duration::from_secs(60),
            hidden_env: Vec::new(),
        };
        let runner = Arc::new(JobRunner::new(store.clone(), Arc::new(SilentHost), Arc::new(settings)));
        let ticker = Ticker::new(TickerParts {
            store,
            runner,
            max_parallel: None,
            owner: RunClaim::owner_for_this_process(),
            claim_ttl: Span::hours(1),
            wake: Arc::new(Notify::new()),
        });
        let started = Instant::now();
        let report = ticker.tick(now).await.expect("tick");
        ticks.push(started.elapsed());
        assert_eq!(report.started, DUE);
        ticker.finish_runs(Duration::from_secs(600)).await;
        finishes.push(started.elapsed());
    }
    (median(ticks), median(finishes))
}
