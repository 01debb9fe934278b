//! Managing jobs as chat users, admins and the shell do: who may touch which job, what a new or
//! edited job is checked for (and that a refused change leaves the job as it was), and that a
//! change wakes the ticker.

use super::*;
use crate::cron::schedule::ScheduleKind;
use std::time::Duration;

struct Fixture {
    _home: tempfile::TempDir,
    jobs: CronJobs,
    wake: Arc<Notify>,
}

fn fixture() -> Fixture {
    let home = tempfile::tempdir().unwrap();
    let (scripts, skills) = (home.path().join("scripts"), home.path().join("skills"));
    std::fs::create_dir_all(&scripts).unwrap();
    std::fs::write(scripts.join("fetch.sh"), "echo fetched").unwrap();
    std::fs::write(scripts.join("tidy.sh"), "#!/bin/sh\necho tidying\nsystemctl --user restart hermes-gateway\n").unwrap();
    std::fs::create_dir_all(skills.join("digest")).unwrap();
    std::fs::write(skills.join("digest/SKILL.md"), "---\nname: digest\ndescription: d\n---\nBe brief.").unwrap();
    std::fs::write(home.path().join("outside.sh"), "echo outside").unwrap();
    let wake = Arc::new(Notify::new());
    let store = JobStore::new(home.path().join("cron"));
    let jobs = CronJobs::new(store, Zone::Named(chrono_tz::UTC), scripts, skills, wake.clone());
    Fixture { _home: home, jobs, wake }
}

fn user(platform: &str, id: &str) -> Actor {
    Actor { platform: Some(platform.into()), user_id: Some(id.into()), admin: false }
}

fn from(platform: &str, id: &str, schedule: &str, prompt: &str, name: &str) -> NewJob {
    let mut origin = Origin::new(platform, "chat-1", Some("topic-9".into()));
    origin.user_id = Some(id.into());
    NewJob { schedule: schedule.into(), prompt: prompt.into(), name: Some(name.into()), origin: Some(origin), ..NewJob::default() }
}

async fn woken(wake: &Notify) -> bool {
    tokio::time::timeout(Duration::from_millis(50), wake.notified()).await.is_ok()
}

#[tokio::test]
async fn users_manage_their_own_jobs_and_admins_and_the_shell_every_job() {
    let f = fixture();
    let alice = user("telegram", "111");
    let bob = user("telegram", "222");
    let same_id_elsewhere = user("discord", "111");
    f.jobs.create(from("telegram", "111", "every 1h", "alice's digest", "alice-digest")).await.unwrap();
    f.jobs.create(from("telegram", "222", "every 2h", "bob's digest", "bob-digest")).await.unwrap();

    let names = |jobs: Vec<Job>| jobs.into_iter().map(|j| j.name).collect::<Vec<_>>();
    assert_eq!(names(f.jobs.list(&alice, true).await.unwrap().jobs), ["alice-digest"]);
    assert_eq!(
        names(f.jobs.list(&same_id_elsewhere, true).await.unwrap().jobs),
        Vec::<String>::new(),
        "a user id is only theirs on its platform"
    );
    assert_eq!(names(f.jobs.list(&Actor::shell(), true).await.unwrap().jobs), ["alice-digest", "bob-digest"]);

    for attempt in [
        f.jobs.pause(&bob, "alice-digest").await,
        f.jobs.remove(&bob, "alice-digest").await,
        f.jobs.run_now(&bob, "alice-digest").await,
        f.jobs.edit(&bob, "alice-digest", JobEdit { prompt: Some("leak it".into()), ..JobEdit::default() }).await,
        f.jobs.remove(&same_id_elsewhere, "alice-digest").await,
    ] {
        let refused = attempt.unwrap_err();
        assert!(matches!(refused, ManageError::NotYours(_)), "{refused}");
        assert!(refused.to_string().contains("belongs to someone else"), "{refused}");
    }
    let untouched = f.jobs.find(&alice, "alice-digest").await.unwrap();
    assert_eq!((untouched.enabled, untouched.prompt.as_str()), (true, "alice's digest"), "a refused change changes nothing");

    let admin = Actor { admin: true, ..bob.clone() };
    assert!(!f.jobs.pause(&admin, "alice-digest").await.unwrap().enabled, "an admin manages everyone's jobs");
    f.jobs.remove(&Actor::shell(), "bob-digest").await.unwrap();
    assert_eq!(names(f.jobs.list(&Actor::shell(), true).await.unwrap().jobs), ["alice-digest"]);
}

