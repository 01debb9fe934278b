//! The jobs store against Hermes' own files and against the failures it exists for: crashes
//! mid-run, downtime, a second process, a wedged lock holder, hand-edited records. Time is
//! always passed in.

use super::*;
use crate::cron::job::{Job, JobState, Origin, Repeat};
use crate::cron::schedule::{Schedule, ScheduleKind, Stamp, Zone};
use chrono::{DateTime, Duration as Span, Utc};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Barrier, Mutex, mpsc};
use std::time::{Duration, Instant};

const UTC: Zone = Zone::Named(chrono_tz::UTC);
const OWNER: &str = "test-host:1:0f0f";

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

fn interval(minutes: u64) -> Schedule {
    Schedule { kind: ScheduleKind::Interval { minutes }, display: format!("every {minutes}m") }
}

fn cron(expr: &str) -> Schedule {
    Schedule { kind: ScheduleKind::Cron { expr: expr.into() }, display: expr.into() }
}

fn once(run_at: DateTime<Utc>) -> Schedule {
    Schedule { kind: ScheduleKind::Once { run_at: Stamp::in_zone(run_at, UTC) }, display: format!("once at {}", UTC.show(run_at)) }
}

fn ttl() -> Span {
    Span::minutes(30)
}

fn new_store() -> (tempfile::TempDir, JobStore) {
    let home = tempfile::tempdir().unwrap();
    let store = JobStore::new(home.path().join("cron"));
    (home, store)
}

fn add(store: &JobStore, name: &str, schedule: Schedule, now: DateTime<Utc>) -> Job {
    store.create(Job::planned(name, "do the thing", schedule, now, UTC).unwrap()).unwrap()
}

fn tick(store: &JobStore, now: DateTime<Utc>) -> Due {
    store.take_due(now, UTC, OWNER, ttl()).unwrap()
}

fn finish_ok(store: &JobStore, run: &DueRun, now: DateTime<Utc>) -> Finished {
    store.finish_run(&run.job.id, run.occurrence, RunResult::default(), now, UTC).unwrap()
}

fn write_file(store: &JobStore, content: &Value) {
    std::fs::create_dir_all(store.dir()).unwrap();
    std::fs::write(store.jobs_path(), serde_json::to_vec_pretty(content).unwrap()).unwrap();
}

fn read_file(store: &JobStore) -> Value {
    serde_json::from_slice(&std::fs::read(store.jobs_path()).unwrap()).unwrap()
}

fn occurrences(due: &Due) -> Vec<DateTime<Utc>> {
    due.runs.iter().map(|run| run.occurrence).collect()
}

/// What Hermes itself writes: python isoformat stamps, null repeat, an int chat id, fields this
/// port does not model, a legacy `skill`, and one record a hand edit broke.
fn hermes_file() -> Value {
    serde_json::from_str(HERMES_JOBS_JSON).unwrap()
}

const HERMES_JOBS_JSON: &str = r#"{
  "jobs": [
    {
      "id": "a1b2c3d4e5f6",
      "name": "Morning brief",
      "prompt": "Summarise my unread mail",
      "skills": null,
      "skill": "inbox-digest",
      "model": null,
      "provider": null,
      "provider_snapshot": "openrouter",
      "model_snapshot": "anthropic/claude-sonnet-4",
      "base_url": null,
      "script": null,
      "no_agent": false,
      "monitor_script": null,
      "monitor_state": null,
      "context_from": ["0f9e8d7c6b5a"],
      "schedule": {"kind": "cron", "expr": "0 9 * * *", "display": "0 9 * * *"},
      "schedule_display": "0 9 * * *",
      "repeat": {"times": null, "completed": 3},
      "enabled": true,
      "state": "scheduled",
      "paused_at": null,
      "paused_reason": null,
      "created_at": "2026-02-27T21:14:03.512877+01:00",
      "next_run_at": "2026-03-02T09:00:00+01:00",
      "last_run_at": "2026-03-01T09:00:41.204518+01:00",
      "last_status": "ok",
      "last_error": null,
      "last_delivery_error": null,
      "last_delivery_unverified": null,
      "failure_streak": 0,
      "deliver": "origin",
      "origin": {
        "platform": "telegram",
        "chat_id": -1001234567890,
        "chat_name": "Family",
        "chat_type": "group",
        "user_id": 987654321,
        "user_name": "ana",
        "thread_id": "42",
        "scope_id": null,
        "is_bot": false
      },
      "enabled_toolsets": null,
      "workdir": null,
      "fire_claim": null,
      "last_dispatch": {
        "scheduled_at": "2026-03-01T09:00:00+01:00",
        "dispatched_at": "2026-03-01T09:00:02.117340+01:00",
        "lateness_seconds": 2.1,
        "kind": "on_time"
      }
    },
    {
      "id": "0f9e8d7c6b5a",
      "name": "Dentist",
      "prompt": "Remind me about the dentist",
      "skills": [],
      "skill": null,
      "schedule": {"kind": "once", "run_at": "2026-03-05T14:30:00+00:00", "display": "once at 2026-03-05 14:30"},
      "schedule_display": "once at 2026-03-05 14:30",
      "repeat": {"times": 1, "completed": 0},
      "enabled": true,
      "state": "scheduled",
      "created_at": "2026-03-01T10:02:11.000412+00:00",
      "next_run_at": "2026-03-05T14:30:00+00:00",
      "deliver": "telegram:-1001234567890:42",
      "attach_to_session": true
    },
    {
      "id": "deadbeef0001",
      "name": "hand edited",
      "schedule": "every 5m",
      "x-note": "kept as is"
    }
  ],
  "updated_at": "2026-03-01T10:02:11.004431+00:00"
}"#;

