//! Versioned schema migrations, tracked in `PRAGMA user_version`. A migration is appended, never
//! edited: a database written by an older hermes is upgraded in place, one step at a time.

use super::StoreError;
use rusqlite::Connection;
use std::path::Path;

pub(super) const MIGRATIONS: &[&str] = &[
    // 1: the gateway spine.
    r#"
    CREATE TABLE sessions (
        id                TEXT PRIMARY KEY,
        session_key       TEXT NOT NULL,
        source            TEXT NOT NULL,
        platform          TEXT NOT NULL,
        user_id           TEXT,
        chat_id           TEXT NOT NULL,
        model             TEXT,
        title             TEXT,
        parent_session_id TEXT REFERENCES sessions(id),
        started_at        INTEGER NOT NULL,
        ended_at          INTEGER,
        end_reason        TEXT,
        message_count     INTEGER NOT NULL DEFAULT 0,
        input_tokens      INTEGER NOT NULL DEFAULT 0,
        output_tokens     INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX sessions_by_key ON sessions(session_key, started_at);
    CREATE INDEX sessions_by_user ON sessions(platform, user_id);

    CREATE TABLE messages (
        id            INTEGER PRIMARY KEY,
        session_id    TEXT NOT NULL REFERENCES sessions(id),
        role          TEXT NOT NULL,
        content       TEXT NOT NULL,
        tool_call_id  TEXT,
        tool_calls    TEXT,
        tool_name     TEXT,
        event_id      TEXT,
        finish_reason TEXT,
        timestamp     INTEGER NOT NULL
    );
    CREATE INDEX messages_by_session ON messages(session_id, id);
    CREATE INDEX messages_by_event ON messages(session_id, event_id, role) WHERE event_id IS NOT NULL;

    CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id');
    CREATE VIRTUAL TABLE messages_trigram USING fts5(content, content='messages', content_rowid='id', tokenize='trigram');
    CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
        INSERT INTO messages_trigram(rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO messages_trigram(messages_trigram, rowid, content) VALUES ('delete', old.id, old.content);
    END;
    CREATE TRIGGER messages_au AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO messages_trigram(messages_trigram, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
        INSERT INTO messages_trigram(rowid, content) VALUES (new.id, new.content);
    END;

    CREATE TABLE routes (
        session_key TEXT PRIMARY KEY,
        session_id  TEXT NOT NULL REFERENCES sessions(id),
        origin      TEXT NOT NULL,
        overrides   TEXT NOT NULL DEFAULT '{}',
        updated_at  INTEGER NOT NULL
    );

    CREATE TABLE inbox (
        event_id    TEXT PRIMARY KEY,
        platform    TEXT NOT NULL,
        payload     TEXT NOT NULL,
        state       TEXT NOT NULL,
        attempts    INTEGER NOT NULL DEFAULT 0,
        error       TEXT,
        received_at INTEGER NOT NULL,
        updated_at  INTEGER NOT NULL
    );
    CREATE INDEX inbox_by_state ON inbox(state, received_at);

    CREATE TABLE outbox (
        idempotency_key     TEXT PRIMARY KEY,
        target              TEXT NOT NULL,
        body                TEXT NOT NULL,
        state               TEXT NOT NULL,
        attempts            INTEGER NOT NULL DEFAULT 0,
        platform_message_id TEXT,
        error               TEXT,
        created_at          INTEGER NOT NULL,
        updated_at          INTEGER NOT NULL
    );
    CREATE INDEX outbox_by_state ON outbox(state, updated_at);

    CREATE TABLE usage (
        session_id        TEXT NOT NULL REFERENCES sessions(id),
        model             TEXT NOT NULL,
        prompt_tokens     INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        cached_tokens     INTEGER NOT NULL DEFAULT 0,
        api_calls         INTEGER NOT NULL DEFAULT 0,
        cost_usd          REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (session_id, model)
    );
    "#,
    // 2: the agent core: frozen prompt snapshots, compression lineage, soft-deleted turns.
    r#"
    ALTER TABLE sessions ADD COLUMN system_prompt TEXT;
    ALTER TABLE sessions ADD COLUMN last_prompt_tokens INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN compression_count INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE messages ADD COLUMN active INTEGER NOT NULL DEFAULT 1;
    CREATE INDEX messages_active ON messages(session_id, active, id);
    CREATE UNIQUE INDEX sessions_title ON sessions(title) WHERE title IS NOT NULL;
    "#,
    // 3: claims (exclusive, expiring leases for cron and other once-only work). Times in ms.
    r#"
    CREATE TABLE claims (
        name       TEXT PRIMARY KEY,
        holder     TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    "#,
    // 4: approvals (commands waiting for a person's answer; closed with their outcome). Times in ms.
    r#"
    CREATE TABLE approvals (
        id          TEXT PRIMARY KEY,
        session_key TEXT NOT NULL,
        platform    TEXT NOT NULL,
        chat_id     TEXT NOT NULL,
        thread_id   TEXT,
        command     TEXT NOT NULL,
        created_at  INTEGER NOT NULL,
        outcome     TEXT,
        closed_at   INTEGER
    );
    CREATE INDEX approvals_open ON approvals(created_at) WHERE outcome IS NULL;
    "#,
    // 5: the outbox as a durable queue: each part carries its whole message, its chat's lane, its
    // next attempt and its deadline, so a part outlives outages and restarts. Rows written by an
    // older hermes have no message and stay records only.
    r#"
    ALTER TABLE outbox ADD COLUMN lane TEXT;
    ALTER TABLE outbox ADD COLUMN platform TEXT;
    ALTER TABLE outbox ADD COLUMN message TEXT;
    ALTER TABLE outbox ADD COLUMN next_attempt_at INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE outbox ADD COLUMN deadline INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE outbox ADD COLUMN notify_on_death INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE outbox ADD COLUMN lead INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE outbox ADD COLUMN resent_marked INTEGER NOT NULL DEFAULT 0;
    -- Every index ends with the rowid, so this one yields a lane's parts in their order.
    CREATE INDEX outbox_lane_queue ON outbox(lane) WHERE lane IS NOT NULL AND state IN ('pending', 'sending', 'ambiguous');
    CREATE INDEX outbox_dead ON outbox(updated_at) WHERE state IN ('dead', 'failed');
    "#,
    // 6: the pictures that went with a message: a JSON list of image references (the prepared
    // files in the media cache, never their bytes). NULL for a message without pictures and for
    // every message written before.
    r#"
    ALTER TABLE messages ADD COLUMN images TEXT;
    "#,
    // 7: leases with fencing tokens, and the cursors written under them (store::Leases). Times
    // in ms. A released lease keeps its row (expired) so the next tenure's token is still larger.
    r#"
    CREATE TABLE leases (
        name       TEXT PRIMARY KEY,
        holder     TEXT NOT NULL,
        token      INTEGER NOT NULL,
        since      INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    );
    CREATE TABLE cursors (
        name       TEXT PRIMARY KEY,
        value      TEXT NOT NULL,
        token      INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    "#,
];

/// The schema version this build writes.
pub(super) const VERSION: i64 = MIGRATIONS.len() as i64;

/// The gateway's SQLite store: `state.db`, unless that file is Python Hermes' transcript
/// database (a home the Python gateway used). Its schema is not ours, and migrating it in place
/// would make it useless to the Python tools still reading it, so this gateway then keeps its own
/// store beside it in `gateway.db` and leaves `state.db` untouched.
pub fn state_db(home: &crate::config::Home) -> std::path::PathBuf {
    let shared = home.shared_state_db();
    if is_python_hermes_db(&shared) { home.beside_python_state_db() } else { shared }
}

/// Whether `path` is a SQLite database written by Python Hermes: it has Hermes' `sessions` table
/// but none of the tables every version of our schema has (`outbox`). A missing, unreadable or
/// empty file is not: the store then creates or reports it as before.
fn is_python_hermes_db(path: &Path) -> bool {
    if !path.is_file() {
        return false;
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let Ok(conn) = Connection::open_with_flags(path, flags) else {
        return false;
    };
    let has = |table: &str| conn.query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", [table], |_| Ok(())).is_ok();
    has("sessions") && !has("outbox")
}

pub(super) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let found: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if found > VERSION {
        return Err(StoreError::TooNew { path: path.to_path_buf(), found, known: VERSION });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", index as i64 + 1)?;
        tx.commit()?;
        tracing::info!(version = index + 1, "session store migrated");
    }
    Ok(())
}