#[tokio::test]
async fn a_new_job_is_checked_and_each_refusal_says_what_to_fix() {
    let f = fixture();
    let refused = |spec: NewJob| {
        let jobs = f.jobs.clone();
        async move { jobs.create(spec).await.unwrap_err().to_string() }
    };
    let base = || from("telegram", "111", "every 1h", "check the build", "build");
    let cases: Vec<(NewJob, &str)> = vec![
        (NewJob { schedule: "every fortnight".into(), ..base() }, "Invalid schedule 'every fortnight'"),
        (NewJob { schedule: "2020-01-01T09:00".into(), ..base() }, "more than 120s in the past"),
        (NewJob { prompt: "  ".into(), ..base() }, "needs a prompt"),
        (NewJob { prompt: "every night run `hermes gateway restart`".into(), ..base() }, "may not stop or restart the gateway"),
        (NewJob { deliver: Some("origin, tele gram".into()), ..base() }, "'tele gram' is not a platform name"),
        (NewJob { script: Some("../outside.sh".into()), ..base() }, "is not a file inside"),
        (NewJob { script: Some("/etc/passwd".into()), ..base() }, "is not a file inside"),
        (NewJob { no_agent: true, ..base() }, "needs a script"),
        (NewJob { script: Some("tidy.sh".into()), ..base() }, "may not stop or restart the gateway"),
        (NewJob { skills: vec!["nonexistent".into()], ..base() }, "no skill named 'nonexistent'"),
    ];
    for (spec, expected) in cases {
        let text = refused(spec).await;
        assert!(text.contains(expected), "expected {expected:?} in {text:?}");
    }
    assert!(f.jobs.list(&Actor::shell(), true).await.unwrap().jobs.is_empty(), "nothing refused was stored");
    assert!(!woken(&f.wake).await, "and the ticker was not woken for nothing");

    let script_only = NewJob { prompt: String::new(), script: Some("fetch.sh".into()), no_agent: true, ..base() };
    let job = f.jobs.create(script_only).await.unwrap();
    assert_eq!((job.script.as_deref(), job.no_agent), (Some("fetch.sh"), true), "a script-only job needs no prompt");
}

#[tokio::test]
async fn a_created_job_has_hermes_defaults_and_wakes_the_ticker() {
    let f = fixture();
    let unnamed = NewJob { name: None, skills: vec!["digest".into()], ..from("telegram", "111", "30m", "  remind me\nto stretch  ", "") };
    let job = f.jobs.create(unnamed).await.unwrap();
    assert!(woken(&f.wake).await, "a new job wakes the ticker, so a short delay fires on time");
    assert_eq!(job.name, "remind me to stretch", "named after its prompt, on one line");
    assert_eq!(job.repeat.times, Some(1), "a one-shot runs once");
    assert_eq!(delivery::effective(&job), "origin", "a job made in a chat reports there");
    assert_eq!(job.origin.as_ref().and_then(|o| o.thread_id.as_deref()), Some("topic-9"));
    assert_eq!(job.skills, ["digest"]);
    let next = job.next_run_at.unwrap().utc();
    let in_thirty = Utc::now() + chrono::Duration::minutes(30);
    assert!((next - in_thirty).num_seconds().abs() < 5, "due in 30 minutes: {next}");

    let shell_job = f.jobs.create(NewJob { schedule: "every 2h".into(), prompt: "p".into(), ..NewJob::default() }).await.unwrap();
    assert_eq!(
        (shell_job.repeat.times, delivery::effective(&shell_job).as_str()),
        (None, "local"),
        "recurring forever; no origin, kept local"
    );
}

#[tokio::test]
async fn an_edit_changes_what_it_names_and_a_refused_edit_nothing() {
    let f = fixture();
    let alice = user("telegram", "111");
    let job = f.jobs.create(NewJob { repeat: Some(3), ..from("telegram", "111", "every 1h", "check the build", "build") }).await.unwrap();
    woken(&f.wake).await;

    let edit = JobEdit {
        schedule: Some("0 9 * * mon-fri".into()),
        deliver: Some("telegram, discord:555".into()),
        add_skills: vec!["digest".into()],
        repeat: Some(0),
        ..JobEdit::default()
    };
    let edited = f.jobs.edit(&alice, &job.id, edit).await.unwrap();
    assert!(woken(&f.wake).await, "a change wakes the ticker");
    assert!(matches!(&edited.schedule.kind, ScheduleKind::Cron { expr } if expr == "0 9 * * mon-fri"));
    assert_eq!(edited.schedule_display, "0 9 * * mon-fri");
    let next = edited.next_run_at.unwrap().utc();
    assert_eq!(next.format("%H:%M").to_string(), "09:00", "the next run follows the new schedule");
    assert_eq!(
        (edited.deliver.as_str(), edited.repeat.times, edited.skills.clone()),
        ("telegram, discord:555", None, vec!["digest".to_string()])
    );

    let bad = JobEdit { schedule: Some("2h".into()), prompt: Some("hermes gateway stop".into()), ..JobEdit::default() };
    let refused = f.jobs.edit(&alice, "build", bad).await.unwrap_err();
    assert!(matches!(&refused, ManageError::Invalid(invalid) if invalid.to_string().contains("may not stop or restart")), "{refused}");
    let kept = f.jobs.find(&alice, "build").await.unwrap();
    assert_eq!(
        (kept.prompt.as_str(), kept.schedule_display.as_str()),
        ("check the build", "0 9 * * mon-fri"),
        "nothing of a refused edit is saved"
    );

    let removed = JobEdit { remove_skills: vec!["digest".into()], ..JobEdit::default() };
    assert!(f.jobs.edit(&alice, "build", removed).await.unwrap().skills.is_empty());
}

