//! The shared backend suite run against a real PostgreSQL (`HERMES_TEST_POSTGRES_URL`, which
//! `tests/peers/run.sh` exports), and what only PostgreSQL has: several processes' stores on one
//! database, migrating it at once, and credentials that never reach an error.
//!
//! Each test gets a schema of its own on the shared test server, so tests run in parallel and
//! never see each other's rows.

use super::{PostgresOptions, PostgresStore};
use crate::store::suite::store_suite;
use crate::store::{Store, StoreError};
use std::sync::Arc;

/// The test server's URL; the suite needs it and says how to get it.
pub(crate) fn server_url() -> String {
    std::env::var("HERMES_TEST_POSTGRES_URL")
        .expect("HERMES_TEST_POSTGRES_URL is not set: run the tests under tests/peers/run.sh (it starts PostgreSQL)")
}

/// A URL for a fresh, empty schema of its own on the test server (created here).
pub(crate) async fn scratch_url() -> String {
    let url = server_url();
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("the test PostgreSQL answers");
    let driver = tokio::spawn(connection);
    client.batch_execute(&format!("CREATE SCHEMA {schema}")).await.expect("a scratch schema");
    drop(client);
    let _ = driver.await;
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}&sslmode=disable")
}

async fn open_at(url: &str) -> PostgresStore {
    PostgresStore::connect(&PostgresOptions { url: url.to_string(), pool_size: 4 }).await.expect("the store connects")
}

/// A fresh store on an empty schema. Nothing to keep alive: the schema goes with the test server.
async fn open() -> ((), Store) {
    let url = scratch_url().await;
    ((), Arc::new(open_at(&url).await))
}

/// The shared suite, under `suite::` so it can be run or filtered on its own.
mod suite {
    super::store_suite!(super::open);
}

#[tokio::test]
async fn replicas_starting_together_migrate_the_database_once() {
    let url = scratch_url().await;
    let options = PostgresOptions { url: url.clone(), pool_size: 2 };
    let opened = futures::future::join_all((0..4).map(|_| PostgresStore::connect(&options))).await;
    for store in opened {
        store.expect("every replica connects to the schema the first one made");
    }
    let store = open_at(&url).await;
    let client = store.client().await.unwrap();
    let version: i64 = client.query_one("SELECT version FROM hermes_schema", &[]).await.unwrap().get(0);
    let rows: i64 = client.query_one("SELECT count(*) FROM hermes_schema", &[]).await.unwrap().get(0);
    assert_eq!((version, rows), (super::schema::VERSION, 1));
}

#[tokio::test]
async fn a_database_from_a_newer_hermes_is_refused_by_name() {
    let url = scratch_url().await;
    let store = open_at(&url).await;
    store.client().await.unwrap().execute("UPDATE hermes_schema SET version = version + 1", &[]).await.unwrap();
    let refused = PostgresStore::connect(&PostgresOptions { url, pool_size: 1 }).await.err().expect("a newer schema is refused");
    assert!(matches!(refused, StoreError::TooNewDatabase { .. }), "{refused}");
    assert!(refused.to_string().contains("upgrade hermes"), "{refused}");
}

#[tokio::test]
async fn a_refused_password_is_reported_without_the_password() {
    // The trust-authenticated test server accepts any password; a user that does not exist is
    // refused, which is the error a wrong password gives a real deployment.
    let url = server_url().replacen("postgres://hermes@", "postgres://nobody-here:s3cret-Passw0rd@", 1);
    let refused =
        PostgresStore::connect(&PostgresOptions { url: format!("{url}?sslmode=disable"), pool_size: 1 }).await.err().expect("refused");
    let text = refused.to_string();
    assert!(text.contains("nobody-here@127.0.0.1"), "the error names where: {text}");
    assert!(!text.contains("s3cret"), "the error never carries the password: {text}");
}

#[tokio::test]
async fn an_unreachable_server_is_named_with_what_was_wrong() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let url = format!("postgres://hermes:pw-Not-Logged-1234@127.0.0.1:{port}/hermes?sslmode=disable&connect_timeout=2");
    let refused = PostgresStore::connect(&PostgresOptions { url, pool_size: 1 }).await.err().expect("nothing listens there");
    let text = refused.to_string();
    assert!(text.contains(&format!("cannot reach the PostgreSQL store at hermes@127.0.0.1:{port}/hermes")), "{text}");
    assert!(!text.contains("pw-Not-Logged"), "{text}");
}