#[test]
fn a_hermes_file_loads_as_is() {
    let (_home, store) = new_store();
    write_file(&store, &hermes_file());
    let listing = store.list().unwrap();
    assert_eq!(listing.jobs.len(), 2);
    assert_eq!(listing.skipped.len(), 1);
    assert_eq!((listing.skipped[0].index, listing.skipped[0].id.as_deref()), (2, Some("deadbeef0001")));
    assert!(listing.skipped[0].reason.contains("schedule"), "{}", listing.skipped[0].reason);

    let brief = &listing.jobs[0];
    assert_eq!(brief.skills, vec!["inbox-digest".to_string()]);
    assert_eq!(brief.repeat, Repeat { times: None, completed: 3 });
    assert_eq!(brief.next_run_at.unwrap().utc(), at("2026-03-02T08:00:00Z"));
    assert_eq!(brief.context_from(), vec!["0f9e8d7c6b5a".to_string()]);
    assert_eq!(brief.extra["model_snapshot"], json!("anthropic/claude-sonnet-4"));
    let origin = brief.origin.as_ref().unwrap();
    assert_eq!(
        (origin.chat_id.as_str(), origin.user_id.as_deref(), origin.thread_id.as_deref()),
        ("-1001234567890", Some("987654321"), Some("42"))
    );
    assert!(brief.owned_by("Telegram", "987654321") && !brief.owned_by("discord", "987654321"));
    let dentist = &listing.jobs[1];
    assert_eq!((dentist.repeat.times, dentist.attach_to_session, dentist.skills.len()), (Some(1), Some(true), 0));
}

#[test]
fn an_unrelated_edit_keeps_unknown_fields_and_broken_records_as_they_were() {
    let (_home, store) = new_store();
    let original = hermes_file();
    write_file(&store, &original);
    store.pause("dentist", Some("away".into()), at("2026-03-01T12:00:00Z")).unwrap();

    let rewritten = read_file(&store);
    let jobs = rewritten["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3);
    assert_eq!(jobs[2], original["jobs"][2], "the broken record is written back exactly, in its place");
    // The untouched job is the same JSON, but for the legacy skill now also listed in `skills`
    // and the numeric ids read as text.
    let mut expected = original["jobs"][0].clone();
    expected["skills"] = json!(["inbox-digest"]);
    expected["origin"]["chat_id"] = json!("-1001234567890");
    expected["origin"]["user_id"] = json!("987654321");
    assert_eq!(jobs[0], expected);
    assert_eq!(jobs[1]["state"], json!("paused"));
    assert_eq!(jobs[1]["created_at"], json!("2026-03-01T10:02:11.000412+00:00"));
    assert!(rewritten["updated_at"].is_string());
}

#[test]
fn a_bare_list_is_read_and_rewritten_as_an_object() {
    let (_home, store) = new_store();
    let job = Job::planned("digest", "p", interval(30), at("2026-03-01T10:00:00Z"), UTC).unwrap();
    write_file(&store, &json!([job.to_record().unwrap()]));
    assert_eq!(store.list().unwrap().jobs[0].id, job.id);
    assert!(read_file(&store).is_array(), "reading alone does not write");

    assert!(tick(&store, at("2026-03-01T10:05:00Z")).runs.is_empty());
    let file = read_file(&store);
    assert_eq!(file["jobs"][0]["id"], json!(job.id));
    assert!(file["updated_at"].is_string());
}

#[test]
fn broken_records_are_reported_and_skipped_while_their_siblings_run() {
    let (_home, store) = new_store();
    let now = at("2026-03-01T10:00:00Z");
    let good = Job::planned("good", "p", interval(1), now - Span::minutes(5), UTC).unwrap();
    let broken = [
        json!(42),
        json!({"name": "no id", "schedule": {"kind": "interval", "minutes": 5}}),
        json!({"id": "s1", "schedule": "every 5m"}),
        json!({"id": "t1", "schedule": {"kind": "interval", "minutes": 5}, "next_run_at": "tomorrow"}),
        json!({"id": "k1", "schedule": {"kind": "weekly"}}),
        json!({"id": "../x", "schedule": {"kind": "interval", "minutes": 5}}),
        good.to_record().unwrap(),
    ];
    let mut records = vec![good.to_record().unwrap()];
    records.extend(broken.iter().cloned());
    write_file(&store, &json!({ "jobs": records }));

    let listing = store.list().unwrap();
    assert_eq!(listing.jobs.len(), 1);
    assert_eq!(listing.skipped.iter().map(|s| s.index).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5, 6, 7]);
    assert!(listing.skipped[3].reason.contains("tomorrow"), "{:?}", listing.skipped[3]);
    assert!(listing.skipped[6].reason.contains("same id"), "{:?}", listing.skipped[6]);

    let due = tick(&store, now);
    assert_eq!(due.runs.len(), 1);
    assert_eq!(due.runs[0].job.id, good.id);
    let file = read_file(&store);
    assert_eq!(file["jobs"].as_array().unwrap()[1..], broken[..], "kept in order, unchanged");
}

#[test]
fn a_file_that_is_not_json_fails_clearly_and_is_never_overwritten() {
    let (_home, store) = new_store();
    std::fs::create_dir_all(store.dir()).unwrap();
    std::fs::write(store.jobs_path(), b"{\"jobs\": [").unwrap();
    let error = store.list().unwrap_err();
    assert!(matches!(error, JobStoreError::Corrupt { .. }));
    let text = error.to_string();
    assert!(text.contains("jobs.json") && text.contains("EOF") && text.contains("left as it is"), "{text}");

    let job = Job::planned("x", "p", interval(5), at("2026-03-01T10:00:00Z"), UTC).unwrap();
    assert!(matches!(store.create(job), Err(JobStoreError::Corrupt { .. })));
    assert!(matches!(store.take_due(at("2026-03-01T10:00:00Z"), UTC, OWNER, ttl()), Err(JobStoreError::Corrupt { .. })));
    assert_eq!(std::fs::read(store.jobs_path()).unwrap(), b"{\"jobs\": [");

    std::fs::write(store.jobs_path(), b"\"jobs\"").unwrap();
    assert!(store.list().unwrap_err().to_string().contains("found a string"));
}

#[test]
fn the_file_is_owner_only_in_an_owner_only_folder() {
    let (_home, store) = new_store();
    add(&store, "x", interval(5), at("2026-03-01T10:00:00Z"));
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(store.dir()), 0o700);
    assert_eq!(mode(&store.jobs_path()), 0o600);
    assert_eq!(mode(&store.dir().join(".jobs.lock")), 0o600);

    std::fs::set_permissions(store.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    store.pause("x", None, at("2026-03-01T10:01:00Z")).unwrap();
    assert_eq!(mode(store.dir()), 0o700, "a folder left open is closed again");
}

