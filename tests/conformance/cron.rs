//! Scheduled jobs end to end: the real gateway and `hermes cron` processes, the fake Telegram
//! (and Discord) and the scripted model. What must hold: a job added in a forum topic answers in
//! that topic, on schedule and on `/cron run`; pause stops it; a failure is posted; `[SILENT]`
//! posts nothing but keeps the output; `deliver: all` reaches each home channel once; with
//! the gateway and `hermes cron tick` processes racing on one home, every occurrence runs and is
//! delivered exactly once; `hermes cron run` from the shell reaches Matrix (real Synapse) through
//! the running gateway, or through the outbox once the gateway starts; and a job whose owner was
//! taken off the allowlist is paused with the reason instead of run.

use crate::discord::DiscordPeer;
use crate::matrix_peer::MatrixPeer;
use crate::peer::{Chat, ChatPeer};
use crate::suite::{Run, launch_with, settle};
use crate::support::{Setup, eventually};
use crate::telegram::{GROUP, TelegramPeer};
use hermes_fakes::telegram::TgUser;
use hermes_fakes::{FakeLlm, Reply};
use serde_json::json;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const OWNER: i64 = 5001;
const TOPIC: i64 = 11;
/// A group the bot is in, made the Telegram home channel.
const HOME_GROUP: i64 = -100_777;
/// Hermes' cron instruction starts every scheduled run's prompt.
const CRON_MARK: &str = "You are running as a scheduled cron job";

fn owner() -> TgUser {
    TgUser::named(OWNER, "Owner", None)
}

fn topic() -> Chat {
    Chat { chat_id: GROUP.to_string(), thread_id: Some(TOPIC.to_string()) }
}

/// Send `/cron …` (or any command) in the forum topic, addressed to the bot.
fn in_topic(run: &Run<TelegramPeer>, command: &str) {
    let (name, rest) = command.split_once(' ').unwrap_or((command, ""));
    let text = format!("{name}@{} {rest}", run.peer.fake.bot_username());
    run.peer.fake.topic_message(GROUP, TOPIC, &owner(), text.trim());
}

fn wrapped(run: &Run<TelegramPeer>, name: &str) -> usize {
    run.peer.posted(&topic()).iter().filter(|m| m.text.starts_with(&format!("Cronjob Response: {name}\n"))).count()
}

fn jobs(home: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(home.join("cron/jobs.json")).unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| v["jobs"].as_array().cloned()).unwrap_or_default()
}

