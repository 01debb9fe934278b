//! Managing jobs, the same way from chat (`/cron`), the shell (`hermes cron`) and the agent's
//! `cronjob` tool: [`CronJobs`] validates a new or edited job (schedule, delivery, script,
//! skills, the lifecycle guard), enforces who may touch which job (users their own, admins and
//! the shell every one), writes the store and wakes the ticker. A job paused because its owner
//! is no longer allowed ([`super::owner`]) is resumed only by an admin, and only once its owner
//! is allowed again; it is not run by hand meanwhile.

use super::delivery::{self, DeliverError};
use super::job::{Job, Origin};
use super::owner::{self, EveryOwner, OwnerCheck};
use super::prompt::StopsGateway;
use super::schedule::{self, ScheduleError, Zone};
use super::script::ScriptError;
use super::store::{EditError, JobStore, JobStoreError, Listing};
use chrono::{DateTime, Utc};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::Notify;

/// Why a job could not be created or changed; the text tells the user what to do.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ManageError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("⛔ job '{0}' belongs to someone else; only its creator or an admin may change it")]
    NotYours(String),
    #[error(transparent)]
    Store(#[from] JobStoreError),
    #[error("the jobs store is busy or stopped: {0}")]
    Worker(tokio::task::JoinError),
}

/// What is wrong with a job as asked for (the user's mistake, not the store's).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Invalid {
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error(transparent)]
    Deliver(#[from] DeliverError),
    #[error(transparent)]
    Script(#[from] ScriptError),
    #[error(transparent)]
    StopsGateway(#[from] StopsGateway),
    #[error("the job needs a prompt (what the agent should do at each run)")]
    NoPrompt,
    #[error("a job without an agent (no_agent) needs a script from HERMES_HOME/scripts")]
    NoAgentNoScript,
    #[error("there is no skill named '{name}' (see the skills_list tool or HERMES_HOME/skills)")]
    UnknownSkill { name: String },
    /// Resuming a job paused for its owner takes an admin.
    #[error("⛔ '{name}' was paused because its {reason}; only an admin can resume it")]
    OwnerPauseNeedsAdmin { name: String, reason: String },
    /// Its owner is still not allowed, so a resumed run would pause it at once.
    #[error(
        "'{name}' stays paused: {why}. Allow them again (the platform's allowlist, or `hermes pairing approve`) and resume it then, or remove the job"
    )]
    OwnerStillRefused { name: String, why: String },
    /// Run by hand while paused for its owner.
    #[error(
        "'{name}' is paused: its {reason}. An admin resumes it (`/cron resume` or `hermes cron resume`) once its owner is allowed again"
    )]
    PausedForOwner { name: String, reason: String },
}

/// Who is asking.
#[derive(Debug, Clone, Default)]
pub(crate) struct Actor {
    pub platform: Option<String>,
    pub user_id: Option<String>,
    /// Admins (and the shell) manage every job.
    pub admin: bool,
}

impl Actor {
    /// The shell: the machine's owner.
    pub(crate) fn shell() -> Self {
        Self { admin: true, ..Self::default() }
    }

    fn may_manage(&self, job: &Job) -> bool {
        self.admin || matches!((&self.platform, &self.user_id), (Some(platform), Some(user)) if job.owned_by(platform, user))
    }
}

/// A job to create.
#[derive(Debug, Clone, Default)]
pub(crate) struct NewJob {
    pub schedule: String,
    pub prompt: String,
    pub name: Option<String>,
    pub deliver: Option<String>,
    /// Runs before the job ends; `None` = once for a one-shot, forever for a recurring job;
    /// zero or less = forever.
    pub repeat: Option<i64>,
    pub skills: Vec<String>,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub script: Option<String>,
    pub no_agent: bool,
    pub toolsets: Option<Vec<String>>,
    /// The chat it was created from (results go back there by default).
    pub origin: Option<Origin>,
}

/// Changes to a job; `None` leaves a field alone.
#[derive(Debug, Clone, Default)]
pub(crate) struct JobEdit {
    pub schedule: Option<String>,
    pub prompt: Option<String>,
    pub name: Option<String>,
    pub deliver: Option<String>,
    pub repeat: Option<i64>,
    /// Replaces the list.
    pub skills: Option<Vec<String>>,
    pub add_skills: Vec<String>,
    pub remove_skills: Vec<String>,
    pub model: Option<String>,
    pub script: Option<String>,
    pub toolsets: Option<Vec<String>>,
}

/// The jobs of one HERMES_HOME, and the ticker to wake when they change.
#[derive(Clone)]
pub(crate) struct CronJobs {
    store: JobStore,
    zone: Zone,
    scripts_dir: PathBuf,
    skills_dir: PathBuf,
    wake: Arc<Notify>,
    /// Whether a job's owner may still have it run (asked again before a resume).
    owners: Arc<dyn OwnerCheck>,
}

impl CronJobs {
    pub(crate) fn new(store: JobStore, zone: Zone, scripts_dir: PathBuf, skills_dir: PathBuf, wake: Arc<Notify>) -> Self {
        Self { store, zone, scripts_dir, skills_dir, wake, owners: Arc::new(EveryOwner) }
    }