#[test]
fn the_lock_file_excludes_another_holder_until_it_lets_go() {
    let (_home, store) = new_store();
    std::fs::create_dir_all(store.dir()).unwrap();
    let holder = File::create(store.dir().join(".jobs.lock")).unwrap();
    holder.lock().unwrap();

    let (ran, ran_rx) = mpsc::channel();
    let worker = {
        let store = store.clone();
        std::thread::spawn(move || store.update(|jobs| ran.send(jobs.len()).unwrap()).unwrap())
    };
    assert!(ran_rx.recv_timeout(Duration::from_millis(300)).is_err(), "update must wait while another process holds the lock");
    holder.unlock().unwrap();
    assert_eq!(ran_rx.recv_timeout(Duration::from_secs(10)).unwrap(), 0);
    worker.join().unwrap();
}

#[test]
fn a_lock_held_too_long_is_given_up_after_the_bounded_wait() {
    let home = tempfile::tempdir().unwrap();
    let wait = Duration::from_millis(200);
    let store = JobStore::with_lock_wait(home.path().join("cron"), wait);
    std::fs::create_dir_all(store.dir()).unwrap();
    let holder = File::create(store.dir().join(".jobs.lock")).unwrap();
    holder.lock().unwrap();

    let started = Instant::now();
    let job = add(&store, "still works", interval(5), at("2026-03-01T10:00:00Z"));
    assert!(started.elapsed() >= wait, "it waited for the holder first");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(store.find(&job.id).unwrap().name, "still works");
}

#[test]
fn jobs_are_found_by_id_or_by_name_in_any_case() {
    let (_home, store) = new_store();
    let now = at("2026-03-01T10:00:00Z");
    let digest = add(&store, "Daily Digest", interval(60), now);
    let first = add(&store, "Standup", interval(60), now);
    let second = add(&store, "standup", interval(60), now);
    // A job whose *name* is another job's id: the id wins.
    let decoy = add(&store, &digest.id, interval(60), now);

    assert_eq!(store.find(&digest.id).unwrap().id, digest.id);
    assert_eq!(store.find(&decoy.id).unwrap().id, decoy.id);
    assert_eq!(store.find("daily digest").unwrap().id, digest.id);
    assert_eq!(store.find(" DAILY DIGEST ").unwrap().id, digest.id);
    match store.find("STANDUP") {
        Err(error @ JobStoreError::Ambiguous { .. }) => {
            let text = error.to_string();
            assert!(text.contains(&first.id) && text.contains(&second.id) && text.contains("use the job's id"), "{text}");
        }
        other => panic!("expected an ambiguous name, got {other:?}"),
    }
    let missing = store.find("nope").unwrap_err();
    assert!(matches!(missing, JobStoreError::NotFound { .. }) && missing.to_string().contains("'nope'"));
    assert!(matches!(store.find(""), Err(JobStoreError::NotFound { .. })));
    assert!(matches!(store.create(digest.clone()), Err(JobStoreError::DuplicateId { .. })));
    assert_eq!(store.remove("daily digest").unwrap().id, digest.id);
    assert_eq!(store.list().unwrap().jobs.len(), 3);
}