/// Refuses the jobs of one user, as a revoked allowlist entry would.
struct Revoked(&'static str);

impl crate::cron::owner::OwnerCheck for Revoked {
    fn refusal(&self, job: &Job) -> Option<String> {
        let user = job.origin.as_ref()?.user_id.clone()?;
        (user == self.0).then(|| crate::cron::owner::revoked(&format!("telegram:{user}"), "removed from the allowlist"))
    }
}

#[tokio::test]
async fn a_job_paused_for_its_owner_is_resumed_only_by_an_admin_and_only_once_they_are_allowed() {
    let f = fixture();
    let job = f.jobs.create(from("telegram", "111", "every 1h", "alice's digest", "alice-digest")).await.unwrap();
    let reason = crate::cron::owner::revoked("telegram:111", "removed from the allowlist");
    f.jobs.store().pause(&job.id, Some(reason.clone()), Utc::now()).unwrap();
    let listed = describe(&f.jobs.find(&Actor::shell(), &job.id).await.unwrap(), f.jobs.zone());
    assert!(listed.contains(&format!("(paused: {reason})")), "the listing says why: {listed}");

    let refused = f.jobs.run_now(&Actor::shell(), &job.id).await.unwrap_err().to_string();
    assert!(refused.contains("is paused") && refused.contains("no longer allowed") && refused.contains("resume"), "{refused}");
    let refused = f.jobs.resume(&user("telegram", "111"), &job.id).await.unwrap_err().to_string();
    assert!(refused.contains("only an admin can resume it"), "{refused}");

    let still_revoked = f.jobs.clone().with_owner_check(Arc::new(Revoked("111")));
    let refused = still_revoked.resume(&Actor::shell(), &job.id).await.unwrap_err().to_string();
    assert!(refused.contains("stays paused") && refused.contains("telegram:111"), "{refused}");
    assert!(!f.jobs.find(&Actor::shell(), &job.id).await.unwrap().enabled, "a refused resume changes nothing");

    let allowed_again = f.jobs.clone().with_owner_check(Arc::new(Revoked("someone else")));
    let resumed = allowed_again.resume(&Actor::shell(), &job.id).await.unwrap();
    assert!(resumed.enabled && resumed.paused_reason.is_none(), "{resumed:?}");
    // A pause by hand stays the owner's to lift.
    f.jobs.pause(&user("telegram", "111"), &job.id).await.unwrap();
    f.jobs.resume(&user("telegram", "111"), &job.id).await.unwrap();
}

#[test]
fn invalid_jobs_are_worded_as_before_the_errors_were_typed() {
    let (name, reason) = ("digest".to_string(), "owner telegram:111 is no longer allowed".to_string());
    let cases = [
        (Invalid::NoPrompt, "the job needs a prompt (what the agent should do at each run)".to_string()),
        (Invalid::NoAgentNoScript, "a job without an agent (no_agent) needs a script from HERMES_HOME/scripts".into()),
        (Invalid::UnknownSkill { name: "news".into() }, "there is no skill named 'news' (see the skills_list tool or HERMES_HOME/skills)".into()),
        (
            Invalid::OwnerPauseNeedsAdmin { name: name.clone(), reason: reason.clone() },
            format!("⛔ 'digest' was paused because its {reason}; only an admin can resume it"),
        ),
        (
            Invalid::OwnerStillRefused { name: name.clone(), why: "they are not allowed".into() },
            "'digest' stays paused: they are not allowed. Allow them again (the platform's allowlist, or `hermes pairing approve`) and resume it then, or remove the job".into(),
        ),
        (
            Invalid::PausedForOwner { name, reason: reason.clone() },
            format!("'digest' is paused: its {reason}. An admin resumes it (`/cron resume` or `hermes cron resume`) once its owner is allowed again"),
        ),
    ];
    for (error, text) in cases {
        assert_eq!(ManageError::from(error).to_string(), text);
    }
}
