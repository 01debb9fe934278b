//! `/cron`: scheduled jobs from the chat. `add` (the chat, and its thread, become the job's
//! origin, where results go by default), `list`, `edit`, `pause`, `resume`, `run` (now, not at
//! the next minute) and `remove`. Users manage the jobs they created, admins every job.

mod args;

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::cron::job::{Job, Origin};
use crate::cron::manage::{Actor, CronJobs, JobEdit, ManageError, NewJob};
use crate::cron::schedule::Zone;
use crate::gateway::delivery::rights::{DeliveryRights, Requester, RightsError};
use crate::gateway::intake::auth::AuthPolicy;
use async_trait::async_trait;
use hermes_adapter::InboundEvent;

pub(super) struct Cron;

static SPEC: CommandSpec = CommandSpec {
    name: "cron",
    aliases: &[],
    args_hint: "[add|list|edit|pause|resume|run|remove] …",
    description: "Schedule jobs whose results arrive in this chat (`/cron add every 1h check the build`)",
    runs_mid_turn: true,
};

const USAGE: &str = "Usage:\n\
`/cron add <schedule> <prompt> [--name N] [--deliver T] [--repeat N] [--skill S]`\n\
`/cron list [--all]`\n\
`/cron edit <id|name> [--schedule S] [--prompt P] [--name N] [--deliver T] [--repeat N] [--skill S | --add-skill S | --remove-skill S | --clear-skills]`\n\
`/cron pause|resume|run|remove <id|name>`\n\
Schedules: `30m`, `2h`, `1d` (once, after a delay); `every 30m` (repeating); `0 9 * * mon-fri` (cron); `2026-02-03T14:00` (once, at a time).";