#[test]
fn new_jobs_get_hermes_ids_and_defaults() {
    let now = at("2026-03-01T10:00:00Z");
    let job = Job::planned("", "Summarise the news of the day in three short bullet points, please", interval(30), now, UTC).unwrap();
    assert!(job.id.len() == 12 && job.id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{}", job.id);
    assert_eq!(job.name.chars().count(), 50);
    assert_eq!(
        (job.repeat, job.next_run_at.unwrap().utc(), job.created_at.unwrap().utc()),
        (Repeat::default(), now + Span::minutes(30), now)
    );
    assert_eq!(Job::planned("r", "p", once(now + Span::hours(1)), now, UTC).unwrap().repeat.times, Some(1));
    assert!(matches!(Job::planned("late", "p", once(now - Span::minutes(5)), now, UTC), Err(ScheduleError::Past { .. })));
    assert!(matches!(Job::planned("never", "p", cron("0 0 30 2 *"), now, UTC), Err(ScheduleError::Invalid { .. })));

    let mut plain = Job::new(Job::new_id(), "from chat".into(), "p".into(), interval(5));
    plain.origin = Some(Origin::new("discord", "123", None));
    assert_eq!((plain.enabled, &plain.state, plain.deliver.as_str(), plain.next_run_at), (true, &JobState::Scheduled, "", None));
    assert!(!plain.owned_by("discord", "nobody"), "no user id, no owner");
}

#[test]
fn an_interval_job_runs_once_per_occurrence_however_often_the_ticker_looks() {
    let (_home, store) = new_store();
    let start = at("2026-03-01T10:00:00Z");
    add(&store, "every minute", interval(1), start);
    let mut seen = Vec::new();
    for second in (0..=600).step_by(5) {
        let now = start + Span::seconds(second);
        for _ in 0..3 {
            let due = tick(&store, now);
            for run in &due.runs {
                assert!(!run.late);
                assert!(matches!(finish_ok(&store, run, now), Finished::Scheduled { .. }));
            }
            seen.extend(occurrences(&due));
        }
    }
    let expected: Vec<_> = (1..=10).map(|minute| start + Span::minutes(minute)).collect();
    assert_eq!(seen, expected);
}

#[test]
fn after_five_hours_down_an_hourly_job_runs_once_then_resumes_its_hours() {
    let (_home, store) = new_store();
    add(&store, "hourly", cron("0 * * * *"), at("2026-03-01T09:10:00Z"));
    let first = tick(&store, at("2026-03-01T10:00:00Z"));
    assert_eq!(occurrences(&first), vec![at("2026-03-01T10:00:00Z")]);
    let finished = finish_ok(&store, &first.runs[0], at("2026-03-01T10:00:30Z"));
    assert_eq!(finished, Finished::Scheduled { next_run_at: Some(at("2026-03-01T11:00:00Z")) });

    // Down from 10:01 to 15:30: five runs missed, one run now.
    let back = tick(&store, at("2026-03-01T15:30:00Z"));
    assert_eq!(occurrences(&back), vec![at("2026-03-01T11:00:00Z")]);
    assert!(back.runs[0].late);
    assert_eq!(back.runs[0].job.next_run_at.unwrap().utc(), at("2026-03-01T16:00:00Z"));
    finish_ok(&store, &back.runs[0], at("2026-03-01T15:31:00Z"));
    assert!(tick(&store, at("2026-03-01T15:45:00Z")).runs.is_empty());
    let on_time = tick(&store, at("2026-03-01T16:00:00Z"));
    assert_eq!(occurrences(&on_time), vec![at("2026-03-01T16:00:00Z")]);
    assert!(!on_time.runs[0].late);
}

#[test]
fn a_crash_mid_run_never_runs_that_occurrence_of_a_recurring_job_again() {
    let (_home, store) = new_store();
    let job = add(&store, "hourly", cron("0 * * * *"), at("2026-03-01T09:10:00Z"));
    let taken = tick(&store, at("2026-03-01T10:00:00Z"));
    assert_eq!(taken.runs.len(), 1);
    let saved = store.find(&job.id).unwrap();
    assert_eq!(
        (saved.state, saved.next_run_at.unwrap().utc()),
        (JobState::Running, at("2026-03-01T11:00:00Z")),
        "saved before the run starts"
    );

    // The process dies here: no finish_run.
    assert!(tick(&store, at("2026-03-01T10:00:00Z")).runs.is_empty());
    let after_ttl = tick(&store, at("2026-03-01T10:31:00Z"));
    assert!(after_ttl.runs.is_empty() && after_ttl.abandoned.is_empty());
    let released = store.find(&job.id).unwrap();
    assert_eq!((released.state, released.run_claim.is_none()), (JobState::Scheduled, true));
    assert!(released.last_error.unwrap().starts_with("interrupted"));

    let next = tick(&store, at("2026-03-01T11:00:00Z"));
    assert_eq!(occurrences(&next), vec![at("2026-03-01T11:00:00Z")]);
    assert_eq!(finish_ok(&store, &taken.runs[0], at("2026-03-01T11:00:05Z")), Finished::NotClaimed, "the dead run's claim is gone");
}

#[test]
fn a_one_shot_cut_off_mid_run_is_abandoned_never_run_twice() {
    let (_home, store) = new_store();
    let job = add(&store, "reminder", once(at("2026-03-01T12:00:00Z")), at("2026-03-01T11:00:00Z"));
    let taken = tick(&store, at("2026-03-01T12:00:00Z"));
    assert_eq!(occurrences(&taken), vec![at("2026-03-01T12:00:00Z")]);

    let same_instant = tick(&store, at("2026-03-01T12:00:00Z"));
    assert!(same_instant.runs.is_empty() && same_instant.abandoned.is_empty(), "the live claim keeps it");
    let after_ttl = tick(&store, at("2026-03-01T12:31:00Z"));
    assert!(after_ttl.runs.is_empty());
    assert_eq!(after_ttl.abandoned.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), vec![job.id.as_str()]);
    let abandoned = store.find(&job.id).unwrap();
    assert_eq!((abandoned.enabled, abandoned.state, abandoned.last_status.as_deref()), (false, JobState::Error, Some("error")));
    assert_eq!(abandoned.last_error.as_deref(), Some(INTERRUPTED));

    let later = tick(&store, at("2026-03-01T13:00:00Z"));
    assert!(later.runs.is_empty() && later.abandoned.is_empty());
    assert_eq!(finish_ok(&store, &taken.runs[0], at("2026-03-01T13:00:00Z")), Finished::NotClaimed);
}

#[test]
fn a_job_asked_to_repeat_three_times_is_deleted_after_its_third_run() {
    let (_home, store) = new_store();
    let start = at("2026-03-01T10:00:00Z");
    let mut job = Job::planned("thrice", "p", interval(1), start, UTC).unwrap();
    job.repeat.times = Some(3);
    store.create(job).unwrap();
    let mut ends = Vec::new();
    for minute in 1..=5 {
        let now = start + Span::minutes(minute);
        for run in tick(&store, now).runs {
            ends.push(finish_ok(&store, &run, now));
        }
    }
    assert!(matches!(ends.as_slice(), [Finished::Scheduled { .. }, Finished::Scheduled { .. }, Finished::Removed]), "{ends:?}");
    assert!(store.list().unwrap().jobs.is_empty());
}

#[test]
fn a_one_shot_is_deleted_after_its_run_unless_it_may_run_again() {
    let (_home, store) = new_store();
    let now = at("2026-03-01T11:00:00Z");
    add(&store, "once", once(at("2026-03-01T12:00:00Z")), now);
    let mut forever = Job::planned("legacy", "p", once(at("2026-03-01T12:00:00Z")), now, UTC).unwrap();
    forever.repeat.times = None;
    let forever = store.create(forever).unwrap();

    let due = tick(&store, at("2026-03-01T12:00:10Z"));
    let ends: Vec<_> = due.runs.iter().map(|run| finish_ok(&store, run, at("2026-03-01T12:01:00Z"))).collect();
    assert_eq!(ends, vec![Finished::Removed, Finished::Completed]);
    let left = store.list().unwrap().jobs;
    assert_eq!(left.len(), 1);
    assert_eq!((left[0].id.as_str(), left[0].enabled, &left[0].state), (forever.id.as_str(), false, &JobState::Completed));
    assert_eq!(left[0].last_status.as_deref(), Some("ok"));
}

#[test]
fn a_failed_run_is_recorded_and_a_recurring_job_stays_scheduled() {
    let (_home, store) = new_store();
    let start = at("2026-03-01T10:00:00Z");
    let job = add(&store, "flaky", interval(10), start);
    let run = tick(&store, start + Span::minutes(10)).runs.remove(0);
    let result = RunResult { error: Some("provider timeout".into()), delivery_error: Some("telegram: chat not found".into()) };
    store.finish_run(&job.id, run.occurrence, result, start + Span::minutes(11), UTC).unwrap();
    let saved = store.find(&job.id).unwrap();
    assert_eq!((saved.state, saved.enabled, saved.repeat.completed), (JobState::Scheduled, true, 1));
    assert_eq!((saved.last_status.as_deref(), saved.last_error.as_deref()), (Some("error"), Some("provider timeout")));
    assert_eq!(saved.last_delivery_error.as_deref(), Some("telegram: chat not found"));
    assert!(store.record_delivery_error(&job.id, None).unwrap());
    assert_eq!(store.find(&job.id).unwrap().last_delivery_error, None);
    assert!(!store.record_delivery_error("000000000000", None).unwrap());
}