#[tokio::test]
async fn a_malformed_url_says_what_is_expected() {
    let refused =
        PostgresStore::connect(&PostgresOptions { url: "postgres://host:notaport/db".into(), pool_size: 1 }).await.err().expect("refused");
    assert!(matches!(refused, StoreError::BadDatabaseUrl(_)), "{refused}");
    assert!(refused.to_string().contains("postgres://USER:PASSWORD@HOST:PORT/DATABASE"), "{refused}");
}

#[tokio::test]
async fn a_sqlite_store_is_copied_whole_keeping_its_ids_and_a_second_copy_adds_only_what_is_new() {
    use crate::store::suite::{message, part, source};
    use crate::store::{AttemptEnd, Inbox, Outbox, Routes, SearchScope, SessionLog, SqliteStore, copy_sqlite_into};
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(&dir.path().join("state.db")).await.unwrap();
    let route = sqlite.route_get_or_create("agent:main:api_server:dm:alice", &source("alice"), "model-a").await.unwrap();
    let first = sqlite.message_append(message(&route.session_id, "user", "the migration plan for Tuesday")).await.unwrap();
    sqlite.message_append(message(&route.session_id, "assistant", "noted: 火曜日の移行計画")).await.unwrap();
    sqlite.outbox_enqueue(vec![part("gone:0", "chat-alice")]).await.unwrap();
    sqlite.outbox_end_attempt("gone:0", AttemptEnd::Dead { reason: "403 forbidden".into() }).await.unwrap();
    let dead = sqlite.outbox_dead_letters(10).await.unwrap();
    assert!(sqlite.inbox_accept("tg:1", "telegram", "{}").await.unwrap());

    let target = open_at(&scratch_url().await).await;
    let copied = copy_sqlite_into(&sqlite, &target).await.unwrap();
    let count = |table: &str| copied.iter().find(|t| t.table == table).map(|t| (t.read, t.copied)).unwrap();
    assert_eq!((count("sessions"), count("messages"), count("outbox"), count("inbox")), ((1, 1), (2, 2), (1, 1), (1, 1)));

    let pg: Store = Arc::new(target.clone());
    let history = pg.messages(&route.session_id, None).await.unwrap();
    assert_eq!(history.iter().map(|m| (m.id, m.content.as_str())).collect::<Vec<_>>()[0], (first, "the migration plan for Tuesday"));
    assert_eq!(pg.route_get("agent:main:api_server:dm:alice").await.unwrap().unwrap().session_id, route.session_id);
    let found = pg.search_messages("migration", SearchScope::Session(route.session_id.clone()), 5).await.unwrap();
    assert_eq!(found.len(), 1, "the copy is searchable");
    let found = pg.search_messages("移行計画", SearchScope::Session(route.session_id.clone()), 5).await.unwrap();
    assert_eq!(found.len(), 1, "substrings too");
    assert_eq!(
        pg.outbox_dead_letters(10).await.unwrap().iter().map(|d| d.id).collect::<Vec<_>>(),
        dead.iter().map(|d| d.id).collect::<Vec<_>>()
    );
    assert!(!pg.inbox_accept("tg:1", "telegram", "{}").await.unwrap(), "an event accepted before the move is still recognised");
    let next = pg.message_append(message(&route.session_id, "user", "after the move")).await.unwrap();
    assert!(next > first + 1, "new ids continue after the copied ones");

    // The PostgreSQL store is in use now: a message SQLite got meanwhile has a number PostgreSQL
    // already gave another. Copying again refuses, and keeps nothing of itself.
    sqlite.message_append(message(&route.session_id, "user", "written to SQLite after the move")).await.unwrap();
    let refused = copy_sqlite_into(&sqlite, &target).await.unwrap_err();
    assert!(matches!(refused, StoreError::CopyConflict { table: "messages", .. }), "{refused}");
    assert!(refused.to_string().contains("messages row (id 3)") && refused.to_string().contains("nothing was copied"), "{refused}");
    assert_eq!(pg.messages(&route.session_id, None).await.unwrap().len(), 3);
}

