//! One run of one job, start to end: the script and/or a fresh agent turn (through the
//! [`CronHost`] the gateway or the CLI hands in), the output file, delivery of the wrapped
//! answer or of the failure, and the job record updated (`last_*`, `repeat`, next run).
//!
//! The host is the only way out: this module knows no adapter, session store or agent turn,
//! so the same run works inside the gateway and from `hermes cron tick`.

use super::delivery::{self, Homes, Occurrence};
use super::job::Job;
use super::output::{self, Outcome};
use super::prompt::PromptError;
use super::schedule::Zone;
use super::script::{self, ScriptError, ScriptRun};
use super::store::{DueRun, JobStore, RunResult};
use crate::agent::fence::Fence;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use hermes_adapter::ChatTarget;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A scheduled agent turn, as the host runs it.
pub struct AgentRun {
    pub job_id: String,
    /// `cron_<job>_<YYYYMMDD_HHMMSS>`: one session per occurrence.
    pub session_key: String,
    /// "<name> · <Mon DD HH:MM>", the stored session's title.
    pub title: String,
    pub prompt: String,
    /// Marks the parts of `prompt` that came from outside (script output, other jobs' output).
    pub fence: Fence,
    pub model: Option<String>,
    pub provider: Option<String>,
    /// The job's toolsets; `None` = the `cron` platform's.
    pub toolsets: Option<Vec<String>>,
    /// The user who created the job, if a chat user did.
    pub user_id: Option<String>,
    pub timeout: Duration,
}

/// What became of one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    Delivered,
    /// The platform is not accepting messages now; the outbox keeps trying (and lists it as
    /// undelivered if its retry window ends).
    Queued,
    /// The platform may have it; it is not sent again.
    InDoubt,
    Failed(String),
}

/// A cause the host reports from its own layers (the session store, the provider).
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why the host's agent turn gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum AgentRunError {
    #[error("cannot store the run's session: {0}")]
    SessionNotStored(Cause),
    #[error("the agent stopped unexpectedly")]
    AgentStopped,
    /// The turn failed; the cause (the provider's error) is the whole message.
    #[error(transparent)]
    TurnFailed(Cause),
    #[error("the run did not finish within {secs} s (cron.timeout) and was stopped")]
    TimedOut { secs: u64 },
}

/// Why a run produced no answer. Its text is what the output file, the failure message and the
/// job's `last_error` show.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Script(#[from] ScriptError),
    #[error("the job runs no agent and has no script")]
    NothingToRun,
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error(transparent)]
    Agent(#[from] AgentRunError),
    #[error("the agent gave an empty answer")]
    EmptyAnswer,
}

/// The way out of a run: the agent, the outbound path, the home channels.
#[async_trait]
pub trait CronHost: Send + Sync + 'static {
    /// Run a fresh agent turn and return its final answer, or why it failed.
    async fn run_agent(&self, run: AgentRun) -> Result<String, AgentRunError>;
    /// Deliver Markdown to `target`, at most once for this `occurrence` and target.
    async fn deliver(&self, target: &ChatTarget, text: &str, occurrence: &Occurrence) -> Sent;
    /// Each connected platform's home channel.
    fn homes(&self) -> Homes;
}

/// What runs read from the configuration.
#[derive(Debug, Clone)]
pub struct RunSettings {
    pub cron_dir: PathBuf,
    pub skills_dir: PathBuf,
    pub scripts_dir: PathBuf,
    pub zone: Zone,
    /// `cron.wrap_response`.
    pub wrap: bool,
    /// `cron.output_retention`.
    pub retention: usize,
    /// Longest an agent run may take (`cron.timeout`).
    pub agent_timeout: Duration,
    /// Longest a script may take (`cron.script_timeout_seconds`).
    pub script_timeout: Duration,
    /// Environment variables scripts never see.
    pub hidden_env: Vec<String>,
}

/// How a run ended, for the caller's log and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    Delivered { targets: usize },
    Silent,
    Failed(String),
}

/// Runs due jobs.
pub struct JobRunner {
    store: JobStore,
    host: Arc<dyn CronHost>,
    settings: Arc<RunSettings>,
}