#[test]
fn resuming_a_one_shot_long_past_is_refused() {
    let (_home, store) = new_store();
    let job = add(&store, "reminder", once(at("2026-03-01T12:00:00Z")), at("2026-03-01T11:00:00Z"));
    store.pause(&job.id, Some("holiday".into()), at("2026-03-01T11:30:00Z")).unwrap();
    let paused = store.find(&job.id).unwrap();
    assert_eq!((paused.enabled, paused.state, paused.paused_reason.as_deref()), (false, JobState::Paused, Some("holiday")));
    assert!(tick(&store, at("2026-03-01T12:00:00Z")).runs.is_empty(), "a paused job does not run");

    let refused = store.resume(&job.id, at("2026-03-01T12:05:00Z"), UTC).unwrap_err();
    assert!(matches!(refused, JobStoreError::Schedule(ScheduleError::Past { .. })), "{refused:?}");
    assert!(refused.to_string().contains("120s in the past"), "{refused}");
    assert_eq!(store.find(&job.id).unwrap().state, JobState::Paused, "nothing changed");

    let resumed = store.resume(&job.id, at("2026-03-01T12:01:30Z"), UTC).unwrap();
    assert_eq!((resumed.enabled, resumed.state, resumed.paused_at), (true, JobState::Scheduled, None));
    assert_eq!(occurrences(&tick(&store, at("2026-03-01T12:01:30Z"))), vec![at("2026-03-01T12:00:00Z")]);
}

#[test]
fn resuming_a_recurring_job_counts_from_now() {
    let (_home, store) = new_store();
    let job = add(&store, "hourly", cron("0 * * * *"), at("2026-03-01T09:10:00Z"));
    store.pause(&job.id, None, at("2026-03-01T09:20:00Z")).unwrap();
    let resumed = store.resume("HOURLY", at("2026-03-01T14:20:00Z"), UTC).unwrap();
    assert_eq!(resumed.next_run_at.unwrap().utc(), at("2026-03-01T15:00:00Z"));
}

#[test]
fn run_now_runs_at_the_next_tick_and_keeps_the_schedule() {
    let (_home, store) = new_store();
    let job = add(&store, "hourly", cron("0 * * * *"), at("2026-03-01T09:10:00Z"));
    store.pause(&job.id, None, at("2026-03-01T09:15:00Z")).unwrap();
    let triggered = store.trigger_now(&job.id, at("2026-03-01T09:20:00Z")).unwrap();
    assert!(triggered.enabled && triggered.paused_at.is_none());
    assert_eq!(tick(&store, at("2026-03-01T09:19:00Z")).next_run, Some(at("2026-03-01T09:20:00Z")));

    let due = tick(&store, at("2026-03-01T09:20:01Z"));
    assert_eq!(occurrences(&due), vec![at("2026-03-01T09:20:00Z")]);
    assert_eq!(
        finish_ok(&store, &due.runs[0], at("2026-03-01T09:21:00Z")),
        Finished::Scheduled { next_run_at: Some(at("2026-03-01T10:00:00Z")) }
    );
}

#[test]
fn a_run_now_during_a_run_is_absorbed_by_that_run() {
    let (_home, store) = new_store();
    let job = add(&store, "every 10", interval(10), at("2026-03-01T10:00:00Z"));
    let run = tick(&store, at("2026-03-01T10:10:00Z")).runs.remove(0);
    store.trigger_now(&job.id, at("2026-03-01T10:12:00Z")).unwrap();
    let during = tick(&store, at("2026-03-01T10:12:00Z"));
    assert!(during.runs.is_empty(), "never the same job twice at once");
    assert_eq!(during.next_run, None, "a running job does not wake the ticker");
    let end = finish_ok(&store, &run, at("2026-03-01T10:13:00Z"));
    assert_eq!(end, Finished::Scheduled { next_run_at: Some(at("2026-03-01T10:23:00Z")) });
}

#[test]
fn a_missing_next_run_is_recovered_as_hermes_does() {
    let (_home, store) = new_store();
    let now = at("2026-03-01T10:00:00Z");
    let record = |id: &str, schedule: Schedule| {
        let mut job = Job::planned(id, "p", interval(1), now - Span::hours(3), UTC).unwrap();
        job.id = id.to_string();
        job.schedule = schedule;
        job.next_run_at = None;
        job.to_record().unwrap()
    };
    write_file(
        &store,
        &json!({"jobs": [
            record("aaaaaaaaaaa1", interval(5)),
            record("aaaaaaaaaaa2", once(now - Span::seconds(60))),
            record("aaaaaaaaaaa3", once(now - Span::hours(1))),
        ]}),
    );
    let due = tick(&store, now);
    assert_eq!(due.runs.iter().map(|r| r.job.id.as_str()).collect::<Vec<_>>(), vec!["aaaaaaaaaaa2"], "a one-shot within 120 s is re-armed");
    assert!(due.abandoned.is_empty());
    let jobs = store.list().unwrap().jobs;
    assert_eq!(jobs[0].next_run_at.unwrap().utc(), now + Span::minutes(5));
    assert_eq!((jobs[2].enabled, &jobs[2].state), (false, &JobState::Error));
    assert!(jobs[2].last_error.as_deref().unwrap().starts_with("missed"));
}