/// Why a `/cron` command did nothing; the reply is "❌ " and this text.
#[derive(Debug, thiserror::Error)]
enum CronCommandError {
    #[error("`/cron {sub}` is not a cron command.\n\n{usage}", usage = USAGE)]
    UnknownSubcommand { sub: String },
    #[error("name the job: `/cron {sub} <id or name>` (see `/cron list`)")]
    NoJobNamed { sub: String },
    #[error("name the job to edit: `/cron edit <id|name> --schedule \"every 2h\"`")]
    NoJobToEdit,
    #[error("--repeat expects a whole number, found `{given}`")]
    BadRepeat { given: String },
    #[error(transparent)]
    Args(#[from] args::ArgsError),
    #[error(transparent)]
    Rights(#[from] RightsError),
    #[error(transparent)]
    Manage(#[from] ManageError),
}

#[async_trait]
impl SlashCommand for Cron {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        let h = ctx.handles;
        let rights = DeliveryRights { routes: h.routes.as_ref(), homes: &h.cron.homes };
        cron(&h.cron.jobs, &rights, &h.auth, ctx.event, args).await
    }
}

/// `/cron <args>` from `event`'s sender; `rights` judges where results may go.
async fn cron(jobs: &CronJobs, rights: &DeliveryRights<'_>, auth: &AuthPolicy, event: &InboundEvent, args: &str) -> CommandOutcome {
    let actor = actor(auth, event);
    let (sub, rest) = match args.trim().split_once(char::is_whitespace) {
        Some((sub, rest)) => (sub.to_ascii_lowercase(), rest.trim()),
        None => (args.trim().to_ascii_lowercase(), ""),
    };
    let reply = match sub.as_str() {
        "" | "list" | "ls" => list(jobs, &actor, rest).await,
        "add" | "create" => add(jobs, rights, &actor, event, rest).await,
        "edit" => edit(jobs, rights, &actor, rest).await,
        "pause" | "resume" | "run" | "remove" | "rm" | "delete" => act(jobs, &actor, &sub, rest).await,
        "help" => Ok(USAGE.to_string()),
        other => Err(CronCommandError::UnknownSubcommand { sub: other.to_string() }),
    };
    CommandOutcome::Reply(reply.unwrap_or_else(|e| format!("❌ {e}")))
}

fn actor(auth: &AuthPolicy, event: &InboundEvent) -> Actor {
    Actor { platform: Some(event.source.platform.to_string()), user_id: event.source.user_id.clone(), admin: auth.is_admin(event) }
}

/// A subcommand that acts on the one job its argument names.
async fn act(jobs: &CronJobs, actor: &Actor, sub: &str, reference: &str) -> Result<String, CronCommandError> {
    let reference = reference.trim().trim_matches(|c| c == '"' || c == '\'');
    if reference.is_empty() {
        return Err(CronCommandError::NoJobNamed { sub: sub.to_string() });
    }
    Ok(match sub {
        "pause" => {
            let j = jobs.pause(actor, reference).await?;
            format!("⏸️ Paused '{}'. `/cron resume {}` starts it again.", j.name, j.id)
        }
        "resume" => {
            let j = jobs.resume(actor, reference).await?;
            format!("▶️ Resumed '{}' — {}.", j.name, next_run(&j, jobs.zone()))
        }
        "run" => {
            let j = jobs.run_now(actor, reference).await?;
            format!("🚀 Running '{}' now; its result follows here.", j.name)
        }
        _ => {
            let j = jobs.remove(actor, reference).await?;
            format!("🗑️ Removed '{}' ({}).", j.name, j.id)
        }
    })
}

async fn list(jobs: &CronJobs, actor: &Actor, rest: &str) -> Result<String, CronCommandError> {
    let shown = jobs.list(actor, rest.contains("--all")).await?.jobs;
    if shown.is_empty() {
        return Ok("No cron jobs yet. Add one with `/cron add every 1h <what to do>`.".into());
    }
    let lines: Vec<String> = shown.iter().map(|j| crate::cron::manage::describe(j, jobs.zone())).collect();
    Ok(format!("⏰ **Cron jobs** ({})\n{}", shown.len(), lines.join("\n")))
}

async fn add(
    jobs: &CronJobs,
    rights: &DeliveryRights<'_>,
    actor: &Actor,
    event: &InboundEvent,
    rest: &str,
) -> Result<String, CronCommandError> {
    let parsed = args::parse(rest)?;
    let (schedule, used) = args::leading_schedule(&parsed, jobs.zone())?;
    let prompt = parsed.value("--prompt").unwrap_or_else(|| parsed.text_from(used));
    let spec = NewJob {
        schedule,
        prompt,
        name: parsed.value("--name"),
        deliver: parsed.value("--deliver"),
        repeat: repeat(&parsed)?,
        skills: parsed.values("--skill"),
        model: parsed.value("--model"),
        origin: Some(origin_of(event)),
        ..NewJob::default()
    };
    let who = Requester { origin: spec.origin.as_ref(), user_id: actor.user_id.as_deref(), admin: actor.admin };
    rights.check(spec.deliver.as_deref(), &who).await?;
    let job = jobs.create(spec).await?;
    Ok(format!(
        "✅ Cron job '{}' created (id `{}`)\nSchedule: {} — {}\nDelivers to: {}",
        job.name,
        job.id,
        job.schedule_display,
        next_run(&job, jobs.zone()),
        crate::cron::delivery::effective(&job)
    ))
}

/// The chat (and thread) the answer to `event` goes to, with its sender: the job's origin.
fn origin_of(event: &InboundEvent) -> Origin {
    let mut origin = Origin::from_source(&event.source);
    let target = event.answer_target();
    origin.chat_id = target.chat_id;
    origin.thread_id = target.thread_id;
    origin
}

async fn edit(jobs: &CronJobs, rights: &DeliveryRights<'_>, actor: &Actor, rest: &str) -> Result<String, CronCommandError> {
    let parsed = args::parse(rest)?;
    if parsed.word_count() == 0 {
        return Err(CronCommandError::NoJobToEdit);
    }
    let reference = parsed.text_from(0);
    let change = JobEdit {
        schedule: parsed.value("--schedule"),
        prompt: parsed.value("--prompt"),
        name: parsed.value("--name"),
        deliver: parsed.value("--deliver"),
        repeat: repeat(&parsed)?,
        skills: if parsed.has("--clear-skills") { Some(Vec::new()) } else { Some(parsed.values("--skill")).filter(|s| !s.is_empty()) },
        add_skills: parsed.values("--add-skill"),
        remove_skills: parsed.values("--remove-skill"),
        model: parsed.value("--model"),
        ..JobEdit::default()
    };
    let current = jobs.find(actor, &reference).await?;
    let who = Requester { origin: current.origin.as_ref(), user_id: actor.user_id.as_deref(), admin: actor.admin };
    rights.check(change.deliver.as_deref(), &who).await?;
    let job = jobs.edit(actor, &current.id, change).await?;
    Ok(format!(
        "✏️ Updated '{}' — {} ({}), delivers to {}.",
        job.name,
        job.schedule_display,
        next_run(&job, jobs.zone()),
        crate::cron::delivery::effective(&job)
    ))
}

fn repeat(parsed: &args::Parsed) -> Result<Option<i64>, CronCommandError> {
    parsed.value("--repeat").map(|v| v.trim().parse::<i64>().map_err(|_| CronCommandError::BadRepeat { given: v })).transpose()
}

fn next_run(job: &Job, zone: Zone) -> String {
    match job.next_run_at {
        Some(at) if job.enabled => format!("next run {}", zone.show(at.utc())),
        _ => "no run scheduled".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_read_as_before_the_errors_were_typed() {
        let cases: [(CronCommandError, &str); 4] = [
            (
                CronCommandError::UnknownSubcommand { sub: "stop".into() },
                "`/cron stop` is not a cron command.\n\nUsage:\n`/cron add <schedule> <prompt>",
            ),
            (CronCommandError::NoJobNamed { sub: "pause".into() }, "name the job: `/cron pause <id or name>` (see `/cron list`)"),
            (CronCommandError::NoJobToEdit, "name the job to edit: `/cron edit <id|name> --schedule \"every 2h\"`"),
            (CronCommandError::BadRepeat { given: "x".into() }, "--repeat expects a whole number, found `x`"),
        ];
        for (error, text) in cases {
            assert!(error.to_string().starts_with(text), "{error}");
        }
        let parsed = args::parse("every 1h ping --repeat three").unwrap();
        assert_eq!(repeat(&parsed).unwrap_err().to_string(), "--repeat expects a whole number, found `three`");
        assert_eq!(repeat(&args::parse("every 1h ping --repeat 3").unwrap()).unwrap(), Some(3));
    }
}
