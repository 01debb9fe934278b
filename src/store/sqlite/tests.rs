//! The shared backend suite run against SQLite, and what only SQLite has: a database file that
//! outlives the process, schema versions, and the writer's batches.

use super::{SqliteStore, schema};
use crate::store::suite::{message, source, store_suite};
use crate::store::{InboxState, Store};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

async fn open_at(path: &Path) -> Store {
    Arc::new(SqliteStore::open(path).await.unwrap())
}

/// A fresh store in a temp dir, which lives as long as the returned guard.
async fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = open_at(&dir.path().join("state.db")).await;
    (dir, store)
}

/// The shared suite, under `suite::` so it can be run or filtered on its own.
mod suite {
    super::store_suite!(super::open);
}

#[tokio::test]
async fn inbox_drops_redelivery_and_replays_unfinished_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let store = open_at(&path).await;
        assert!(store.inbox_accept("ev-1", "webhook", "{\"a\":1}").await.unwrap());
        assert!(!store.inbox_accept("ev-1", "webhook", "{\"a\":2}").await.unwrap(), "a redelivery must be recognised");
        assert!(store.inbox_accept("ev-2", "webhook", "{}").await.unwrap());
        assert!(store.inbox_accept("ev-3", "webhook", "{}").await.unwrap());
        store.inbox_mark_processing("ev-1").await.unwrap();
        store.inbox_mark_done("ev-2").await.unwrap();
        store.inbox_mark_failed("ev-3", "unreadable").await.unwrap();
    }
    // A new process sees what the old one accepted.
    let store = open_at(&path).await;
    let unfinished = store.inbox_unfinished().await.unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].event_id, "ev-1");
    assert_eq!(unfinished[0].payload, "{\"a\":1}", "the first payload wins");
    assert_eq!(unfinished[0].state, InboxState::Processing);
    assert_eq!(unfinished[0].attempts, 1);
    // Finished rows still block redelivery until pruned.
    assert!(!store.inbox_accept("ev-2", "webhook", "{}").await.unwrap());
    assert_eq!(store.inbox_prune(Duration::ZERO).await.unwrap(), 2);
    assert!(store.inbox_accept("ev-2", "webhook", "{}").await.unwrap());
}

#[tokio::test]
async fn a_claim_outlives_its_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let store = open_at(&path).await;
        assert!(store.claim_take("cron:daily", "gateway-a", Duration::from_secs(3600)).await.unwrap());
    }
    let store = open_at(&path).await;
    assert_eq!(store.claim_holder("cron:daily").await.unwrap().as_deref(), Some("gateway-a"));
    assert!(!store.claim_take("cron:daily", "gateway-b", Duration::from_secs(3600)).await.unwrap());
}

#[tokio::test]
async fn a_failing_write_in_a_batch_does_not_undo_the_others() {
    let (_dir, store) = open().await;
    let route = store.route_get_or_create("k", &source("u1"), "m").await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = store.clone();
        // Every odd message names a session that does not exist: a foreign-key failure.
        let session = if i % 2 == 0 { route.session_id.clone() } else { "missing".to_string() };
        tasks.push(tokio::spawn(async move { store.message_append(message(&session, "user", &format!("m{i}"))).await.is_ok() }));
    }
    let mut ok = 0;
    for t in tasks {
        ok += t.await.unwrap() as usize;
    }
    assert_eq!(ok, 10);
    assert_eq!(store.messages(&route.session_id, None).await.unwrap().len(), 10);
    assert_eq!(store.session_get(&route.session_id).await.unwrap().unwrap().message_count, 10);
}

#[tokio::test]
async fn a_newer_schema_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", 999).unwrap();
    }
    let err = SqliteStore::open(&path).await.err().unwrap();
    assert!(err.to_string().contains("newer hermes"), "{err}");
}