#[test]
fn a_recurring_job_whose_next_run_cannot_be_computed_stays_enabled_in_error() {
    let (_home, store) = new_store();
    let now = at("2026-03-01T10:00:00Z");
    let mut job = Job::planned("broken", "p", interval(5), now - Span::hours(1), UTC).unwrap();
    job.schedule = cron("0 0 30 2 *");
    write_file(&store, &json!({"jobs": [job.to_record().unwrap()]}));

    let first = tick(&store, now);
    assert!(first.runs.is_empty());
    let saved = store.find(&job.id).unwrap();
    assert_eq!((saved.enabled, &saved.state, saved.next_run_at), (true, &JobState::Error, None));
    assert!(saved.last_error.as_deref().unwrap().contains("0 0 30 2 *"));
    assert_eq!(first.next_run, None, "the ticker does not spin on it");
    let bytes = std::fs::read(store.jobs_path()).unwrap();
    assert!(tick(&store, now + Span::minutes(1)).runs.is_empty());
    assert_eq!(std::fs::read(store.jobs_path()).unwrap(), bytes, "nothing to write the second time");
}

#[test]
fn hermes_run_claims_are_honoured_and_future_ones_expire() {
    let (_home, store) = new_store();
    let now = at("2026-03-01T12:00:00Z");
    let claimed = |id: &str, claimed_at: DateTime<Utc>| {
        let mut job = Job::planned(id, "p", once(now - Span::minutes(1)), now - Span::hours(1), UTC).unwrap();
        job.id = id.to_string();
        let mut record = job.to_record().unwrap();
        record["run_claim"] = json!({"at": Stamp::in_zone(claimed_at, UTC).to_string(), "by": "laptop:4242"});
        record
    };
    write_file(
        &store,
        &json!({"jobs": [
            claimed("bbbbbbbbbbb1", now - Span::minutes(10)),
            claimed("bbbbbbbbbbb2", now + Span::minutes(1)),
            claimed("bbbbbbbbbbb3", now + Span::hours(2)),
        ]}),
    );
    let due = tick(&store, now);
    assert!(due.runs.is_empty());
    assert_eq!(due.abandoned.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), vec!["bbbbbbbbbbb3"], "a claim far in the future is stale");
    let later = tick(&store, now + Span::minutes(25));
    assert_eq!(later.abandoned.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), vec!["bbbbbbbbbbb1"]);
}

#[test]
fn the_earliest_next_run_counts_only_jobs_that_may_run() {
    let (_home, store) = new_store();
    let now = at("2026-03-01T10:00:00Z");
    assert_eq!(tick(&store, now).next_run, None);
    add(&store, "later", interval(30), now);
    let sooner = add(&store, "sooner", interval(10), now);
    store.pause(&sooner.id, None, now).unwrap();
    assert_eq!(tick(&store, now).next_run, Some(now + Span::minutes(30)));
}

#[test]
fn a_failed_edit_saves_nothing_and_an_id_cannot_change() {
    let (_home, store) = new_store();
    let now = at("2026-03-01T10:00:00Z");
    let job = add(&store, "digest", interval(30), now);
    let before = std::fs::read(store.jobs_path()).unwrap();
    let refused = store.edit("digest", |job| {
        job.prompt = "changed".into();
        Err(JobStoreError::InvalidJob { reason: crate::cron::job::RecordError::EmptyId })
    });
    assert!(refused.is_err());
    assert_eq!(std::fs::read(store.jobs_path()).unwrap(), before);
    let refused = store.edit("digest", |_| Err("only admins may change the model".to_string())).unwrap_err();
    assert_eq!(refused.to_string(), "only admins may change the model");
    let renamed = store.edit("digest", |job| {
        job.id = "ffffffffffff".into();
        Ok::<(), JobStoreError>(())
    });
    assert!(matches!(renamed, Err(EditError::Store(JobStoreError::IdChanged { .. }))));

    let edited = store
        .edit("digest", |job: &mut Job| {
            job.reschedule(cron("30 8 * * *"), now, UTC).map_err(JobStoreError::from)?;
            job.skills = vec!["news".into()];
            Ok::<(), JobStoreError>(())
        })
        .unwrap();
    assert_eq!((edited.id, edited.schedule_display.as_str()), (job.id, "30 8 * * *"));
    assert_eq!(edited.next_run_at.unwrap().utc(), at("2026-03-02T08:30:00Z"));
    assert_eq!(read_file(&store)["jobs"][0]["skill"], json!("news"));
}

#[test]
fn two_processes_racing_hand_out_each_occurrence_once() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("cron");
    let start = at("2026-03-01T10:00:00Z");
    let (first, second) = (JobStore::new(dir.clone()), JobStore::new(dir));
    let minutely = add(&first, "every minute", interval(1), start);
    let two = add(&first, "every two", interval(2), start);
    let reminder = add(&first, "reminder", once(start + Span::seconds(300)), start);

    let handed_out = Mutex::new(Vec::new());
    let in_step = Barrier::new(4);
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let store = if thread % 2 == 0 { first.clone() } else { second.clone() };
            let (handed_out, in_step) = (&handed_out, &in_step);
            scope.spawn(move || {
                for step in 0..200 {
                    let now = start + Span::seconds(step * 3);
                    let due = store.take_due(now, UTC, &format!("process-{}", thread % 2), ttl()).unwrap();
                    assert!(due.abandoned.is_empty());
                    for run in &due.runs {
                        handed_out.lock().unwrap().push((run.job.id.clone(), run.occurrence));
                        store.finish_run(&run.job.id, run.occurrence, RunResult::default(), now, UTC).unwrap();
                    }
                    in_step.wait();
                }
            });
        }
    });

    let handed_out = handed_out.into_inner().unwrap();
    let unique: HashSet<_> = handed_out.iter().cloned().collect();
    assert_eq!(unique.len(), handed_out.len(), "an occurrence was handed out twice: {handed_out:?}");
    let runs_of = |id: &str| {
        let mut times: Vec<_> = handed_out.iter().filter(|(job, _)| job == id).map(|(_, at)| *at).collect();
        times.sort();
        times
    };
    assert_eq!(runs_of(&minutely.id), (1..=9).map(|m| start + Span::minutes(m)).collect::<Vec<_>>());
    assert_eq!(runs_of(&two.id), (1..=4).map(|m| start + Span::minutes(2 * m)).collect::<Vec<_>>());
    assert_eq!(runs_of(&reminder.id), vec![start + Span::seconds(300)]);
}