fn job_id(home: &Path, name: &str) -> String {
    jobs(home)
        .iter()
        .find(|j| j["name"] == name)
        .and_then(|j| j["id"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no job {name}"))
}

fn cron_requests(llm: &FakeLlm, prompt: &str) -> usize {
    llm.requests().iter().filter(|r| r.last_user_text().is_some_and(|t| t.contains(CRON_MARK) && t.contains(prompt))).count()
}

async fn wait_until(run: &Run<TelegramPeer>, what: &str, timeout: Duration, check: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        let posted: Vec<String> = run.peer.posted(&topic()).into_iter().map(|m| m.text).collect();
        assert!(Instant::now() < deadline, "timed out waiting for {what}; posted: {posted:#?}\n--- log ---\n{}", run.gateway.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_added_in_a_topic_answers_there_on_schedule_and_on_demand_until_paused() {
    let run = launch_with::<TelegramPeer>("", &[("TELEGRAM_ALLOWED_USERS", &OWNER.to_string())]).await;
    let home = run._setup.home.path().to_path_buf();
    in_topic(&run, "/cron add every 1m say hi --name ping");
    run.wait(&topic(), "the job's confirmation", |p| p.iter().any(|m| m.text.contains("Cron job 'ping' created"))).await;
    let created = Instant::now();
    in_topic(&run, "/cron list");
    run.wait(&topic(), "the listing", |p| {
        p.iter().any(|m| m.text.contains("Cron jobs") && m.text.contains("ping") && m.text.contains("every 1m"))
    })
    .await;

    // On demand: at once, not at the next minute.
    run.llm.push(Reply::text("hi from the schedule"));
    in_topic(&run, "/cron run ping");
    wait_until(&run, "the on-demand run", Duration::from_secs(20), || wrapped(&run, "ping") == 1).await;
    assert!(created.elapsed() < Duration::from_secs(45), "ran on demand, not on the minute");
    let answer = run.peer.posted(&topic()).into_iter().find(|m| m.text.starts_with("Cronjob Response: ping")).unwrap().text;
    let id = job_id(&home, "ping");
    assert!(answer.contains(&format!("(job_id: {id})")) && answer.contains("hi from the schedule"), "{answer}");
    assert!(answer.ends_with("(e.g. \"stop reminder ping\")."), "{answer}");
    let asked = run.llm.requests().last().and_then(|r| r.last_user_text()).unwrap_or_default();
    assert!(asked.contains(CRON_MARK) && asked.ends_with("say hi"), "the run asked the job's prompt: {asked}");

    // On schedule: the next occurrence, a minute later, in the same topic.
    wait_until(&run, "the scheduled run", Duration::from_secs(100), || wrapped(&run, "ping") == 2).await;
    in_topic(&run, "/cron pause ping");
    run.wait(&topic(), "the pause", |p| p.iter().any(|m| m.text.contains("Paused 'ping'"))).await;
    let requests = cron_requests(&run.llm, "say hi");
    tokio::time::sleep(Duration::from_secs(75)).await;
    assert_eq!(cron_requests(&run.llm, "say hi"), requests, "a paused job does not run");
    assert_eq!(wrapped(&run, "ping"), 2, "and posts nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_posted_and_silence_posts_nothing_but_keeps_the_output() {
    let run = launch_with::<TelegramPeer>("", &[("TELEGRAM_ALLOWED_USERS", &OWNER.to_string())]).await;
    let home = run._setup.home.path().to_path_buf();
    in_topic(&run, "/cron add every 1h check the build --name broken");
    in_topic(&run, "/cron add \"0 9 * * mon-fri\" anything new? --name quiet");
    run.wait(&topic(), "both jobs", |p| p.iter().filter(|m| m.text.contains("created")).count() == 2).await;

    run.llm.push(Reply::Error { status: 400, body: json!({"error": {"message": "model not found"}}), retry_after_secs: None });
    in_topic(&run, "/cron run broken");
    run.wait(&topic(), "the failure", |p| p.iter().any(|m| m.text.starts_with("⚠️ Cron 'broken' failed:"))).await;
    assert!(eventually(Duration::from_secs(5), || jobs(&home).iter().any(|j| j["name"] == "broken" && j["last_status"] == "error")).await);

    run.llm.push(Reply::text("[SILENT]"));
    in_topic(&run, "/cron run quiet");
    let quiet = job_id(&home, "quiet");
    let outputs = home.join("cron/output").join(&quiet);
    let written = || std::fs::read_dir(&outputs).map(|d| d.count()).unwrap_or(0) == 1;
    assert!(eventually(Duration::from_secs(20), written).await, "the silent run wrote its output file\n{}", run.gateway.log_text());
    let file = std::fs::read_dir(&outputs).unwrap().next().unwrap().unwrap().path();
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.starts_with("# Cron Job: quiet") && text.contains("## Response\n\n[SILENT]"), "{text}");
    settle().await;
    assert!(!run.peer.posted(&topic()).iter().any(|m| m.text.contains("Cronjob Response: quiet")), "silence posted nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliver_all_reaches_each_home_channel_once_and_status_shows_them() {
    let llm = FakeLlm::start().await;
    let telegram = TelegramPeer::start().await;
    let discord = DiscordPeer::start().await;
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    let platforms = format!("{}{}", telegram.configure(&mut setup), discord.configure(&mut setup));
    setup.write_config(&format!("platforms:\n{platforms}"));
    let gateway = setup.start().await;
    let tg_home = telegram.dm(1, "/sethome").await;
    let dc_home = discord.dm(1, "/sethome").await;
    let homed = |peer_posted: Vec<crate::peer::Posted>| peer_posted.iter().any(|m| m.text.contains("Home channel for"));
    assert!(
        eventually(Duration::from_secs(20), || homed(telegram.posted(&tg_home)) && homed(discord.posted(&dc_home))).await,
        "{}",
        gateway.log_text()
    );
    let env = std::fs::read_to_string(setup.home.path().join(".env")).unwrap();
    assert!(env.contains(&format!("TELEGRAM_HOME_CHANNEL={}", tg_home.chat_id)) && env.contains("DISCORD_HOME_CHANNEL="), "{env}");

    telegram.dm(1, "/cron add every 1h report the weather --deliver all --name everywhere").await;
    assert!(
        eventually(Duration::from_secs(20), || telegram.posted(&tg_home).iter().any(|m| m.text.contains("'everywhere' created"))).await
    );
    llm.push(Reply::text("sunny"));
    telegram.dm(1, "/cron run everywhere").await;
    let delivered = |posted: Vec<crate::peer::Posted>| posted.iter().filter(|m| m.text.starts_with("Cronjob Response: everywhere")).count();
    assert!(
        eventually(Duration::from_secs(20), || delivered(telegram.posted(&tg_home)) == 1 && delivered(discord.posted(&dc_home)) == 1).await,
        "{}",
        gateway.log_text()
    );
    settle().await;
    settle().await;
    assert_eq!((delivered(telegram.posted(&tg_home)), delivered(discord.posted(&dc_home))), (1, 1), "once each");
    assert_eq!(cron_requests(&llm, "report the weather"), 1, "one run for both deliveries");

    telegram.dm(1, "/status").await;
    let status = || telegram.posted(&tg_home).into_iter().find(|m| m.text.contains("Home channels:")).map(|m| m.text);
    assert!(eventually(Duration::from_secs(20), || status().is_some()).await);
    let status = status().unwrap();
    // Telegram shows the rendered text: the Markdown's bold and code marks are gone.
    assert!(
        status.contains(&format!("telegram {}", tg_home.chat_id)) && status.contains(&format!("discord {}", dc_home.chat_id)),
        "{status}"
    );
    assert!(status.contains("Cron ticker: firing"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_and_racing_tick_processes_run_and_deliver_each_occurrence_once() {
    let llm = FakeLlm::start().await;
    let telegram = TelegramPeer::start().await;
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    let platforms = telegram.configure(&mut setup);
    telegram.fake.group(HOME_GROUP, "ops", false);
    setup.set("TELEGRAM_HOME_CHANNEL", &HOME_GROUP.to_string());
    setup.write_config(&format!("platforms:\n{platforms}"));
    // Every minute on the minute: each occurrence's time is known, so a missed one shows.
    let (status, out, err) = setup.run(&["cron", "create", "* * * * *", "count the racers", "--name", "racer", "--deliver", "telegram"]);
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("warning: no gateway is ticking"), "creating a job with no ticker warns: {out}");
    let first = next_run(setup.home.path(), "racer");
    let gateway = setup.start().await;

    // Three `hermes cron tick` processes at once, again and again for three minutes: all three
    // are spawned before any is waited for, so they overlap with each other and with the
    // gateway's own ticks.
    let started = Instant::now();
    let (mut rounds, mut handed) = (0, 0);
    while started.elapsed() < Duration::from_secs(185) {
        let ticks: Vec<std::process::Child> = (0..3)
            .map(|_| {
                setup.command(&["cron", "tick"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn hermes cron tick")
            })
            .collect();
        for tick in ticks {
            let tick = tokio::task::block_in_place(|| tick.wait_with_output()).unwrap();
            let out = String::from_utf8_lossy(&tick.stdout).into_owned();
            assert!(tick.status.success(), "{out}{}", String::from_utf8_lossy(&tick.stderr));
            handed += usize::from(out.contains("handed to the running gateway"));
        }
        rounds += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(handed > rounds, "the ticks handed their work to the running gateway ({handed} of {} ticks)", rounds * 3);
    // No occurrence starts from here on; the last one may still be running: wait for its record.
    let (status, out, err) = setup.run(&["cron", "pause", "racer"]);
    assert!(status.success(), "{out}{err}");
    let racer = job_id(setup.home.path(), "racer");
    let idle = || jobs(setup.home.path()).iter().any(|j| j["id"] == racer.as_str() && j.get("run_claim").is_none_or(|c| c.is_null()));
    assert!(eventually(Duration::from_secs(30), idle).await, "{}", gateway.log_text());
    settle().await;
    let runs = cron_requests(&llm, "count the racers");
    let delivered = telegram.fake.sent_to(HOME_GROUP).iter().filter(|m| m.text.starts_with("Cronjob Response: racer")).count();
    let home = setup.home.path();
    let outputs = std::fs::read_dir(home.join("cron/output").join(job_id(home, "racer"))).map(|d| d.count()).unwrap_or(0);
    assert!(runs >= 2, "three minutes hold at least two occurrences; ran {runs}\n{}", gateway.log_text());
    assert_eq!((delivered, outputs), (runs, runs), "each run delivered once and recorded once");
    // One stored session per occurrence (`cron_<job>_<time>`), each asked once.
    let db = crate::support::open_db(&setup.state_db());
    let sessions = crate::support::count(&db, "SELECT count(DISTINCT session_key) FROM sessions WHERE platform = 'cron'", []);
    let user_messages = crate::support::count(
        &db,
        "SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id WHERE s.platform = 'cron' AND m.role = 'user'",
        [],
    );
    assert_eq!((sessions, user_messages), (runs as i64, runs as i64), "one session and one question per occurrence");
    // None missed: the runs are the occurrences from the first one, each minute, up to the one
    // before the job's next run.
    let mut ran = db
        .prepare("SELECT session_key FROM sessions WHERE platform = 'cron'")
        .unwrap()
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .map(|key| occurrence_of(&key.unwrap()))
        .collect::<Vec<_>>();
    ran.sort();
    let expected: Vec<chrono::DateTime<chrono::Utc>> = (0..runs as i64).map(|minute| first + chrono::Duration::minutes(minute)).collect();
    assert_eq!(ran, expected, "every minute from the first occurrence ran, in order, none skipped");
    assert_eq!(next_run(home, "racer"), first + chrono::Duration::minutes(runs as i64), "and none is left behind");
}

/// A job's next run, from `jobs.json`.
fn next_run(home: &Path, name: &str) -> chrono::DateTime<chrono::Utc> {
    let job = jobs(home).into_iter().find(|j| j["name"] == name).unwrap_or_else(|| panic!("no job {name}"));
    let at = job["next_run_at"].as_str().unwrap_or_else(|| panic!("{name} has no next run: {job:#}"));
    chrono::DateTime::parse_from_rfc3339(at).unwrap().to_utc()
}

/// The occurrence a cron session ran (`cron_<job>_<YYYYMMDD_HHMMSS>`, in UTC).
fn occurrence_of(session_key: &str) -> chrono::DateTime<chrono::Utc> {
    let stamp = &session_key[session_key.len() - "YYYYMMDD_HHMMSS".len()..];
    chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%d_%H%M%S").unwrap_or_else(|e| panic!("{session_key}: {e}")).and_utc()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_run_asks_nobody_and_its_flagged_command_is_denied_under_cron_mode_deny() {
    let run = launch_with::<TelegramPeer>("approvals:\n  mode: manual\n", &[("TELEGRAM_ALLOWED_USERS", &OWNER.to_string())]).await;
    let victim = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(victim.path().join("keep")).unwrap();
    in_topic(&run, "/cron add every 1h tidy the build folder --name janitor");
    run.wait(&topic(), "the job's confirmation", |p| p.iter().any(|m| m.text.contains("Cron job 'janitor' created"))).await;

    let command = format!("rm -rf {}", victim.path().join("keep").display());
    run.llm.push(Reply::ToolCalls(vec![hermes_fakes::ToolCall::new("t1", "terminal", json!({ "command": command }).to_string())]));
    run.llm.push(Reply::text("the clean-up needs approval"));
    in_topic(&run, "/cron run janitor");
    wait_until(&run, "the run's report", Duration::from_secs(20), || wrapped(&run, "janitor") == 1).await;

    assert!(victim.path().join("keep").exists(), "the flagged command did not run");
    let everything: Vec<String> = run.peer.fake.sent().into_iter().map(|m| m.text).collect();
    assert!(!everything.iter().any(|t| t.contains("requires approval")), "nobody was asked: {everything:#?}");
    let results: Vec<String> =
        run.llm.requests().iter().flat_map(|r| r.messages()).filter(|(role, _)| role == "tool").map(|(_, text)| text).collect();
    assert!(results.iter().any(|t| t.contains("scheduled job") && t.contains("cron_mode is deny")), "the agent was told why: {results:#?}");
}

/// `hermes cron status`'s first line, as the shell shows it.
fn cron_status(setup: &Setup) -> String {
    let (status, out, err) = setup.run(&["cron", "status"]);
    assert!(status.success(), "{out}{err}");
    out.lines().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_status_tells_no_ticker_from_a_failing_one_and_a_firing_one() {
    let llm = FakeLlm::start().await;
    let telegram = TelegramPeer::start().await;
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    let platforms = telegram.configure(&mut setup);
    setup.write_config(&format!("platforms:\n{platforms}"));
    let first = cron_status(&setup);
    assert!(first.starts_with("ticker: no ticker running"), "{first}");

    let gateway = setup.start().await;
    let firing = || cron_status(&setup).starts_with("ticker: firing");
    assert!(eventually(Duration::from_secs(20), firing).await, "{}\n{}", cron_status(&setup), gateway.log_text());

    // A jobs file broken by hand: the ticker stays alive, every tick fails, and status says why.
    let jobs_file = setup.home.path().join("cron/jobs.json");
    std::fs::write(&jobs_file, "{\"jobs\": [ this is not json").unwrap();
    let failing = || cron_status(&setup).starts_with("ticker: ticker alive but failing");
    assert!(eventually(Duration::from_secs(20), failing).await, "{}\n{}", cron_status(&setup), gateway.log_text());
    assert!(cron_status(&setup).contains("is not a valid cron jobs file"), "{}", cron_status(&setup));
    assert_eq!(
        std::fs::read_to_string(&jobs_file).unwrap(),
        "{\"jobs\": [ this is not json",
        "the broken file is left for the user to fix"
    );

    std::fs::write(&jobs_file, "{\"jobs\": []}").unwrap();
    assert!(eventually(Duration::from_secs(20), firing).await, "{}\n{}", cron_status(&setup), gateway.log_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_schedules_a_job_for_this_topic_and_cannot_schedule_a_gateway_restart() {
    let run = launch_with::<TelegramPeer>("", &[("TELEGRAM_ALLOWED_USERS", &OWNER.to_string())]).await;
    let home = run._setup.home.path().to_path_buf();
    let create = json!({"action": "create", "schedule": "every 1h", "prompt": "remind me to drink water", "name": "water"});
    let restart = json!({"action": "create", "schedule": "every 1d", "prompt": "run hermes gateway restart to keep it fresh"});
    run.llm.push(Reply::ToolCalls(vec![
        hermes_fakes::ToolCall::new("c1", "cronjob", create.to_string()),
        hermes_fakes::ToolCall::new("c2", "cronjob", restart.to_string()),
    ]));
    run.llm.push(Reply::text("Scheduled the water reminder; I cannot schedule restarts."));
    let text = format!("@{} remind me every hour to drink water, and restart yourself daily", run.peer.fake.bot_username());
    run.peer.fake.topic_message(GROUP, TOPIC, &owner(), &text);
    run.wait(&topic(), "the agent's answer", |p| p.iter().any(|m| m.text.contains("Scheduled the water reminder"))).await;

    let all = jobs(&home);
    assert_eq!(all.len(), 1, "only the reminder was stored: {all:#?}");
    let water = &all[0];
    assert_eq!((water["name"].as_str(), water["schedule"]["kind"].as_str()), (Some("water"), Some("interval")));
    let origin = &water["origin"];
    assert_eq!(
        (origin["platform"].as_str(), origin["chat_id"].as_str(), origin["thread_id"].as_str(), origin["user_id"].as_str()),
        (Some("telegram"), Some(GROUP.to_string().as_str()), Some(TOPIC.to_string().as_str()), Some(OWNER.to_string().as_str())),
        "the job answers in the topic it was asked in, for the user who asked"
    );
    let results: Vec<String> =
        run.llm.requests().iter().flat_map(|r| r.messages()).filter(|(role, _)| role == "tool").map(|(_, text)| text).collect();
    assert!(results.iter().any(|t| t.contains("Created 'water'")), "{results:#?}");
    assert!(results.iter().any(|t| t.contains("may not stop or restart the gateway")), "{results:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_timeout_is_stopped_and_the_failure_posted() {
    let env = [("TELEGRAM_ALLOWED_USERS", OWNER.to_string()), ("HERMES_CRON_TIMEOUT", "2".to_string())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = launch_with::<TelegramPeer>("", &env).await;
    in_topic(&run, "/cron add every 1h think very hard --name slow");
    run.wait(&topic(), "the job", |p| p.iter().any(|m| m.text.contains("'slow' created"))).await;
    run.llm.push(Reply::Hang);
    let asked = Instant::now();
    in_topic(&run, "/cron run slow");
    run.wait(&topic(), "the failure", |p| p.iter().any(|m| m.text.starts_with("⚠️ Cron 'slow' failed:") && m.text.contains("within 2 s")))
        .await;
    assert!(asked.elapsed() < Duration::from_secs(15), "stopped at its timeout, not left hanging");
    assert_eq!(wrapped(&run, "slow"), 0, "no answer was delivered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_cut_off_by_kill_9_is_reported_after_the_restart_and_never_run_twice() {
    let mut run = launch_with::<TelegramPeer>("", &[("TELEGRAM_ALLOWED_USERS", &OWNER.to_string())]).await;
    let home = run._setup.home.path().to_path_buf();
    in_topic(&run, "/cron add 2h water the plants --name plants");
    run.wait(&topic(), "the job", |p| p.iter().any(|m| m.text.contains("'plants' created"))).await;
    run.llm.push(Reply::Hang);
    in_topic(&run, "/cron run plants");
    wait_until(&run, "the run to reach the model", Duration::from_secs(20), || cron_requests(&run.llm, "water the plants") == 1).await;

    run.gateway.signal(libc::SIGKILL).await;
    run.gateway = run._setup.start().await;
    run.wait(&topic(), "the interruption report", |p| {
        p.iter().any(|m| m.text.starts_with("⚠️ Cron 'plants' failed:") && m.text.contains("interrupted"))
    })
    .await;
    settle().await;
    assert_eq!(cron_requests(&run.llm, "water the plants"), 1, "the cut-off occurrence was not run again");
    assert_eq!(wrapped(&run, "plants"), 0);
    let plants = jobs(&home).into_iter().find(|j| j["name"] == "plants").expect("kept, to show what happened");
    assert_eq!((plants["enabled"].as_bool(), plants["state"].as_str()), (Some(false), Some("error")), "{plants:#}");
}

/// The tool names a request offered the model.
fn offered_tools(request: &hermes_fakes::RecordedRequest) -> Vec<String> {
    let tools = request.body["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().filter_map(|t| t["function"]["name"].as_str().map(str::to_string)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_uses_the_jobs_model_or_the_default_and_never_the_tools_a_schedule_must_not_have() {
    let yaml = "model:\n  default: house-model\n";
    let run = launch_with::<TelegramPeer>(yaml, &[("TELEGRAM_ALLOWED_USERS", &OWNER.to_string())]).await;
    in_topic(&run, "/cron add every 1h count the stars --name stars --model star-model");
    in_topic(&run, "/cron add every 1h count the clouds --name clouds");
    run.wait(&topic(), "both jobs", |p| p.iter().filter(|m| m.text.contains("created")).count() == 2).await;
    run.llm.push(Reply::text("many stars"));
    in_topic(&run, "/cron run stars");
    wait_until(&run, "the first run", Duration::from_secs(20), || wrapped(&run, "stars") == 1).await;
    run.llm.push(Reply::text("few clouds"));
    in_topic(&run, "/cron run clouds");
    wait_until(&run, "the second run", Duration::from_secs(20), || wrapped(&run, "clouds") == 1).await;

    let asked = |prompt: &str| {
        run.llm.requests().into_iter().find(|r| r.last_user_text().is_some_and(|t| t.contains(CRON_MARK) && t.contains(prompt))).unwrap()
    };
    let (stars, clouds) = (asked("count the stars"), asked("count the clouds"));
    assert_eq!((stars.model(), clouds.model()), (Some("star-model"), Some("house-model")), "the job's model, else the default");
    let tools = offered_tools(&stars);
    assert!(tools.contains(&"terminal".to_string()), "{tools:?}");
    for never in ["cronjob", "memory", "send_message", "clarify"] {
        assert!(!tools.contains(&never.to_string()), "a scheduled run is never offered {never}: {tools:?}");
    }
}

/// `hermes <args>` without holding up the test's other tasks (the fakes answer on them).
fn shell(setup: &Setup, args: &[&str]) -> (std::process::ExitStatus, String, String) {
    tokio::task::block_in_place(|| setup.run(args))
}

/// `hermes cron run` from the shell reaches Matrix (a real Synapse), whose connection only the
/// gateway holds: with the gateway running it takes the run and delivers it; with the gateway
/// stopped the run happens in the shell, its delivery waits in the outbox, and the gateway
/// delivers it once when it starts. Each answer arrives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_run_reaches_matrix_through_the_running_gateway_or_when_it_starts_once_each() {
    let llm = FakeLlm::start().await;
    let matrix = MatrixPeer::start().await;
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    let platforms = matrix.configure(&mut setup);
    setup.write_config(&format!("platforms:\n{platforms}"));
    let mut gateway = setup.start().await;
    let room = matrix.general().await;
    let chat = Chat { chat_id: room.clone(), thread_id: None };
    let target = format!("matrix:{room}");
    let (status, out, err) = shell(&setup, &["cron", "create", "every 1h", "report the tide", "--name", "tide", "--deliver", &target]);
    assert!(status.success(), "{out}{err}");
    let answers =
        || -> Vec<String> { matrix.posted(&chat).into_iter().map(|m| m.text).filter(|t| t.contains("Cronjob Response: tide")).collect() };

    llm.push(Reply::text("high tide at noon"));
    let (status, out, err) = shell(&setup, &["cron", "run", "tide"]);
    assert!(status.success() && out.contains("handed to the running gateway") && out.contains(": it ran"), "{out}{err}");
    assert!(eventually(Duration::from_secs(30), || answers().len() == 1).await, "{:?}\n{}", answers(), gateway.log_text());
    assert!(answers()[0].contains("high tide at noon"), "{:?}", answers());

    gateway.signal(libc::SIGTERM).await;
    llm.push(Reply::text("low tide at six"));
    let (status, out, err) = shell(&setup, &["cron", "run", "tide"]);
    assert!(status.success() && out.contains("ran 'tide' here (no gateway is running): it ran"), "{out}{err}");
    assert!(out.contains("1 message(s) wait in the outbox") && out.contains("when it starts"), "{out}{err}");
    settle().await;
    assert_eq!(answers().len(), 1, "nothing reached Matrix from the shell: {:?}", answers());

    let gateway = setup.start().await;
    assert!(eventually(Duration::from_secs(60), || answers().len() == 2).await, "{:?}\n{}", answers(), gateway.log_text());
    assert!(answers()[1].contains("low tide at six"), "{:?}", answers());
    tokio::time::sleep(Duration::from_secs(16)).await; // past the courier's next sweep of the outbox
    assert_eq!(answers().len(), 2, "each answer once: {:?}", answers());
    assert_eq!(cron_requests(&llm, "report the tide"), 2, "one run each time");
}

/// The allowlist in HERMES_HOME/.env (the process environment would win over the file).
fn allow_in_env_file(setup: &Setup, users: &[u32], admin: u32) {
    let ids = |list: &[u32]| list.iter().map(|n| (1000 + n).to_string()).collect::<Vec<_>>().join(",");
    let text = format!("TELEGRAM_ALLOWED_USERS={}\nTELEGRAM_ADMIN_USERS={}\n", ids(users), ids(&[admin]));
    std::fs::write(setup.home.path().join(".env"), text).unwrap();
}

/// A user taken off the allowlist stops having their job run: at its next run the job is paused
/// with the reason (`hermes cron list` and an admin's `/cron list` show it); it is not run by
/// hand, not resumed while they are still off the list, and an admin's resume after they are
/// back makes it run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_owners_job_does_not_run_shows_paused_with_the_reason_and_runs_after_an_admin_resume() {
    let llm = FakeLlm::start().await;
    let telegram = TelegramPeer::start().await;
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    let platforms = telegram.configure(&mut setup);
    setup.env.retain(|(key, _)| key != "TELEGRAM_ALLOWED_USERS");
    setup.write_config(&format!("platforms:\n{platforms}"));
    allow_in_env_file(&setup, &[1, 2], 2);
    let mut gateway = setup.start().await;
    let owner_dm = telegram.dm(1, "/cron add every 1h check the mail --name mail").await;
    assert!(eventually(Duration::from_secs(20), || telegram.posted(&owner_dm).iter().any(|m| m.text.contains("'mail' created"))).await);

    // Taken off the list; the allowlist is read at start, so the gateway restarts.
    gateway.signal(libc::SIGTERM).await;
    allow_in_env_file(&setup, &[2], 2);
    let mut gateway = setup.start().await;
    let (status, out, err) = shell(&setup, &["cron", "run", "mail"]);
    let reason = "owner telegram:1001 is no longer allowed (removed from the allowlist)";
    assert!(!status.success() && err.contains("'mail' was not run and is paused") && err.contains(reason), "{out}{err}");
    let (status, out, err) = shell(&setup, &["cron", "list"]);
    assert!(status.success() && out.contains(&format!("(paused: {reason}")), "{out}{err}");
    let admin_dm = telegram.dm(2, "/cron list").await;
    let listed = || telegram.posted(&admin_dm).iter().any(|m| m.text.contains("mail") && m.text.contains(reason));
    assert!(eventually(Duration::from_secs(20), listed).await, "{:#?}", telegram.posted(&admin_dm));
    let (status, out, err) = shell(&setup, &["cron", "run", "mail"]);
    assert!(!status.success() && err.contains("is paused"), "not run by hand either: {out}{err}");
    let (status, out, err) = shell(&setup, &["cron", "resume", "mail"]);
    assert!(!status.success() && err.contains("stays paused") && err.contains("telegram:1001"), "{out}{err}");
    settle().await;
    assert_eq!(cron_requests(&llm, "check the mail"), 0, "the revoked owner's job never ran");

    // Back on the list (a restart reads it), the job stays paused until an admin resumes it.
    gateway.signal(libc::SIGTERM).await;
    allow_in_env_file(&setup, &[1, 2], 2);
    let gateway = setup.start().await;
    let (status, out, err) = shell(&setup, &["cron", "list"]);
    assert!(status.success() && out.contains(&format!("(paused: {reason}")), "no resume by itself: {out}{err}");
    let (status, out, err) = shell(&setup, &["cron", "resume", "mail"]);
    assert!(status.success() && out.contains("resumed 'mail'"), "{out}{err}");
    llm.push(Reply::text("2 new mails"));
    let (status, out, err) = shell(&setup, &["cron", "run", "mail"]);
    assert!(status.success() && out.contains("handed to the running gateway"), "{out}{err}");
    let delivered = || telegram.posted(&owner_dm).iter().filter(|m| m.text.starts_with("Cronjob Response: mail")).count();
    assert!(eventually(Duration::from_secs(30), || delivered() == 1).await, "{}", gateway.log_text());
    assert_eq!(cron_requests(&llm, "check the mail"), 1);
}
