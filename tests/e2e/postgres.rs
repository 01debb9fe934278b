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

/// Whether `setup`'s status file shows the API server standing by for `holder`.
fn stands_by_for(setup: &Setup, holder: &str) -> bool {
    std::fs::read_to_string(setup.home.path().join("gateway_state.json")).is_ok_and(|s| s.contains(&format!("standby: {holder} serves it")))
}

#[tokio::test(flavor = "multi_thread")]
async fn one_replica_serves_the_api_and_another_takes_it_over_within_the_lease_when_the_holder_is_killed() {
    let llm = FakeLlm::start().await;
    let url = scratch_database().await;
    let admin_port = crate::support::free_port();
    let first = replica(&llm, &url, "replica-a");
    let second = replica_with(&llm, &url, "replica-b", &format!("gateway:\n  admin_port: {admin_port}\n"));
    let mut holder = first.start().await;
    let mut standby = second.spawn();
    let standing_by = crate::support::eventually(Duration::from_secs(10), || stands_by_for(&second, "replica-a")).await;
    assert!(standing_by, "the second replica stands by for the API server and says for whom:\n{}", standby.log_text());
    assert!(reqwest::get(second.api("/health")).await.is_err(), "one replica serves the chat API");
    // Standing by for one platform is no fault: the replica is up for its other work (webhook
    // ingress, cron), and says which platform another serves.
    let (status, health) = admin_get(admin_port, "/health").await;
    assert_eq!((status, health["gateway"].as_str()), (200, Some("running")), "{health}");
    assert_eq!(health["adapters"][0]["state"].as_str(), Some("standby"), "{health}");
    let (status, ready) = admin_get(admin_port, "/readyz").await;
    assert_eq!((status, ready["status"].as_str()), (200, Some("ready")), "{ready}");

    assert_eq!(say(&first, "my name is Ada").await, "echo: my name is Ada");
    let asked = llm.request_count();
    assert!(!holder.signal(libc::SIGKILL).await.success());
    let killed = std::time::Instant::now();
    standby.wait_healthy(&second.api(""), Duration::from_secs(15)).await;
    let took = killed.elapsed();
    assert!(took < Duration::from_secs(3 + 5), "taken over within the 3 s lease (and a start): {took:?}");
    let (status, health) = admin_get(admin_port, "/health").await;
    assert_eq!(health["adapters"][0]["state"].as_str(), Some("connected"), "the same listener shows it served here: {status} {health}");

    assert_eq!(say(&second, "what is my name?").await, "echo: what is my name?");
    let requests = llm.requests();
    assert_eq!(requests.len(), asked + 1, "the killed holder's answered turn is not run again");
    let sent: Vec<String> = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert!(sent.iter().any(|c| c.contains("my name is Ada")), "the new holder has the history: {sent:?}");
    let log = standby.log_text();
    assert!(log.contains("this replica holds the connection") || log.contains("gateway running"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_holder_that_stops_cleanly_hands_over_at_once() {
    let llm = FakeLlm::start().await;
    let url = scratch_database().await;
    let (first, second) = (replica(&llm, &url, "replica-a"), replica(&llm, &url, "replica-b"));
    let mut holder = first.start().await;
    let mut standby = second.spawn();
    assert!(crate::support::eventually(Duration::from_secs(10), || stands_by_for(&second, "replica-a")).await);
    assert!(holder.signal(libc::SIGTERM).await.success());
    let stopped = std::time::Instant::now();
    standby.wait_healthy(&second.api(""), Duration::from_secs(15)).await;
    assert!(stopped.elapsed() < Duration::from_secs(3), "released, not expired: {:?}", stopped.elapsed());
    assert_eq!(say_in(&second, "conv-bob", "hello").await, "echo: hello");
}