impl JobRunner {
    pub fn new(store: JobStore, host: Arc<dyn CronHost>, settings: Arc<RunSettings>) -> Self {
        Self { store, host, settings }
    }

    pub fn settings(&self) -> &RunSettings {
        &self.settings
    }

    /// Run one due occurrence to its end and record it in the job.
    pub async fn run(&self, due: DueRun) -> RunEnd {
        let DueRun { job, occurrence, .. } = due;
        tracing::info!(job_id = %job.id, name = %job.name, occurrence = %occurrence, "cron job starting");
        let result = self.execute(&job, occurrence).await;
        let ran_at = Utc::now();
        self.save_output(&job, ran_at, &result).await;
        let (end, delivery_error) = self.deliver(&job, occurrence, &result).await;
        let outcome = match end {
            RunEnd::Delivered { .. } => "delivered",
            RunEnd::Silent => "silent",
            RunEnd::Failed(_) => "failed",
        };
        crate::observe::metrics::global().cron_run(outcome, delivery_error.is_some());
        let record = RunResult { error: result.as_ref().err().map(RunError::to_string), delivery_error };
        self.finish(&job, occurrence, record, ran_at).await;
        tracing::info!(job_id = %job.id, end = ?end, "cron job finished");
        end
    }

    /// Report a one-shot whose earlier run was cut off (the process died): it is not run again.
    pub async fn report_abandoned(&self, job: &Job) {
        let text =
            delivery::failure_text(job, "its run was interrupted (the process running it stopped); a one-shot job runs at most once");
        let at = job.next_run_at.map(|s| s.utc()).unwrap_or_else(Utc::now);
        let (_, error) = self.send_everywhere(job, at, &text).await;
        self.record_delivery_error(job, error).await;
    }

    /// The script, then the agent (unless the job is script-only or the script says not to).
    /// `Ok(None)` = nothing to deliver.
    async fn execute(&self, job: &Job, occurrence: DateTime<Utc>) -> Result<Option<String>, RunError> {
        let s = &self.settings;
        let script_output = match job.script.as_deref().filter(|p| !p.trim().is_empty()) {
            Some(path) => {
                let run = ScriptRun { scripts_dir: &s.scripts_dir, timeout: s.script_timeout, hidden_env: &s.hidden_env };
                Some(script::run(path, &run).await?)
            }
            None if job.no_agent => return Err(RunError::NothingToRun),
            None => None,
        };
        if job.no_agent {
            return Ok(script_output.filter(|o| !o.trim().is_empty()));
        }
        if script_output.as_deref().is_some_and(script::skips_agent) {
            return Ok(None);
        }
        let inputs = super::prompt::Inputs { cron_dir: &s.cron_dir, skills_dir: &s.skills_dir, script_output: script_output.as_deref() };
        let (prompt, fence) = super::prompt::assemble(job, &inputs)?;
        let answer = self.host.run_agent(self.agent_run(job, occurrence, prompt, fence)).await?;
        if answer.trim().is_empty() {
            return Err(RunError::EmptyAnswer);
        }
        Ok(Some(answer))
    }

    fn agent_run(&self, job: &Job, occurrence: DateTime<Utc>, prompt: String, fence: Fence) -> AgentRun {
        let zone = self.settings.zone;
        let local = zone.show(occurrence);
        AgentRun {
            job_id: job.id.clone(),
            session_key: format!("cron_{}_{}", job.id, occurrence.format("%Y%m%d_%H%M%S")),
            title: format!("{} · {}", job.name, local),
            prompt,
            fence,
            model: job.model.clone().filter(|m| !m.is_empty()),
            provider: job.provider.clone().filter(|p| !p.is_empty()),
            toolsets: job.enabled_toolsets.clone(),
            user_id: job.origin.as_ref().and_then(|o| o.user_id.clone()),
            timeout: self.settings.agent_timeout,
        }
    }