#[test]
fn lenient_fields_from_older_writers_are_read() {
    let record = json!({
        "id": "cccccccccccc", "name": null, "prompt": null, "skills": "solo",
        "schedule": {"kind": "interval", "minutes": 15},
        "repeat": {"times": "forever"}, "enabled": 1, "state": "waiting_for_approval",
        "origin": {"platform": "discord", "chat_id": 123456789012345678_u64},
        "no_agent": null
    });
    let job = Job::from_record(&record).unwrap();
    assert_eq!((job.name.as_str(), job.skills.clone(), job.repeat), ("", vec!["solo".to_string()], Repeat::default()));
    assert_eq!((job.enabled, job.no_agent, job.state.as_str()), (true, false, "waiting_for_approval"));
    assert_eq!(job.origin.unwrap().chat_id, "123456789012345678");
    let negative = json!({"id": "dddddddddddd", "schedule": {"kind": "interval", "minutes": 15}, "repeat": {"times": -1, "completed": 2}});
    assert_eq!(Job::from_record(&negative).unwrap().repeat, Repeat { times: None, completed: 2 });
    let once_word = json!({"id": "eeeeeeeeeeee", "schedule": {"kind": "interval", "minutes": 15}, "repeat": {"times": "once"}});
    assert_eq!(Job::from_record(&once_word).unwrap().repeat.times, Some(1));
}

#[test]
fn an_origin_is_taken_from_the_message_source_in_hermes_shape() {
    use hermes_adapter::{ChatType, Platform, SessionSource};
    let mut source = SessionSource::new(Platform::new("discord"), "1234", ChatType::Thread).with_user("42").with_display_name("Ana");
    source.thread_id = Some("99".into());
    source.scope_id = Some("777".into());
    let origin = Origin::from_source(&source);
    assert_eq!(
        (origin.platform.as_str(), origin.chat_type.as_deref(), origin.user_name.as_deref()),
        ("discord", Some("thread"), Some("Ana"))
    );
    let stored = serde_json::to_value(&origin).unwrap();
    assert_eq!(
        stored,
        json!({"platform": "discord", "chat_id": "1234", "chat_type": "thread", "user_id": "42", "user_name": "Ana", "thread_id": "99", "scope_id": "777"})
    );
}

#[test]
fn due_means_runnable_and_come() {
    let now = at("2026-03-01T10:00:00Z");
    let mut job = Job::planned("j", "p", interval(5), now, UTC).unwrap();
    assert!(!job.is_due(now) && job.is_due(now + Span::minutes(5)));
    job.state = JobState::Error;
    assert!(job.is_due(now + Span::minutes(5)), "a recurring job in error still runs");
    job.enabled = false;
    assert!(!job.is_due(now + Span::minutes(5)));
}

#[test]
fn a_record_round_trips_and_context_from_takes_one_id_or_a_list() {
    let mut job = Job::for_tests("abc123", "digest");
    assert_eq!(Job::from_record(&job.to_record().unwrap()).unwrap().to_record().unwrap(), job.to_record().unwrap());
    job.extra.insert("context_from".into(), json!("f00dfeed0001"));
    assert_eq!(job.context_from(), vec!["f00dfeed0001".to_string()]);
    job.extra.insert("context_from".into(), json!(["a", " ", "b"]));
    assert_eq!(job.context_from(), vec!["a".to_string(), "b".to_string()]);
}

#[test]
fn a_claim_whose_process_is_gone_stops_counting_at_once() {
    let (_home, store) = new_store();
    let now = at("2026-03-01T12:00:00Z");
    let ours = RunClaim::owner_for_this_process();
    assert_eq!(ours, RunClaim::owner_for_this_process(), "one owner per process");
    let host = ours.split(':').next().unwrap().to_string();
    let due_at = now - Span::minutes(1);
    let claimed = |id: &str, owner: String, schedule: Schedule, occurrence: DateTime<Utc>| {
        let mut job = Job::planned(id, "p", schedule, now - Span::hours(1), UTC).unwrap();
        job.id = id.into();
        job.next_run_at = Some(Stamp::in_zone(due_at, UTC));
        job.state = JobState::Running;
        let claimed_at = Stamp::in_zone(now - Span::minutes(2), UTC);
        job.run_claim = Some(RunClaim { owner, claimed_at, occurrence: Some(Stamp::in_zone(occurrence, UTC)) });
        job.to_record().unwrap()
    };
    let no_such_pid = format!("{host}:2147483647:0123abcd");
    write_file(
        &store,
        &json!({"jobs": [
            claimed("ccccccccccc1", no_such_pid.clone(), once(due_at), due_at),
            // Hermes' shape with this process's pid: an earlier process that had the same pid.
            claimed("ccccccccccc2", format!("{host}:{}", std::process::id()), once(due_at), due_at),
            claimed("ccccccccccc3", ours, once(due_at), due_at),
            claimed("ccccccccccc4", "another-host:1:0123abcd".into(), once(due_at), due_at),
            // A recurring job whose run died: its next occurrence, already due, runs now.
            claimed("ccccccccccc5", no_such_pid, interval(5), due_at - Span::minutes(5)),
        ]}),
    );
    let due = tick(&store, now);
    assert_eq!(due.abandoned.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), vec!["ccccccccccc1", "ccccccccccc2"]);
    assert_eq!(due.runs.iter().map(|r| (r.job.id.as_str(), r.occurrence)).collect::<Vec<_>>(), vec![("ccccccccccc5", due_at)]);
    let listing = store.list().unwrap();
    assert!(listing.jobs[2].run_claim.is_some() && listing.jobs[3].run_claim.is_some(), "live or unknowable owners keep their claims");
}

