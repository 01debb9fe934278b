//! An existing `~/.hermes` of the Python Hermes, as its own code writes it
//! (`tests/fixtures/python-hermes-home`: config.yaml with its keys, .env, cron/jobs.json,
//! memories, a skill, the pairing store), run by this gateway unchanged but for the base URLs,
//! which point at the fake Telegram and the scripted model. Its cron job fires and is delivered
//! to the chat that created it, its allowlist and its approved pairings decide who is answered,
//! and `hermes doctor` lists the keys this build does not support.

use crate::support::{Setup, eventually};
use hermes_fakes::FakeLlm;
use hermes_fakes::telegram::FakeTelegram;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/python-hermes-home");
/// TELEGRAM_ALLOWED_USERS in the fixture's .env, and the origin of its cron job.
const ALICE: i64 = 111_111_111;
/// Approved in platforms/pairing/telegram-approved.json.
const BOB: i64 = 222_222_222;
const STRANGER: i64 = 333_333_333;
const JOB_ID: &str = "5e1f0c2a9b7d";
const WAIT: Duration = Duration::from_secs(30);

/// Copy the fixture into `to` with the modes Python Hermes gives its files (git keeps none).
fn install_fixture(to: &Path) {
    copy_tree(Path::new(FIXTURE), to);
    let chmod = |rel: &str, mode: u32| std::fs::set_permissions(to.join(rel), std::fs::Permissions::from_mode(mode)).unwrap();
    chmod("", 0o700);
    for private in
        [".env", "config.yaml", "cron/jobs.json", "platforms/pairing/telegram-approved.json", "platforms/pairing/_rate_limits.json"]
    {
        chmod(private, 0o600);
    }
    for dir in ["cron", "platforms", "platforms/pairing"] {
        chmod(dir, 0o700);
    }
}

