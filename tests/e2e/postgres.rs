//! The PostgreSQL store from the outside: `hermes store migrate --to postgres` copies a home that
//! ran on SQLite, and a gateway pointed at the database by `DATABASE_URL` carries on the same
//! conversations (against the real PostgreSQL `tests/peers/run.sh` starts).

use crate::support::{API_KEY, Setup, count, open_db};
use hermes_fakes::FakeLlm;
use serde_json::{Value, json};

/// A URL for a fresh schema of its own on the test server, created here.
async fn scratch_database() -> String {
    let server = std::env::var("HERMES_TEST_POSTGRES_URL")
        .expect("HERMES_TEST_POSTGRES_URL is not set: run the tests under tests/peers/run.sh (it starts PostgreSQL)");
    let schema = format!("e2e_{}", uuid::Uuid::new_v4().simple());
    let (client, connection) = tokio_postgres::connect(&server, tokio_postgres::NoTls).await.expect("the test PostgreSQL answers");
    let driver = tokio::spawn(connection);
    client.batch_execute(&format!("CREATE SCHEMA {schema}")).await.expect("a scratch schema");
    drop(client);
    let _ = driver.await;
    format!("{server}?options=-c%20search_path%3D{schema}&sslmode=disable")
}

async fn say(setup: &Setup, text: &str) -> String {
    let response = reqwest::Client::new()
        .post(setup.api("/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .header("X-Hermes-Session-Id", "conv-ada")
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