#[test]
fn runs_ending_together_are_each_recorded_with_their_own_outcome() {
    let (_home, store) = new_store();
    let start = at("2026-03-01T10:00:00Z");
    let ids: Vec<String> = (0..24).map(|n| add(&store, &format!("job {n}"), interval(60), start).id).collect();
    let now = start + Span::minutes(61);
    let due = tick(&store, now);
    assert_eq!(due.runs.len(), ids.len());
    let ending = Barrier::new(due.runs.len());
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for (n, run) in due.runs.iter().enumerate() {
            let (store, ending, outcomes) = (&store, &ending, &outcomes);
            scope.spawn(move || {
                // Every third run fails: each must get its own result, not a neighbour's.
                let result = RunResult { error: (n % 3 == 0).then(|| format!("failure {n}")), delivery_error: None };
                ending.wait();
                let finished = store.finish_run(&run.job.id, run.occurrence, result, now, UTC).unwrap();
                outcomes.lock().unwrap().push(finished);
            });
        }
    });
    let outcomes = outcomes.into_inner().unwrap();
    assert!(outcomes.iter().all(|f| matches!(f, Finished::Scheduled { next_run_at: Some(_) })), "{outcomes:?}");
    let jobs = store.list().unwrap().jobs;
    for (n, run) in due.runs.iter().enumerate() {
        let job = jobs.iter().find(|j| j.id == run.job.id).unwrap();
        assert_eq!((job.repeat.completed, job.run_claim.is_none(), &job.state), (1, true, &JobState::Scheduled), "{}", job.name);
        assert_eq!(job.last_error, (n % 3 == 0).then(|| format!("failure {n}")), "{}", job.name);
    }
    // A second finish of a run already recorded changes nothing.
    assert_eq!(finish_ok(&store, &due.runs[0], now), Finished::NotClaimed);
}

/// A job made by `user` on Telegram.
fn owned(store: &JobStore, name: &str, user: &str, schedule: Schedule, now: DateTime<Utc>) -> Job {
    let mut job = Job::planned(name, "do the thing", schedule, now, UTC).unwrap();
    let mut origin = Origin::new("telegram", "chat-1", None);
    origin.user_id = Some(user.into());
    job.origin = Some(origin);
    store.create(job).unwrap()
}

#[test]
fn a_due_job_whose_owner_was_revoked_is_paused_with_the_reason_and_not_run() {
    let (_home, store) = new_store();
    let t0 = at("2026-03-01T10:00:00Z");
    owned(&store, "kept", "1", interval(5), t0);
    let gone = owned(&store, "gone", "2", interval(5), t0);
    owned(&store, "later", "2", interval(60), t0);
    let refuse = |job: &Job| {
        let user = job.origin.as_ref().and_then(|o| o.user_id.clone())?;
        (user == "2").then(|| crate::cron::owner::revoked("telegram:2", "removed from the allowlist"))
    };
    let due = store.take_due_checked(t0 + Span::minutes(5), UTC, OWNER, ttl(), &refuse).unwrap();
    assert_eq!(due.runs.iter().map(|r| r.job.name.as_str()).collect::<Vec<_>>(), ["kept"], "the allowed owner's job runs");
    assert_eq!(due.refused.iter().map(|j| j.name.as_str()).collect::<Vec<_>>(), ["gone"], "only a job that fell due is judged");
    let paused = store.find(&gone.id).unwrap();
    assert!(!paused.enabled && paused.state == JobState::Paused && paused.run_claim.is_none(), "{paused:?}");
    assert_eq!(paused.paused_reason.as_deref(), Some("owner telegram:2 is no longer allowed (removed from the allowlist)"));
    assert!(crate::cron::owner::is_owner_pause(&paused));

    // Later ticks leave it alone: it no longer runs, and is not judged again until resumed.
    let due = store.take_due_checked(t0 + Span::minutes(30), UTC, OWNER, ttl(), &refuse).unwrap();
    assert!(due.runs.iter().all(|r| r.job.name == "kept") && due.refused.is_empty(), "{:?}", due.refused);
    // Resumed (the owner allowed again), it runs at its next occurrence.
    let resumed = store.resume(&gone.id, t0 + Span::minutes(31), UTC).unwrap();
    assert!(resumed.enabled && resumed.paused_reason.is_none());
    let due = store.take_due_checked(t0 + Span::minutes(36), UTC, OWNER, ttl(), &|_| None).unwrap();
    assert!(due.runs.iter().any(|r| r.job.id == gone.id), "runs again once resumed");
}

#[test]
fn a_cut_off_one_shot_is_reported_rather_than_paused_for_its_owner() {
    let (_home, store) = new_store();
    let t0 = at("2026-03-01T10:00:00Z");
    let job = owned(&store, "once", "2", once(t0 + Span::minutes(1)), t0);
    let run = tick(&store, t0 + Span::minutes(1)).runs.pop().expect("claimed");
    assert_eq!(run.job.id, job.id);
    // Its process died; by the next look its owner was revoked too. It must not be resumable
    // into a second run: it is reported as interrupted, as any cut-off one-shot.
    let mut record: Value = serde_json::from_slice(&std::fs::read(store.jobs_path()).unwrap()).unwrap();
    record["jobs"][0]["run_claim"]["by"] = json!("gone-host:1");
    record["jobs"][0]["run_claim"]["at"] = json!("2026-03-01T08:00:00+00:00");
    write_file(&store, &record);
    let refuse = |_: &Job| Some(crate::cron::owner::revoked("telegram:2", "unpaired"));
    let due = store.take_due_checked(t0 + Span::minutes(2), UTC, OWNER, Span::minutes(30), &refuse).unwrap();
    assert_eq!((due.abandoned.len(), due.refused.len(), due.runs.len()), (1, 0, 0));
}

#[test]
fn unreadable_records_and_files_say_what_is_wrong() {
    let records = [
        (json!([]), "the record is not an object"),
        (json!({"schedule": {}}), "it has no id"),
        (json!({"id": 7, "schedule": {}}), "its id 7 is not a string"),
        (json!({"id": " ", "schedule": {}}), "its id is empty"),
        (json!({"id": "../x", "schedule": {}}), "its id '../x' is not usable as a file name"),
        (json!({"id": "abc"}), "its schedule is not an object"),
    ];
    for (record, text) in records {
        assert_eq!(Job::from_record(&record).unwrap_err().to_string(), text, "{record}");
    }
    let (_home, store) = new_store();
    for (file, reason) in
        [("{\"jobs\": 5}", "(\"jobs\" is a number, not a list)"), ("\"jobs\"", "(expected {\"jobs\": [...]}, found a string)")]
    {
        std::fs::create_dir_all(store.dir()).unwrap();
        std::fs::write(store.jobs_path(), file).unwrap();
        let error = store.list().unwrap_err().to_string();
        assert!(error.contains(reason), "{error}");
        assert!(error.ends_with("it was left as it is: repair it, or move it aside to start with no jobs"), "{error}");
    }
}