#[tokio::test]
async fn copying_again_before_the_move_brings_only_what_is_new() {
    use crate::store::suite::{message, source};
    use crate::store::{Routes, SessionLog, SqliteStore, copy_sqlite_into};
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(&dir.path().join("state.db")).await.unwrap();
    let route = sqlite.route_get_or_create("agent:main:api_server:dm:bob", &source("bob"), "model-a").await.unwrap();
    sqlite.message_append(message(&route.session_id, "user", "one")).await.unwrap();
    let target = open_at(&scratch_url().await).await;
    copy_sqlite_into(&sqlite, &target).await.unwrap();
    sqlite.message_append(message(&route.session_id, "assistant", "two")).await.unwrap();
    let again = copy_sqlite_into(&sqlite, &target).await.unwrap();
    let count = |table: &str| again.iter().find(|t| t.table == table).map(|t| (t.read, t.copied)).unwrap();
    assert_eq!((count("sessions"), count("routes"), count("messages")), ((1, 0), (1, 0), (2, 1)), "only the new message is copied");
    let contents: Vec<String> = target.messages(&route.session_id, None).await.unwrap().into_iter().map(|m| m.content).collect();
    assert_eq!(contents, ["one", "two"]);
}

/// The folder suite on PostgreSQL: two stores on one schema are two replicas.
mod folders {
    use crate::store::folders::{Folder, FolderKind, LockWait, SharedFolders, suite};
    use std::sync::Arc;

    async fn two() -> (Arc<dyn Folder>, Arc<dyn Folder>) {
        let url = super::scratch_url().await;
        let (one, other) = (super::open_at(&url).await, super::open_at(&url).await);
        (one.shared_folder(FolderKind::Cron).unwrap(), other.shared_folder(FolderKind::Cron).unwrap())
    }

    async fn run(check: fn(Arc<dyn Folder>, Arc<dyn Folder>)) {
        let (one, other) = two().await;
        tokio::task::spawn_blocking(move || check(one, other)).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_change_is_seen_whole_elsewhere() {
        run(suite::a_change_is_seen_whole_elsewhere).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn changes_under_the_lock_lose_nothing() {
        run(suite::changes_under_the_lock_lose_nothing).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_held_lock_refuses_a_second_holder_until_dropped() {
        run(suite::a_held_lock_refuses_a_second_holder_until_dropped).await;
    }

    /// A replica that dies mid-change (here: drops it) leaves nothing of it, and its lock is
    /// free at once; a replica that cannot have the lock in time says so instead of waiting on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unfinished_change_leaves_nothing_and_a_bounded_wait_fails_clearly() {
        run(|one, other| {
            let mut lock = one.lock(LockWait::Forever).unwrap();
            lock.write("jobs.json", b"half").unwrap();
            let waited = other.lock(LockWait::AtMost(std::time::Duration::from_millis(200))).map(|_| ()).unwrap_err();
            assert_eq!(waited.kind(), std::io::ErrorKind::TimedOut, "{waited}");
            assert!(waited.to_string().contains("cron folder's lock"), "{waited}");
            drop(lock);
            assert_eq!(other.read("jobs.json").unwrap(), None, "rolled back");
            let mut lock = other.lock(LockWait::AtMost(std::time::Duration::from_secs(5))).expect("free once the holder is gone");
            lock.write("jobs.json", b"whole").unwrap();
            lock.commit().unwrap();
            assert_eq!(one.read("jobs.json").unwrap().as_deref(), Some(&b"whole"[..]));
        })
        .await;
    }

    /// Hostile names cannot reach outside their folder: another folder never sees them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_document_name_is_data_not_a_path_or_sql() {
        let url = super::scratch_url().await;
        let store = super::open_at(&url).await;
        let (cron, pairing) = (store.shared_folder(FolderKind::Cron).unwrap(), store.shared_folder(FolderKind::Pairing).unwrap());
        tokio::task::spawn_blocking(move || {
            let hostile = "../pairing/telegram-approved.json'; DROP TABLE documents; --";
            let mut lock = cron.lock(LockWait::Forever).unwrap();
            lock.write(hostile, b"{\"1\":{}}").unwrap();
            lock.commit().unwrap();
            assert_eq!(cron.read(hostile).unwrap().as_deref(), Some(&b"{\"1\":{}}"[..]));
            assert!(pairing.names().unwrap().is_empty(), "the pairing folder is untouched");
        })
        .await
        .unwrap();
    }
}
