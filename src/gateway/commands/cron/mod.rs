//! `/cron`: scheduled jobs from the chat. `add` (the chat, and its thread, become the job's
//! origin, where results go by default), `list`, `edit`, `pause`, `resume`, `run` (now, not at
//! the next minute) and `remove`. Users manage the jobs they created, admins every job.

mod args;

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::cron::job::{Job, Origin};
use crate::cron::manage::{Actor, CronJobs, JobEdit, ManageError, NewJob};
use crate::cron::schedule::Zone;
use crate::gateway::delivery::rights::{DeliveryRights, Requester};
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

#[async_trait]
impl SlashCommand for Cron {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        let jobs = &ctx.handles.cron.jobs;
        let actor = actor(ctx);
        let (sub, rest) = match args.trim().split_once(char::is_whitespace) {
            Some((sub, rest)) => (sub.to_ascii_lowercase(), rest.trim()),
            None => (args.trim().to_ascii_lowercase(), ""),
        };
        let reply = match sub.as_str() {
            "" | "list" | "ls" => list(jobs, &actor, rest).await,
            "add" | "create" => add(jobs, &rights(ctx), &actor, ctx.event, rest).await,
            "edit" => edit(jobs, &rights(ctx), &actor, rest).await,
            "pause" | "resume" | "run" | "remove" | "rm" | "delete" => act(jobs, &actor, &sub, rest).await,
            "help" => Ok(USAGE.to_string()),
            other => Err(format!("`/cron {other}` is not a cron command.\n\n{USAGE}")),
        };
        CommandOutcome::Reply(reply.unwrap_or_else(|e| format!("❌ {e}")))
    }
}

fn rights<'a>(ctx: &'a CommandContext<'_>) -> DeliveryRights<'a> {
    DeliveryRights { store: &ctx.handles.store, homes: &ctx.handles.cron.homes }
}

fn actor(ctx: &CommandContext<'_>) -> Actor {
    Actor {
        platform: Some(ctx.event.source.platform.to_string()),
        user_id: ctx.event.source.user_id.clone(),
        admin: ctx.handles.auth.is_admin(ctx.event),
    }
}

/// A subcommand that acts on the one job its argument names.
async fn act(jobs: &CronJobs, actor: &Actor, sub: &str, reference: &str) -> Result<String, String> {
    let reference = reference.trim().trim_matches(|c| c == '"' || c == '\'');
    if reference.is_empty() {
        return Err(format!("name the job: `/cron {sub} <id or name>` (see `/cron list`)"));
    }
    let failed = |e: ManageError| e.to_string();
    Ok(match sub {
        "pause" => {
            let j = jobs.pause(actor, reference).await.map_err(failed)?;
            format!("⏸️ Paused '{}'. `/cron resume {}` starts it again.", j.name, j.id)
        }
        "resume" => {
            let j = jobs.resume(actor, reference).await.map_err(failed)?;
            format!("▶️ Resumed '{}' — {}.", j.name, next_run(&j, jobs.zone()))
        }
        "run" => {
            let j = jobs.run_now(actor, reference).await.map_err(failed)?;
            format!("🚀 Running '{}' now; its result follows here.", j.name)
        }
        _ => {
            let j = jobs.remove(actor, reference).await.map_err(failed)?;
            format!("🗑️ Removed '{}' ({}).", j.name, j.id)
        }
    })
}

async fn list(jobs: &CronJobs, actor: &Actor, rest: &str) -> Result<String, String> {
    let shown = jobs.list(actor, rest.contains("--all")).await.map_err(|e| e.to_string())?.jobs;
    if shown.is_empty() {
        return Ok("No cron jobs yet. Add one with `/cron add every 1h <what to do>`.".into());
    }
    let lines: Vec<String> = shown.iter().map(|j| crate::cron::manage::describe(j, jobs.zone())).collect();
    Ok(format!("⏰ **Cron jobs** ({})\n{}", shown.len(), lines.join("\n")))
}

async fn add(jobs: &CronJobs, rights: &DeliveryRights<'_>, actor: &Actor, event: &InboundEvent, rest: &str) -> Result<String, String> {
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
    let job = jobs.create(spec).await.map_err(|e| e.to_string())?;
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

async fn edit(jobs: &CronJobs, rights: &DeliveryRights<'_>, actor: &Actor, rest: &str) -> Result<String, String> {
    let parsed = args::parse(rest)?;
    if parsed.word_count() == 0 {
        return Err("name the job to edit: `/cron edit <id|name> --schedule \"every 2h\"`".into());
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
    let current = jobs.find(actor, &reference).await.map_err(|e| e.to_string())?;
    let who = Requester { origin: current.origin.as_ref(), user_id: actor.user_id.as_deref(), admin: actor.admin };
    rights.check(change.deliver.as_deref(), &who).await?;
    let job = jobs.edit(actor, &current.id, change).await.map_err(|e| e.to_string())?;
    Ok(format!(
        "✏️ Updated '{}' — {} ({}), delivers to {}.",
        job.name,
        job.schedule_display,
        next_run(&job, jobs.zone()),
        crate::cron::delivery::effective(&job)
    ))
}

fn repeat(parsed: &args::Parsed) -> Result<Option<i64>, String> {
    parsed
        .value("--repeat")
        .map(|v| v.trim().parse::<i64>().map_err(|_| format!("--repeat expects a whole number, found `{v}`")))
        .transpose()
}

fn next_run(job: &Job, zone: Zone) -> String {
    match job.next_run_at {
        Some(at) if job.enabled => format!("next run {}", zone.show(at.utc())),
        _ => "no run scheduled".into(),
    }
}