    /// Write the run's output file (off the async workers: it syncs to disk).
    async fn save_output(&self, job: &Job, ran_at: DateTime<Utc>, result: &Result<Option<String>, RunError>) {
        let (settings, job) = (self.settings.clone(), job.clone());
        let failure = result.as_ref().err().map(RunError::to_string);
        let answer = result.as_ref().ok().cloned().flatten();
        let saved = tokio::task::spawn_blocking(move || {
            let outcome = match &failure {
                Some(e) => Outcome::Error(e),
                None => Outcome::Answer(answer.as_deref().unwrap_or("[SILENT]")),
            };
            output::save(&settings.cron_dir, &job, ran_at, settings.zone, outcome, settings.retention).map_err(|e| (job.id, e))
        })
        .await;
        match saved {
            Ok(Ok(_)) => {}
            Ok(Err((job_id, e))) => tracing::warn!(%job_id, error = %e, "cannot write the cron job's output file"),
            Err(e) => tracing::warn!(error = %e, "writing the cron job's output file panicked"),
        }
    }

    /// Deliver the answer (unless silent) or the failure (always); returns how the run ended
    /// and the delivery error to record, if any.
    async fn deliver(&self, job: &Job, occurrence: DateTime<Utc>, result: &Result<Option<String>, RunError>) -> (RunEnd, Option<String>) {
        let text = match result {
            Err(e) => delivery::failure_text(job, &failure_summary(&e.to_string())),
            Ok(None) => return (RunEnd::Silent, None),
            Ok(Some(answer)) if delivery::is_silent(answer) => return (RunEnd::Silent, None),
            Ok(Some(answer)) => delivery::body(job, answer, self.settings.wrap),
        };
        let (targets, error) = self.send_everywhere(job, occurrence, &text).await;
        let end = match result {
            Err(e) => RunEnd::Failed(e.to_string()),
            Ok(_) => RunEnd::Delivered { targets },
        };
        (end, error)
    }

    /// Send `text` to every target of the job: how many targets there were, and the combined
    /// error if any failed.
    async fn send_everywhere(&self, job: &Job, occurrence: DateTime<Utc>, text: &str) -> (usize, Option<String>) {
        let resolved = delivery::resolve(job, &self.host.homes());
        let targets = resolved.targets.len();
        let mut problems: Vec<String> = resolved.unreachable.iter().map(ToString::to_string).collect();
        let occurrence = Occurrence { job_id: job.id.clone(), at: occurrence };
        for target in &resolved.targets {
            match self.host.deliver(target, text, &occurrence).await {
                Sent::Delivered => {}
                Sent::Queued => {
                    tracing::warn!(job_id = %job.id, %target.platform, "cron delivery queued: the platform is not accepting messages now")
                }
                Sent::InDoubt => tracing::warn!(job_id = %job.id, %target.platform, "cron delivery unconfirmed; not resent"),
                Sent::Failed(why) => problems.push(format!("{}:{}: {why}", target.platform, target.chat_id)),
            }
        }
        if problems.is_empty() {
            return (targets, None);
        }
        tracing::error!(job_id = %job.id, problems = ?problems, "cron delivery failed");
        (targets, Some(problems.join("; ")))
    }

    async fn finish(&self, job: &Job, occurrence: DateTime<Utc>, record: RunResult, now: DateTime<Utc>) {
        let (store, id, zone) = (self.store.clone(), job.id.clone(), self.settings.zone);
        let finished = tokio::task::spawn_blocking(move || store.finish_run(&id, occurrence, record, now, zone)).await;
        match finished {
            Ok(Ok(f)) => tracing::debug!(job_id = %job.id, finished = ?f, "cron job recorded"),
            Ok(Err(e)) => tracing::error!(job_id = %job.id, error = %e, "cannot record the cron job's run"),
            Err(e) => tracing::error!(job_id = %job.id, error = %e, "recording the cron job's run panicked"),
        }
    }

    async fn record_delivery_error(&self, job: &Job, error: Option<String>) {
        let (store, id) = (self.store.clone(), job.id.clone());
        if let Ok(Err(e)) = tokio::task::spawn_blocking(move || store.record_delivery_error(&id, error)).await {
            tracing::error!(job_id = %job.id, error = %e, "cannot record the cron job's delivery error");
        }
    }
}

/// The failure message's reason: the error's first line, bounded (the output file keeps it whole).
fn failure_summary(error: &str) -> String {
    let first_line = error.lines().next().unwrap_or(error);
    let mut short: String = first_line.chars().take(300).collect();
    if short.len() < first_line.len() {
        short.push('…');
    }
    short
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
