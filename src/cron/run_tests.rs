//! Runs through the ticker against a host that records what reaches it: how many run at once,
//! what a script-only job delivers, what a run asks the agent with, and a delivery that fails.

use super::*;
use crate::cron::job::Job;
use crate::cron::schedule::{Schedule, ScheduleKind};
use crate::cron::store::JobStore;
use crate::cron::ticker::{Ticker, TickerParts};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Notify;

const UTC: Zone = Zone::Named(chrono_tz::UTC);

/// Answers after `think`, counting how many answers are being worked on at once.
#[derive(Default)]
struct RecordingHost {
    think: Duration,
    busy: AtomicUsize,
    most_busy: AtomicUsize,
    asked: Mutex<Vec<AgentRun>>,
    delivered: Mutex<Vec<(String, String)>>,
    refuse_delivery: bool,
}

#[async_trait]
impl CronHost for RecordingHost {
    async fn run_agent(&self, run: AgentRun) -> Result<String, AgentRunError> {
        let now_busy = self.busy.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_busy.fetch_max(now_busy, Ordering::SeqCst);
        tokio::time::sleep(self.think).await;
        self.busy.fetch_sub(1, Ordering::SeqCst);
        let answer = format!("answer to {}", run.job_id);
        self.asked.lock().unwrap().push(run);
        Ok(answer)
    }

    async fn deliver(&self, target: &ChatTarget, text: &str, _occurrence: &Occurrence) -> Sent {
        if self.refuse_delivery {
            return Sent::Failed("chat not found".into());
        }
        self.delivered.lock().unwrap().push((format!("{}:{}", target.platform, target.chat_id), text.to_string()));
        Sent::Delivered
    }

    fn homes(&self) -> Homes {
        Homes::from([("telegram".to_string(), ChatTarget::parse("telegram:-100").unwrap())])
    }
}

struct Bench {
    home: tempfile::TempDir,
    store: JobStore,
    host: Arc<RecordingHost>,
    ticker: Arc<Ticker>,
}

fn bench(host: RecordingHost, max_parallel: Option<usize>) -> Bench {
    let home = tempfile::tempdir().unwrap();
    let cron_dir = home.path().join("cron");
    std::fs::create_dir_all(home.path().join("scripts")).unwrap();
    let store = JobStore::new(cron_dir.clone());
    let host = Arc::new(host);
    let settings = RunSettings {
        cron_dir,
        skills_dir: home.path().join("skills"),
        scripts_dir: home.path().join("scripts"),
        zone: UTC,
        wrap: true,
        retention: 5,
        agent_timeout: Duration::from_secs(30),
        script_timeout: Duration::from_secs(30),
        hidden_env: Vec::new(),
    };
    let runner = Arc::new(JobRunner::new(store.clone(), host.clone(), Arc::new(settings)));
    let ticker = Ticker::new(TickerParts {
        store: store.clone(),
        runner,
        max_parallel,
        owner: "test-host:1:feed".into(),
        claim_ttl: chrono::Duration::hours(1),
        wake: Arc::new(Notify::new()),
    });
    Bench { home, store, host, ticker }
}

/// An hourly job, due now.
fn due_job(store: &JobStore, name: &str, change: impl FnOnce(&mut Job)) -> Job {
    let schedule = Schedule { kind: ScheduleKind::Interval { minutes: 60 }, display: "every 60m".into() };
    let mut job = Job::planned(name, "do it", schedule, Utc::now() - chrono::Duration::minutes(61), UTC).unwrap();
    job.deliver = "telegram".into();
    change(&mut job);
    store.create(job).unwrap()
}

async fn tick_and_wait(bench: &Bench) -> usize {
    let started = bench.ticker.tick(Utc::now()).await.unwrap().started;
    bench.ticker.wait_for_runs().await;
    started
}

#[tokio::test]
async fn no_more_than_max_parallel_jobs_run_at_once() {
    for (limit, expected) in [(Some(1), 1), (Some(2), 2), (None, 4)] {
        let b = bench(RecordingHost { think: Duration::from_millis(150), ..RecordingHost::default() }, limit);
        for n in 0..4 {
            due_job(&b.store, &format!("job {n}"), |_| {});
        }
        assert_eq!(tick_and_wait(&b).await, 4);
        assert_eq!(b.host.most_busy.load(Ordering::SeqCst), expected, "max_parallel_jobs {limit:?}");
        assert_eq!(b.host.delivered.lock().unwrap().len(), 4, "every run still ran");
    }
}