    /// The same jobs, with `owners` judging whose jobs may run.
    pub(crate) fn with_owner_check(mut self, owners: Arc<dyn OwnerCheck>) -> Self {
        self.owners = owners;
        self
    }

    /// What judges whose jobs may run (the ticker asks it too).
    pub(crate) fn owner_check(&self) -> Arc<dyn OwnerCheck> {
        self.owners.clone()
    }

    pub(crate) fn zone(&self) -> Zone {
        self.zone
    }

    pub(crate) fn store(&self) -> &JobStore {
        &self.store
    }

    /// What the ticker waits on for changes.
    pub(crate) fn wake_handle(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Validate and store a new job; the ticker is woken so a short delay fires on time.
    pub(crate) async fn create(&self, spec: NewJob) -> Result<Job, ManageError> {
        let job = self.build(spec, Utc::now())?;
        let store = self.store.clone();
        let job = blocking(move || store.create(job)).await??;
        self.wake.notify_one();
        Ok(job)
    }

    /// The jobs `actor` may see (all of them for admins), soonest first; completed one-shots only
    /// with `completed`. The records that cannot be read come along, for the shell to report.
    pub(crate) async fn list(&self, actor: &Actor, completed: bool) -> Result<Listing, ManageError> {
        let store = self.store.clone();
        let Listing { jobs, skipped } = blocking(move || store.list()).await??;
        let mut jobs: Vec<Job> = jobs.into_iter().filter(|j| actor.may_manage(j) && (completed || !j.is_completed())).collect();
        jobs.sort_by_key(|j| (j.next_run_at.map(|s| s.utc()), j.name.clone()));
        Ok(Listing { jobs, skipped })
    }

    /// The job named by `reference` (id or name), if `actor` may manage it.
    pub(crate) async fn find(&self, actor: &Actor, reference: &str) -> Result<Job, ManageError> {
        let (store, reference) = (self.store.clone(), reference.to_string());
        let job = blocking(move || store.find(&reference)).await??;
        if actor.may_manage(&job) { Ok(job) } else { Err(ManageError::NotYours(job.name)) }
    }

    pub(crate) async fn edit(&self, actor: &Actor, reference: &str, edit: JobEdit) -> Result<Job, ManageError> {
        let job = self.find(actor, reference).await?;
        let now = Utc::now();
        let (store, this) = (self.store.clone(), self.clone());
        let edited = blocking(move || store.edit(&job.id, |j| this.apply(j, edit, now))).await?.map_err(|e| match e {
            EditError::Refused(invalid) => ManageError::Invalid(invalid),
            EditError::Store(e) => ManageError::Store(e),
        })?;
        self.wake.notify_one();
        Ok(edited)
    }

    pub(crate) async fn pause(&self, actor: &Actor, reference: &str) -> Result<Job, ManageError> {
        let job = self.find(actor, reference).await?;
        let store = self.store.clone();
        let paused = blocking(move || store.pause(&job.id, None, Utc::now())).await??;
        Ok(paused)
    }

    pub(crate) async fn resume(&self, actor: &Actor, reference: &str) -> Result<Job, ManageError> {
        let job = self.find(actor, reference).await?;
        if owner::is_owner_pause(&job) {
            self.may_resume_owner_pause(actor, &job)?;
        }
        let (store, zone) = (self.store.clone(), self.zone);
        let resumed = blocking(move || store.resume(&job.id, Utc::now(), zone)).await??;
        self.wake.notify_one();
        Ok(resumed)
    }

    pub(crate) async fn remove(&self, actor: &Actor, reference: &str) -> Result<Job, ManageError> {
        let job = self.find(actor, reference).await?;
        let (store, id) = (self.store.clone(), job.id.clone());
        blocking(move || store.remove(&id)).await??;
        Ok(job)
    }

    /// A job paused because its owner lost access: only an admin resumes it, and only once the
    /// owner is allowed again (else the next run would pause it at once).
    fn may_resume_owner_pause(&self, actor: &Actor, job: &Job) -> Result<(), ManageError> {
        let reason = job.paused_reason.as_deref().unwrap_or_default();
        if !actor.admin {
            return Err(Invalid::OwnerPauseNeedsAdmin { name: job.name.clone(), reason: reason.to_string() }.into());
        }
        match self.owners.refusal(job) {
            Some(why) => Err(Invalid::OwnerStillRefused { name: job.name.clone(), why }.into()),
            None => Ok(()),
        }
    }

    /// Make the job due now and wake the ticker: it runs within moments, not at the next minute.
    /// A job paused because its owner lost access is refused (an admin resumes it first).
    pub(crate) async fn run_now(&self, actor: &Actor, reference: &str) -> Result<Job, ManageError> {
        let job = self.find(actor, reference).await?;
        if owner::is_owner_pause(&job) {
            let reason = job.paused_reason.clone().unwrap_or_default();
            return Err(Invalid::PausedForOwner { name: job.name, reason }.into());
        }
        let store = self.store.clone();
        let job = blocking(move || store.trigger_now(&job.id, Utc::now())).await??;
        self.wake.notify_one();
        Ok(job)
    }

    /// A new job record from `spec`, validated.
    fn build(&self, spec: NewJob, now: DateTime<Utc>) -> Result<Job, ManageError> {
        let schedule = schedule::parse(&spec.schedule, now, self.zone).map_err(Invalid::from)?;
        let prompt = spec.prompt.trim();
        if prompt.is_empty() && !(spec.no_agent && spec.script.is_some()) {
            return Err(Invalid::NoPrompt.into());
        }
        let mut job = Job::planned(spec.name.as_deref().unwrap_or(""), prompt, schedule, now, self.zone).map_err(Invalid::from)?;
        job.origin = spec.origin;
        job.no_agent = spec.no_agent;
        job.provider = spec.provider;
        let edit = JobEdit {
            deliver: spec.deliver,
            repeat: spec.repeat,
            skills: Some(spec.skills),
            model: spec.model,
            script: spec.script,
            toolsets: spec.toolsets,
            ..JobEdit::default()
        };
        self.apply(&mut job, edit, now)?;
        Ok(job)
    }

    /// Apply `edit` to `job`, checking each changed field.
    fn apply(&self, job: &mut Job, edit: JobEdit, now: DateTime<Utc>) -> Result<(), Invalid> {
        if let Some(text) = edit.schedule {
            let schedule = schedule::parse(&text, now, self.zone)?;
            job.reschedule(schedule, now, self.zone)?;
        }
        if let Some(prompt) = edit.prompt {
            job.prompt = prompt.trim().to_string();
        }
        if let Some(name) = edit.name.filter(|n| !n.trim().is_empty()) {
            job.name = name.trim().to_string();
        }
        if let Some(deliver) = edit.deliver {
            delivery::check(&deliver)?;
            job.deliver = deliver.trim().to_string();
        }
        if let Some(times) = edit.repeat {
            job.repeat.times = u32::try_from(times).ok().filter(|t| *t > 0);
        }
        apply_skills(job, edit.skills, edit.add_skills, edit.remove_skills, &self.skills_dir)?;
        if let Some(model) = edit.model {
            job.model = Some(model).filter(|m| !m.trim().is_empty());
        }
        if let Some(script) = edit.script {
            job.script = Some(script).filter(|s| !s.trim().is_empty());
        }
        if let Some(toolsets) = edit.toolsets {
            job.enabled_toolsets = Some(toolsets);
        }
        self.check_whole(job)
    }

    /// What must hold of the job as a whole after any change.
    fn check_whole(&self, job: &Job) -> Result<(), Invalid> {
        if let Some(refusal) = super::prompt::lifecycle_refusal(&job.prompt, job.script.as_deref()) {
            return Err(refusal.into());
        }
        if let Some(script) = &job.script {
            let path = super::script::locate(&self.scripts_dir, script)?;
            super::script::lifecycle_refusal(script, &path)?;
        }
        if job.no_agent && job.script.is_none() {
            return Err(Invalid::NoAgentNoScript);
        }
        Ok(())
    }
}

fn apply_skills(
    job: &mut Job,
    set: Option<Vec<String>>,
    add: Vec<String>,
    remove: Vec<String>,
    skills_dir: &std::path::Path,
) -> Result<(), Invalid> {
    if let Some(list) = set {
        job.skills = list;
    }
    for s in add {
        if !job.skills.contains(&s) {
            job.skills.push(s);
        }
    }
    job.skills.retain(|s| !remove.contains(s));
    for name in &job.skills {
        crate::agent::skills::find(skills_dir, name).map_err(|_| Invalid::UnknownSkill { name: name.clone() })?;
    }
    Ok(())
}

/// One job as `/cron list` and `hermes cron list` show it.
pub(crate) fn describe(job: &Job, zone: Zone) -> String {
    let next = match (job.enabled, job.next_run_at) {
        (false, _) => match job.paused_reason.as_deref().filter(|r| !r.trim().is_empty()) {
            Some(reason) => format!("paused: {reason}"),
            None => "paused".to_string(),
        },
        (true, Some(at)) => format!("next {}", zone.show(at.utc())),
        (true, None) => "no next run".to_string(),
    };
    let mut line = format!("• {} `{}` — {} ({next}) → {}", job.name, job.id, job.schedule_display, delivery::effective(job));
    if let Some(times) = job.repeat.times {
        line.push_str(&format!(", run {}/{times}", job.repeat.completed));
    }
    if job.last_status.as_deref() == Some("error") {
        line.push_str(&format!("\n  last run failed: {}", job.last_error.as_deref().unwrap_or("unknown error")));
    }
    if let Some(e) = &job.last_delivery_error {
        line.push_str(&format!("\n  last delivery failed: {e}"));
    }
    line
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ManageError> {
    tokio::task::spawn_blocking(work).await.map_err(ManageError::Worker)
}

#[cfg(test)]
#[path = "manage_tests.rs"]
mod tests;
