//! The PostgreSQL store from the outside: `hermes store migrate --to postgres` copies a home that
//! ran on SQLite, and a gateway pointed at the database by `DATABASE_URL` carries on the same
//! conversations (against the real PostgreSQL `tests/peers/run.sh` starts).

use crate::support::{API_KEY, Setup, count, open_db, scratch_database};
use hermes_fakes::FakeLlm;
use serde_json::{Value, json};
use std::time::Duration;

async fn say(setup: &Setup, text: &str) -> String {
    say_in(setup, "conv-ada", text).await
}

async fn say_in(setup: &Setup, session: &str, text: &str) -> String {
    let response = reqwest::Client::new()
        .post(setup.api("/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .header("X-Hermes-Session-Id", session)
        .json(&json!({"model": "hermes-agent", "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_home_moved_to_postgres_keeps_its_conversations_and_the_gateway_carries_on_there() {
    let llm = FakeLlm::start().await;
    let mut setup = Setup::new(&llm.base_url());
    let mut gateway = setup.start().await;
    assert_eq!(say(&setup, "my name is Ada").await, "echo: my name is Ada");
    assert!(gateway.signal(libc::SIGTERM).await.success());

    let url = scratch_database().await;
    setup.set("DATABASE_URL", &url);
    let (status, out, err) = setup.run(&["store", "migrate", "--to", "postgres"]);
    assert!(status.success(), "migrate failed: {err}");
    assert!(out.contains("Copied") && out.contains("messages"), "{out}");
    assert!(out.contains("(re)start it"), "DATABASE_URL selects PostgreSQL, and the command says so: {out}");
    assert!(!out.contains(&url) && !err.contains(&url), "the URL is not echoed");

    let (status, again, _) = setup.run(&["store", "migrate", "--to", "postgres"]);
    assert!(status.success() && again.contains("already there"), "a second run is harmless: {again}");

    let sqlite_messages = count(&open_db(&setup.state_db()), "SELECT count(*) FROM messages", []);
    let gateway = setup.start().await;
    assert_eq!(say(&setup, "what is my name?").await, "echo: what is my name?");
    let last = llm.requests().last().expect("the model was asked").body.clone();
    let sent: Vec<&str> = last["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(sent.iter().any(|c| c.contains("my name is Ada")), "the old history reached the model from PostgreSQL: {sent:?}");
    assert_eq!(
        count(&open_db(&setup.state_db()), "SELECT count(*) FROM messages", []),
        sqlite_messages,
        "nothing new is written to the SQLite file"
    );
    drop(gateway);
}

/// Hermes' cron instruction starts every scheduled run's prompt.
const CRON_MARK: &str = "You are running as a scheduled cron job";

/// A home moved to a new machine: its history, cron jobs and pairing approvals are copied into
/// PostgreSQL, and a gateway with a fresh home of its own, pointed at the database, answers with
/// the old history, lists and runs the old job, and knows who was approved.
#[tokio::test(flavor = "multi_thread")]
async fn a_homes_jobs_and_pairings_move_to_postgres_and_a_fresh_replica_runs_them() {
    let llm = FakeLlm::start().await;
    let mut old = Setup::new(&llm.base_url());
    let mut gateway = old.start().await;
    assert_eq!(say(&old, "my name is Ada").await, "echo: my name is Ada");
    assert!(gateway.signal(libc::SIGTERM).await.success());
    let (status, out, err) = old.run(&["cron", "create", "every 1h", "water the old plants", "--name", "plants", "--deliver", "local"]);
    assert!(status.success(), "{out}{err}");
    // An approval as Hermes writes it (`{id: {user_name, approved_at}}`).
    let pairing = old.home.path().join("platforms/pairing");
    std::fs::create_dir_all(&pairing).unwrap();
    std::fs::write(pairing.join("telegram-approved.json"), r#"{"4242": {"user_name": "Ada", "approved_at": 1700000000.0}}"#).unwrap();

    let url = scratch_database().await;
    old.set("DATABASE_URL", &url);
    let (status, out, err) = old.run(&["store", "migrate", "--to", "postgres"]);
    assert!(status.success(), "migrate failed: {err}");
    assert!(out.contains("cron/jobs.json: copied") && out.contains("pairing/telegram-approved.json: copied"), "{out}");
    let (status, again, _) = old.run(&["store", "migrate", "--to", "postgres"]);
    assert!(status.success() && again.contains("cron/jobs.json: already there"), "a second run is harmless: {again}");

    let mut new = Setup::new(&llm.base_url());
    new.set("DATABASE_URL", &url);
    let (status, listed, err) = new.run(&["cron", "list"]);
    assert!(status.success() && listed.contains("plants"), "the new home lists the old job from PostgreSQL: {listed}{err}");
    let (status, paired, err) = new.run(&["pairing", "list"]);
    assert!(status.success() && paired.contains("4242"), "and knows the old approval: {paired}{err}");
    let _gateway = new.start().await;
    assert_eq!(say(&new, "what is my name?").await, "echo: what is my name?");
    let last = llm.requests().last().expect("the model was asked").body.clone();
    let sent: Vec<&str> = last["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(sent.iter().any(|c| c.contains("my name is Ada")), "the old history reached the model: {sent:?}");
    let (status, out, err) = new.run(&["cron", "run", "plants"]);
    assert!(status.success(), "{out}{err}");
    let asked =
        || llm.requests().iter().any(|r| r.last_user_text().is_some_and(|t| t.contains(CRON_MARK) && t.contains("water the old plants")));
    assert!(crate::support::eventually(Duration::from_secs(30), asked).await, "the old job ran on the new replica: {out}");
    assert!(!new.home.path().join("cron/jobs.json").exists(), "the job was never a file of the new home");
}

#[tokio::test(flavor = "multi_thread")]
async fn migrate_without_a_database_or_a_home_store_says_what_to_do() {
    let llm = FakeLlm::start().await;
    let mut setup = Setup::new(&llm.base_url());
    let (status, _, err) = setup.run(&["store", "migrate", "--to", "postgres"]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("no SQLite store at") && err.contains("nothing to copy"), "{err}");

    let gateway = setup.start().await;
    drop(gateway);
    let (status, _, err) = setup.run(&["store", "migrate", "--to", "postgres"]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("set DATABASE_URL or store.postgres.url"), "{err}");

    setup.set("DATABASE_URL", "postgres://hermes:Wr0ng-Secret-99@127.0.0.1:1/nowhere?connect_timeout=2");
    let (status, _, err) = setup.run(&["store", "migrate", "--to", "postgres"]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("cannot reach the PostgreSQL store at hermes@127.0.0.1:1/nowhere"), "{err}");
    assert!(!err.contains("Wr0ng-Secret"), "{err}");
}

/// One replica of a cluster: its own home, the shared database, a short lease.
fn replica(llm: &FakeLlm, url: &str, name: &str) -> Setup {
    replica_with(llm, url, name, "")
}

/// A replica with more configuration (`extra`: whole YAML sections).
fn replica_with(llm: &FakeLlm, url: &str, name: &str, extra: &str) -> Setup {
    let mut setup = Setup::new(&llm.base_url());
    setup.set("DATABASE_URL", url);
    setup.write_config(&format!("store:\n  lease_ttl_seconds: 3\n  replica: {name}\n{extra}"));
    setup
}

/// `GET http://127.0.0.1:{port}{path}`: the status and the JSON body (`Null` when unreachable).
async fn admin_get(port: u16, path: &str) -> (u16, serde_json::Value) {
    match reqwest::get(format!("http://127.0.0.1:{port}{path}")).await {
        Ok(response) => (response.status().as_u16(), response.json().await.unwrap_or_default()),
        Err(_) => (0, serde_json::Value::Null),
    }
}

/// Which replica holds the live lease `name`, if any.
async fn lease_holder(url: &str, name: &str) -> Option<String> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("the test PostgreSQL answers");
    let driver = tokio::spawn(connection);
    let row = client
        .query_opt(
            "SELECT holder FROM leases WHERE name = $1 AND expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
            &[&name],
        )
        .await
        .ok()
        .flatten();
    drop(client);
    let _ = driver.await;
    row.map(|row| row.get(0))
}

/// The API server answers on the request that brought each message, so every replica serves it
/// (behind a load balancer): one conversation goes on from one replica to the other, with its
/// history, while both live and after one is killed, each turn run once.
#[tokio::test(flavor = "multi_thread")]
async fn every_replica_answers_the_api_and_a_conversation_goes_on_in_another_when_one_is_killed() {
    let llm = FakeLlm::start().await;
    let url = scratch_database().await;
    let admin_port = crate::support::free_port();
    let first = replica(&llm, &url, "replica-a");
    let second = replica_with(&llm, &url, "replica-b", &format!("gateway:\n  admin_port: {admin_port}\n"));
    let mut gateway = first.start().await;
    let _other = second.start().await;
    let (status, health) = admin_get(admin_port, "/health").await;
    assert_eq!((status, health["gateway"].as_str()), (200, Some("running")), "{health}");
    let api = health["adapters"].as_array().unwrap().iter().find(|a| a["platform"] == "api_server").cloned().unwrap_or_default();
    assert_eq!(api["state"].as_str(), Some("connected"), "served on the second replica too, with no lease: {health}");
    assert_eq!(lease_holder(&url, "platform:api_server").await, None, "no replica leases the API server");
    let (status, ready) = admin_get(admin_port, "/readyz").await;
    assert_eq!((status, ready["status"].as_str()), (200, Some("ready")), "{ready}");

    assert_eq!(say(&first, "my name is Ada").await, "echo: my name is Ada");
    assert_eq!(say(&second, "what is my name?").await, "echo: what is my name?");
    let sent = |request: &hermes_fakes::RecordedRequest| -> Vec<String> {
        request.body["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_str().map(str::to_string)).collect()
    };
    let requests = llm.requests();
    assert!(sent(requests.last().unwrap()).iter().any(|c| c.contains("my name is Ada")), "the other replica has the history");

    assert!(!gateway.signal(libc::SIGKILL).await.success());
    assert_eq!(say(&second, "still there?").await, "echo: still there?");
    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "each turn ran once");
    let history = sent(requests.last().unwrap());
    assert!(history.iter().any(|c| c.contains("my name is Ada")) && history.iter().any(|c| c.contains("what is my name?")), "{history:?}");
}

/// A replica holding a listener's lease (the webhook routes' turns) that stops cleanly gives it
/// back: the other takes it at once, not when it expires.
#[tokio::test(flavor = "multi_thread")]
async fn a_holder_that_stops_cleanly_hands_over_at_once() {
    let llm = FakeLlm::start().await;
    let url = scratch_database().await;
    let (first, second) = (replica(&llm, &url, "replica-a"), replica(&llm, &url, "replica-b"));
    let mut holder = first.start().await;
    let held_by = |who: &'static str| {
        let url = url.clone();
        async move {
            for _ in 0..200 {
                if lease_holder(&url, "platform:webhook").await.as_deref() == Some(who) {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            false
        }
    };
    assert!(held_by("replica-a").await, "{}", holder.log_text());
    let standby = second.start().await;
    assert!(holder.signal(libc::SIGTERM).await.success());
    let stopped = std::time::Instant::now();
    assert!(held_by("replica-b").await, "{}", standby.log_text());
    assert!(stopped.elapsed() < Duration::from_secs(3), "released, not expired: {:?}", stopped.elapsed());
    assert_eq!(say_in(&second, "conv-bob", "hello").await, "echo: hello");
}

/// `hermes cron run` on a PostgreSQL home while another process holds the minute tick's lock (a
/// replica in the middle of its tick): it waits for the lock, runs nothing meanwhile, and runs
/// the job once the lock is free, rather than leaving it to the next minute.
#[tokio::test(flavor = "multi_thread")]
async fn cron_run_waits_for_the_tick_lock_another_replica_holds_then_runs_the_job() {
    let llm = FakeLlm::start().await;
    let url = scratch_database().await;
    let setup = replica(&llm, &url, "replica-a");
    let (status, out, err) = setup.run(&["cron", "create", "every 1h", "water the plants", "--name", "plants", "--deliver", "local"]);
    assert!(status.success(), "{out}{err}");
    // Another replica's tick: the advisory lock, on a connection of its own.
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("the test PostgreSQL answers");
    let driver = tokio::spawn(connection);
    let key = "hashtextextended(current_schema() || '/cron/.tick.lock', 0)";
    client.execute(&format!("SELECT pg_advisory_lock({key})"), &[]).await.expect("the tick lock is taken");

    let mut command = setup.command(&["cron", "run", "plants"]);
    let running = std::thread::spawn(move || command.output().expect("run hermes"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!running.is_finished(), "it waits for the lock");
    assert_eq!(llm.request_count(), 0, "nothing ran under another process's tick");
    client.execute(&format!("SELECT pg_advisory_unlock({key})"), &[]).await.expect("the tick lock is given back");

    let output = tokio::task::spawn_blocking(move || running.join().expect("the command's thread")).await.unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success() && stdout.contains("ran 'plants' here"), "{stdout}{stderr}");
    assert!(!stdout.contains("did not run"), "{stdout}");
    let asked = llm.requests().iter().filter(|r| r.last_user_text().is_some_and(|t| t.contains("water the plants"))).count();
    assert_eq!(asked, 1, "the job ran once, as soon as the lock was free: {stdout}");
    drop(client);
    let _ = driver.await;
}
