//! The gateway's answer to the agent's `cronjob` tool: each action on [`CronJobs`] for the user
//! of the conversation (their own jobs, or every job for an admin), with the conversation's chat
//! and thread as the origin of what it creates, and its deliveries held to what the user may
//! post ([`crate::gateway::delivery::rights`]). The texts are for the model to read.

use crate::agent::tools::cronjob::CronJobArgs;
use crate::agent::tools::{HostError, SessionScope};
use crate::cron::job::{Job, Origin};
use crate::cron::manage::{Actor, CronJobs, JobEdit, ManageError, NewJob, describe};
use crate::gateway::delivery::rights::{DeliveryRights, Requester};
use crate::store::Routes;

pub(crate) async fn act(
    jobs: &CronJobs,
    rights: &DeliveryRights<'_>,
    scope: &SessionScope,
    args: CronJobArgs,
) -> Result<String, HostError> {
    let actor = Actor { platform: Some(scope.platform.clone()), user_id: scope.user_id.clone(), admin: scope.is_admin };
    let reference =
        || args.job_id.clone().filter(|r| !r.trim().is_empty()).ok_or_else(|| refused("`job_id` (the job's id or name) is required"));
    let done = |job: Job, what: &str| format!("{what} '{}' (id {}). {}", job.name, job.id, describe(&job, jobs.zone()));
    match args.action.as_str() {
        "create" => create(jobs, rights, scope, &args).await,
        "list" => list(jobs, &actor).await,
        "update" => {
            let current = jobs.find(&actor, &reference()?).await.map_err(failed)?;
            let who = Requester { origin: current.origin.as_ref(), user_id: scope.user_id.as_deref(), admin: scope.is_admin };
            rights.check(args.deliver.as_deref(), &who).await.map_err(|e| HostError::Refused(e.to_string()))?;
            jobs.edit(&actor, &current.id, edit_of(&args)).await.map(|j| done(j, "Updated")).map_err(failed)
        }
        "pause" => jobs.pause(&actor, &reference()?).await.map(|j| done(j, "Paused")).map_err(failed),
        "resume" => jobs.resume(&actor, &reference()?).await.map(|j| done(j, "Resumed")).map_err(failed),
        "remove" => jobs.remove(&actor, &reference()?).await.map(|j| format!("Removed '{}' (id {}).", j.name, j.id)).map_err(failed),
        "run" => jobs
            .run_now(&actor, &reference()?)
            .await
            .map(|j| format!("'{}' runs now; its result is delivered as usual.", j.name))
            .map_err(failed),
        other => Err(refused(&format!("unknown action `{other}`"))),
    }
}

async fn create(jobs: &CronJobs, rights: &DeliveryRights<'_>, scope: &SessionScope, args: &CronJobArgs) -> Result<String, HostError> {
    let schedule = args.schedule.clone().ok_or_else(|| refused("`schedule` is required to create a job"))?;
    let (model, provider) = args.model_and_provider();
    let spec = NewJob {
        schedule,
        prompt: args.prompt.clone().unwrap_or_default(),
        name: args.name.clone(),
        deliver: args.deliver.clone(),
        repeat: args.repeat,
        skills: args.skills.clone().unwrap_or_default(),
        model,
        provider,
        script: args.script.clone(),
        no_agent: args.no_agent.unwrap_or(false),
        toolsets: args.enabled_toolsets.clone(),
        origin: Some(origin_of(scope, rights.routes).await),
    };
    let who = Requester { origin: spec.origin.as_ref(), user_id: scope.user_id.as_deref(), admin: scope.is_admin };
    rights.check(spec.deliver.as_deref(), &who).await.map_err(|e| HostError::Refused(e.to_string()))?;
    let job = jobs.create(spec).await.map_err(failed)?;
    Ok(format!("Created '{}' (id {}). {}", job.name, job.id, describe(&job, jobs.zone())))
}

async fn list(jobs: &CronJobs, actor: &Actor) -> Result<String, HostError> {
    let all = jobs.list(actor, true).await.map_err(failed)?.jobs;
    if all.is_empty() {
        return Ok("No scheduled jobs.".into());
    }
    Ok(all.iter().map(|j| describe(j, jobs.zone())).collect::<Vec<_>>().join("\n"))
}

fn edit_of(args: &CronJobArgs) -> JobEdit {
    let (model, _) = args.model_and_provider();
    JobEdit {
        schedule: args.schedule.clone(),
        prompt: args.prompt.clone(),
        name: args.name.clone(),
        deliver: args.deliver.clone(),
        repeat: args.repeat,
        skills: args.skills.clone(),
        model,
        script: args.script.clone(),
        toolsets: args.enabled_toolsets.clone(),
        ..JobEdit::default()
    }
}

/// The conversation as a job's origin, with the verified handle its sender last wrote under
/// (from the session's route): the job's owner is checked against the allowlist at each run,
/// and an allowlist may name them by that handle.
async fn origin_of(scope: &SessionScope, routes: &dyn Routes) -> Origin {
    let mut origin = Origin::new(&scope.platform, &scope.chat_id, scope.thread_id.clone());
    origin.chat_name = scope.chat_name.clone();
    origin.user_id = scope.user_id.clone();
    let route = match routes.route_get(&scope.session_key).await {
        Ok(route) => route,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the session's route; the job records no handle for its owner");
            None
        }
    };
    let handle = route.map(|r| r.origin).filter(|source| source.user_id == scope.user_id).and_then(|source| source.user_handle);
    if let Some(handle) = handle {
        origin.extra.insert("user_handle".into(), serde_json::Value::String(handle));
    }
    origin
}

fn refused(text: &str) -> HostError {
    HostError::Refused(text.to_string())
}

fn failed(e: ManageError) -> HostError {
    match e {
        ManageError::Invalid(invalid) => HostError::BadTarget(invalid.to_string()),
        ManageError::NotYours(_) => HostError::Refused(e.to_string()),
        other => HostError::Store(other.to_string()),
    }
}
