//! The cron parts of the gateway, built once: the jobs ([`CronJobs`], shared by `/cron`, the
//! `cronjob` tool and the ticker's wake-up), the home channels, the host of scheduled runs and
//! the [`Ticker`]; started beside the adapters (supervised), stopped at shutdown after the runs
//! in flight had their time to deliver. Both the jobs and the ticker judge owners through one
//! [`super::owner::OwnerGate`]: a job runs only while its owner may.

use crate::config::{Config, Home};
use crate::cron::manage::CronJobs;
use crate::cron::run::{JobRunner, RunSettings};
use crate::cron::schedule::Zone;
use crate::cron::status::TickerHealth;
use crate::cron::ticker::{self, Ticker, TickerParts};
use crate::gateway::cron::host::GatewayCronHost;
use crate::gateway::delivery::home_channels::HomeChannels;
use crate::gateway::folders::Folders;
use crate::gateway::turn::TurnHandles;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long runs in flight may go on after shutdown began (Hermes drains its ticker for 65 s).
const RUNS_DRAIN: Duration = Duration::from_secs(65);

/// The configured zone; an invalid one was refused when the configuration loaded.
pub(crate) fn zone(config: &Config) -> Zone {
    Zone::from_config(config.timezone.as_deref()).unwrap_or(Zone::Local)
}

/// The jobs in `folders`, with a fresh wake-up for the ticker and their owners judged by this
/// configuration and the pairing approvals there.
pub(crate) fn jobs(config: &Config, home: &Home, folders: &Folders) -> CronJobs {
    CronJobs::new(folders.jobs(), zone(config), home.scripts_dir(), home.skills_dir(), Arc::new(Notify::new()))
        .with_owner_check(Arc::new(super::owner::OwnerGate::new(config, folders)))
}

/// What `/cron`, `/sethome` and `/status` use.
#[derive(Clone)]
pub(crate) struct CronCommandHandles {
    pub jobs: CronJobs,
    pub homes: HomeChannels,
    pub ticker: Arc<TickerHealth>,
    /// `.env`, where `/sethome` writes `<PLATFORM>_HOME_CHANNEL`.
    pub env_file: PathBuf,
}

pub(crate) struct CronParts {
    pub jobs: CronJobs,
    pub homes: HomeChannels,
    pub ticker: Arc<Ticker>,
    /// Stops the ticking.
    ticker_stop: CancellationToken,
    /// Interrupts the runs still going when the drain is over.
    runs_stop: CancellationToken,
}

impl CronParts {
    pub(crate) fn build(
        config: &Config,
        home: &Home,
        turns: &TurnHandles,
        jobs: CronJobs,
        homes: HomeChannels,
        runs_stop: CancellationToken,
    ) -> Self {
        let host = GatewayCronHost::new(turns, homes.clone(), runs_stop.clone());
        let settings = run_settings(config, home, turns);
        let claim_ttl = claim_ttl(&settings);
        let runner = Arc::new(JobRunner::new(jobs.store().clone(), Arc::new(host), Arc::new(settings)));
        let parts = TickerParts {
            store: jobs.store().clone(),
            runner,
            max_parallel: config.cron.max_parallel_jobs,
            owner: crate::cron::job::RunClaim::owner_for_this_process(),
            claim_ttl,
            wake: jobs.wake_handle(),
        };
        let ticker = Ticker::with_owner_check(parts, jobs.owner_check());
        Self { jobs, homes, ticker, ticker_stop: CancellationToken::new(), runs_stop }
    }

    pub(crate) fn commands(&self, env_file: PathBuf) -> CronCommandHandles {
        CronCommandHandles { jobs: self.jobs.clone(), homes: self.homes.clone(), ticker: self.ticker.health.clone(), env_file }
    }

    /// Start the supervised ticker.
    pub(crate) fn start(&self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(ticker::supervise(self.ticker.clone(), self.ticker_stop.clone()))
    }

    /// Stop ticking, let the runs in flight finish (up to 65 s), then interrupt the rest: a
    /// recurring job's next occurrence runs as usual, a cut-off one-shot is reported later.
    pub(crate) async fn stop(&self, ticking: tokio::task::JoinHandle<()>) {
        self.ticker_stop.cancel();
        if tokio::time::timeout(Duration::from_secs(5), ticking).await.is_err() {
            tracing::warn!("the cron ticker did not stop within 5 s");
        }
        if !self.ticker.finish_runs(RUNS_DRAIN).await {
            tracing::warn!("cron runs still going after {} s are interrupted", RUNS_DRAIN.as_secs());
            self.runs_stop.cancel();
            self.ticker.finish_runs(Duration::from_secs(5)).await;
        }
    }
}

fn run_settings(config: &Config, home: &Home, turns: &TurnHandles) -> RunSettings {
    RunSettings {
        cron_dir: home.cron_dir(),
        skills_dir: home.skills_dir(),
        scripts_dir: home.scripts_dir(),
        zone: zone(config),
        wrap: config.cron.wrap_response,
        retention: config.cron.output_retention.max(1),
        agent_timeout: Duration::from_secs(config.cron.timeout),
        script_timeout: Duration::from_secs(config.cron.script_timeout_seconds.max(1)),
        hidden_env: turns.tools.settings.secret_env_names.clone(),
    }
}

/// How long a run's claim keeps others off the job: its longest possible run, plus a margin.
/// (A claim whose process is gone on this machine stops counting at once; see the store.)
fn claim_ttl(settings: &RunSettings) -> chrono::Duration {
    let agent = if settings.agent_timeout.is_zero() { Duration::from_secs(24 * 3600) } else { settings.agent_timeout };
    let longest = agent + settings.script_timeout + Duration::from_secs(300);
    chrono::Duration::from_std(longest).unwrap_or(chrono::Duration::hours(24))
}