#[tokio::test]
async fn a_database_from_before_claims_and_approvals_is_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        // What a hermes of schema 2 left behind, with an event in its inbox.
        let c = rusqlite::Connection::open(&path).unwrap();
        for sql in &schema::MIGRATIONS[..2] {
            c.execute_batch(sql).unwrap();
        }
        c.pragma_update(None, "user_version", 2).unwrap();
        c.execute(
            "INSERT INTO inbox (event_id, platform, payload, state, received_at, updated_at) VALUES ('ev-1', 'chat', '{}', 'accepted', 1, 1)",
            [],
        )
        .unwrap();
        // An older outbox row: a record of a send, without the message to send again.
        c.execute(
            "INSERT INTO outbox (idempotency_key, target, body, state, attempts, created_at, updated_at) VALUES ('old:0', '{}', 'hi', 'sending', 1, 1, 1)",
            [],
        )
        .unwrap();
    }
    let store = open_at(&path).await;
    assert_eq!(store.inbox_unfinished().await.unwrap().len(), 1, "the old data is kept");
    assert_eq!(store.outbox_get("old:0").await.unwrap().unwrap().state, "sending", "the old outbox row is kept");
    assert!(store.outbox_busy_lanes().await.unwrap().is_empty(), "and not mistaken for a queued part");
    assert!(store.claim_take("job", "a", Duration::from_secs(60)).await.unwrap(), "the new table is there");
    assert!(store.approval_close_orphans("denied_by_restart", None).await.unwrap().is_empty(), "and the approvals table");
    drop(store);
    let c = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    assert_eq!(version, schema::VERSION);
    assert_eq!(version, 7);
}

#[tokio::test]
async fn messages_written_before_pictures_were_kept_read_back_without_any() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        // What a hermes of schema 5 left behind: a session with a message.
        let c = rusqlite::Connection::open(&path).unwrap();
        for sql in &schema::MIGRATIONS[..5] {
            c.execute_batch(sql).unwrap();
        }
        c.pragma_update(None, "user_version", 5).unwrap();
        c.execute(
            "INSERT INTO sessions (id, session_key, source, platform, chat_id, started_at) VALUES ('s1', 'k', '{}', 'chat', 'c', 1)",
            [],
        )
        .unwrap();
        c.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s1', 'user', 'old words', 1)", []).unwrap();
    }
    let store = open_at(&path).await;
    let old = store.messages("s1", None).await.unwrap();
    assert_eq!((old[0].content.as_str(), old[0].images.as_deref()), ("old words", None));
    let images = r#"[{"media_type":"image/jpeg","path":"/c/a.jpg","width":2,"height":1}]"#;
    let new = crate::store::NewMessage {
        session_id: "s1".into(),
        role: "user".into(),
        content: "look".into(),
        images: Some(images.into()),
        ..Default::default()
    };
    store.message_append(new).await.unwrap();
    assert_eq!(store.messages("s1", None).await.unwrap()[1].images.as_deref(), Some(images), "the new column is written");
}

#[tokio::test]
async fn every_connection_keeps_its_page_cache_and_the_pool_within_the_configured_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let limits = super::SqliteLimits { cache_kib: 256, read_connections: 2 };
    let store = SqliteStore::open_with(&dir.path().join("state.db"), limits).await.unwrap();
    let cache_size = |c: &rusqlite::Connection| -> Result<i64, crate::store::StoreError> {
        Ok(c.pragma_query_value(None, "cache_size", |row| row.get(0))?)
    };
    // Negative: KiB, whatever the page size.
    assert_eq!(store.write(cache_size).await.unwrap(), -256, "the writer");
    // Many reads at once: no more than two connections are ever opened, each bounded.
    let reads: Vec<_> = (0..16).map(|_| store.read(cache_size)).collect();
    for size in futures::future::join_all(reads).await {
        assert_eq!(size.unwrap(), -256, "a reader");
    }
    let pooled = store.inner.readers.lock().unwrap().len();
    assert!((1..=2).contains(&pooled), "{pooled} read connections kept");
}

#[test]
fn a_python_hermes_state_db_is_left_alone_and_the_store_goes_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = crate::config::Home::at(dir.path());
    // Python Hermes' transcript database: its own `sessions`, no outbox.
    let python = rusqlite::Connection::open(dir.path().join("state.db")).unwrap();
    python
        .execute_batch("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT); CREATE TABLE state_meta (key TEXT, value TEXT);")
        .unwrap();
    drop(python);
    assert_eq!(schema::state_db(&home), dir.path().join("gateway.db"));

    // Our own store (it has an outbox) stays at state.db.
    let ours_dir = tempfile::tempdir().unwrap();
    let ours = rusqlite::Connection::open(ours_dir.path().join("state.db")).unwrap();
    ours.execute_batch("CREATE TABLE sessions (id TEXT); CREATE TABLE outbox (id TEXT);").unwrap();
    drop(ours);
    assert_eq!(schema::state_db(&crate::config::Home::at(ours_dir.path())), ours_dir.path().join("state.db"));
}