/// Python Hermes' transcript database (§3.3: `sessions`, `messages`, `state_meta`,
/// `gateway_routing`), with one session of Alice's. A binary file has no place in the fixture
/// folder, so it is written here, with the tables Python creates.
fn write_python_state_db(home: &Path) {
    let db = rusqlite::Connection::open(home.join("state.db")).unwrap();
    db.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, session_key TEXT, started_at REAL);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, role TEXT, content TEXT, timestamp REAL);
         CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT);
         CREATE TABLE gateway_routing (scope TEXT, session_key TEXT, entry_json TEXT, updated_at REAL, PRIMARY KEY (scope, session_key));
         INSERT INTO state_meta VALUES ('schema_version', '21');
         INSERT INTO sessions VALUES ('20261101_alice', 'telegram', '111111111', 'agent:main:telegram:dm:111111111', 1761955200.0);
         INSERT INTO messages (session_id, role, content, timestamp) VALUES ('20261101_alice', 'user', 'an old question', 1761955200.0);",
    )
    .unwrap();
    std::fs::set_permissions(home.join("state.db"), std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The job's next run moved to half a minute ago, written the way Python's isoformat writes it.
fn make_job_due(home: &Path) {
    let path = home.join("cron/jobs.json");
    let mut jobs: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let due = chrono::Utc::now() - chrono::Duration::seconds(30);
    jobs["jobs"][0]["next_run_at"] = due.format("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string().into();
    std::fs::write(&path, serde_json::to_vec_pretty(&jobs).unwrap()).unwrap();
}

/// The Python home with only the base URLs changed (what a user moving to a test bench would
/// set), and the API server on for the harness's health check.
fn python_home(llm: &FakeLlm, telegram: &FakeTelegram) -> Setup {
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    setup.set("TELEGRAM_API_BASE_URL", &telegram.api_url());
    install_fixture(setup.home.path());
    write_python_state_db(setup.home.path());
    setup
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_hermes_home_runs_its_cron_job_and_applies_its_allowlist_and_pairings() {
    let llm = FakeLlm::start().await;
    let telegram = FakeTelegram::start().await.unwrap();
    let setup = python_home(&llm, &telegram);
    make_job_due(setup.home.path());
    // Alice has talked to the bot before (Telegram delivers to no DM the user never opened);
    // her message waits in the bot's updates while the gateway is down.
    telegram.dm(&telegram.user(ALICE, "alice"), "hello from alice");

    let gateway = setup.start().await;

    // The cron job fires and is delivered to the chat that created it.
    let delivered =
        telegram.wait_until(WAIT, |t| t.sent_to(ALICE).iter().any(|m| m.text.starts_with("Cronjob Response: Morning joke"))).await;
    assert!(delivered, "no cron delivery: {:#?}\n{}", telegram.sent_to(ALICE), gateway.log_text());
    let cron_prompt = llm
        .requests()
        .iter()
        .filter_map(|r| r.last_user_text())
        .find(|t| t.contains("Tell me a one-line joke about the weather."))
        .unwrap_or_else(|| panic!("the job's prompt never reached the model:\n{}", gateway.log_text()));
    assert!(cron_prompt.contains("no puns about floods"), "the job's skill is loaded from skills/: {cron_prompt}");
    let completed = || -> serde_json::Value {
        let jobs: serde_json::Value = serde_json::from_slice(&std::fs::read(setup.home.path().join("cron/jobs.json")).unwrap()).unwrap();
        assert_eq!(jobs["jobs"][0]["id"], JOB_ID, "{jobs:#}");
        jobs["jobs"][0]["repeat"]["completed"].clone()
    };
    assert!(eventually(WAIT, || completed() == 13).await, "the run is not counted on the job: {}", completed());

    // The allowlisted user and the pairing-approved one are answered; a stranger is not.
    telegram.dm(&telegram.user(BOB, "bob"), "hello from bob");
    telegram.dm(&telegram.user(STRANGER, "mallory"), "hello from mallory");
    for (user, text) in [(ALICE, "hello from alice"), (BOB, "hello from bob")] {
        let answered = telegram.wait_until(WAIT, |t| t.sent_to(user).iter().any(|m| m.text.contains(&format!("echo: {text}")))).await;
        assert!(answered, "{user} was not answered: {:#?}\n{}", telegram.sent_to(user), gateway.log_text());
    }
    let asked = |needle: &str| llm.requests().iter().any(|r| r.last_user_text().is_some_and(|t| t.contains(needle)));
    assert!(!eventually(Duration::from_secs(2), || asked("hello from mallory")).await, "a stranger's message reached the model");
    assert!(telegram.sent_to(STRANGER).iter().all(|m| !m.text.contains("echo:")), "{:#?}", telegram.sent_to(STRANGER));

    // provider: openrouter takes its key from OPENROUTER_API_KEY in Python's .env (over the
    // OPENAI_API_KEY the harness exports), as Hermes does.
    let keys: Vec<Option<String>> = llm.requests().iter().map(|r| r.authorization.clone()).collect();
    let fixture_key = "Bearer sk-or-v1-fixture-not-a-real-key-0123456789";
    assert!(keys.iter().all(|k| k.as_deref() == Some(fixture_key)), "the model was not called with OPENROUTER_API_KEY: {keys:?}");
    assert!(!gateway.log_text().contains("sk-or-v1-fixture"), "the key reached the log");

    // The memories Python wrote are in the agent's prompt.
    let remembered = llm.requests().iter().filter_map(|r| r.system_text()).any(|s| s.contains("Debian 13"));
    assert!(remembered, "MEMORY.md is not in the system prompt");

    // Python's state.db is left as Python wrote it (the Python tools still read it); this
    // gateway keeps its sessions beside it.
    let python_db = rusqlite::Connection::open(setup.home.path().join("state.db")).unwrap();
    let tables: Vec<String> = python_db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(tables, ["gateway_routing", "messages", "sessions", "sqlite_sequence", "state_meta"], "state.db was changed");
    let ours = rusqlite::Connection::open(setup.home.path().join("gateway.db")).unwrap();
    let answered: i64 = ours.query_row("SELECT COUNT(*) FROM messages WHERE role = 'assistant'", [], |r| r.get(0)).unwrap();
    assert!(answered >= 2, "this gateway's conversations are not in gateway.db");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_lists_the_python_keys_this_build_does_not_support() {
    let llm = FakeLlm::start().await;
    let telegram = FakeTelegram::start().await.unwrap();
    let setup = python_home(&llm, &telegram);

    let (status, stdout, stderr) = setup.run(&["doctor"]);

    assert!(status.success(), "doctor failed on a working Python home: {status}\n{stdout}\n{stderr}");
    let listed: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("    - ")).collect();
    // Whole sections this build has no counterpart for are listed by their name.
    for key in ["_config_version", "terminal.backend", "database", "runtime", "plugins", "attachments"] {
        assert!(listed.contains(&key), "{key} is not listed as unsupported: {stdout}");
    }
    for supported in ["model.default", "approvals.mode", "agent.max_turns", "cron.wrap_response"] {
        assert!(!listed.contains(&supported), "{supported} is supported but listed: {stdout}");
    }
    assert!(stdout.contains(&format!("telegram: connected as @{}", telegram.bot_username())), "{stdout}");
}