#[tokio::test]
async fn a_run_asks_with_the_jobs_own_model_toolsets_and_a_session_per_occurrence() {
    let b = bench(RecordingHost::default(), None);
    let job = due_job(&b.store, "digest", |j| {
        j.model = Some("star-model".into());
        j.enabled_toolsets = Some(vec!["file".into()]);
        j.origin = Some(crate::cron::job::Origin { user_id: Some("42".into()), ..crate::cron::job::Origin::new("telegram", "7", None) });
    });
    tick_and_wait(&b).await;
    let asked = b.host.asked.lock().unwrap();
    let run = &asked[0];
    assert_eq!(
        (run.model.as_deref(), run.toolsets.clone(), run.user_id.as_deref()),
        (Some("star-model"), Some(vec!["file".to_string()]), Some("42"))
    );
    assert!(
        run.session_key.starts_with(&format!("cron_{}_", job.id))
            && run.session_key.len() == format!("cron_{}_YYYYMMDD_HHMMSS", job.id).len()
    );
    assert!(run.prompt.starts_with(super::super::prompt::CRON_INSTRUCTION) && run.prompt.ends_with("do it"));
    let delivered = b.host.delivered.lock().unwrap();
    assert_eq!(delivered[0].0, "telegram:-100", "to the platform's home channel");
    assert!(delivered[0].1.starts_with("Cronjob Response: digest\n") && delivered[0].1.contains(&format!("answer to {}", job.id)));
}

#[tokio::test]
async fn a_script_only_job_delivers_its_output_and_stays_silent_without_one() {
    let b = bench(RecordingHost::default(), None);
    let scripts = b.home.path().join("scripts");
    std::fs::write(scripts.join("report.sh"), "echo disk at 91%").unwrap();
    std::fs::write(scripts.join("quiet.sh"), "true").unwrap();
    for (name, script) in [("disk", "report.sh"), ("quiet", "quiet.sh")] {
        due_job(&b.store, name, |j| {
            j.no_agent = true;
            j.script = Some(script.into());
        });
    }
    tick_and_wait(&b).await;
    assert!(b.host.asked.lock().unwrap().is_empty(), "no agent was asked");
    let delivered = b.host.delivered.lock().unwrap();
    assert_eq!(delivered.len(), 1, "an empty output is silent: {delivered:?}");
    assert!(delivered[0].1.contains("disk at 91%"));
    let quiet = b.store.find("quiet").unwrap();
    let outputs = std::fs::read_dir(super::super::output::job_dir(&b.home.path().join("cron"), &quiet.id)).unwrap().count();
    assert_eq!((quiet.last_status.as_deref(), outputs), (Some("ok"), 1), "the silent run is recorded and its output kept");
}

#[tokio::test]
async fn a_failed_delivery_is_recorded_and_the_run_still_counts() {
    let b = bench(RecordingHost { refuse_delivery: true, ..RecordingHost::default() }, None);
    due_job(&b.store, "digest", |_| {});
    tick_and_wait(&b).await;
    let job = b.store.find("digest").unwrap();
    assert_eq!((job.last_status.as_deref(), job.repeat.completed), (Some("ok"), 1));
    let error = job.last_delivery_error.unwrap_or_default();
    assert!(error.contains("telegram:-100") && error.contains("chat not found"), "{error}");
}

#[test]
fn a_failed_run_is_worded_as_before_the_errors_were_typed() {
    let cases = [
        (RunError::NothingToRun, "the job runs no agent and has no script"),
        (RunError::EmptyAnswer, "the agent gave an empty answer"),
        (AgentRunError::AgentStopped.into(), "the agent stopped unexpectedly"),
        (AgentRunError::TimedOut { secs: 600 }.into(), "the run did not finish within 600 s (cron.timeout) and was stopped"),
        (AgentRunError::SessionNotStored("disk full".into()).into(), "cannot store the run's session: disk full"),
        (AgentRunError::TurnFailed("the provider said no".into()).into(), "the provider said no"),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
}
