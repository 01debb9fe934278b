//! `hermes store migrate --to postgres`: a SQLite store copied into PostgreSQL, table by table,
//! in one transaction, idempotently. Every row keeps its key (message, inbox and outbox ids
//! included, so dead-letter numbers and search order survive); a row whose key is already there
//! is left as it is, so running it again copies only what is new.
//!
//! A row whose key is there with other content means the database has been written since the
//! last copy (a gateway used it): copying again would mix two histories under the same numbers,
//! so the copy stops, names the row, and keeps nothing of itself.
//!
//! Values travel as text and are cast by PostgreSQL to each column's type: SQLite's flags (0/1)
//! become booleans, its integers BIGINT. Leases and cursors are not copied: they are the running
//! gateways' state, and a new cluster starts new tenures.

use super::PostgresStore;
use crate::store::{SqliteStore, StoreError};
use rusqlite::types::ValueRef;

/// One table: its name, and each column with its PostgreSQL type. `source` is the SQLite
/// expression read for the column (`rowid` where SQLite's implicit key is the id).
struct Table {
    name: &'static str,
    /// The columns a row already in PostgreSQL must share with the copied one to be the same
    /// row (the key, and for a numbered row its number and what identifies it besides).
    same: &'static [&'static str],
    columns: &'static [(&'static str, &'static str, &'static str)],
    /// Parents before children (`sessions.parent_session_id`).
    order: &'static str,
}

/// In foreign-key order: sessions before what refers to them.
const TABLES: &[Table] = &[
    Table {
        name: "sessions",
        same: &["id"],
        columns: &[
            ("id", "id", "text"),
            ("session_key", "session_key", "text"),
            ("source", "source", "text"),
            ("platform", "platform", "text"),
            ("user_id", "user_id", "text"),
            ("chat_id", "chat_id", "text"),
            ("model", "model", "text"),
            ("title", "title", "text"),
            ("parent_session_id", "parent_session_id", "text"),
            ("started_at", "started_at", "bigint"),
            ("ended_at", "ended_at", "bigint"),
            ("end_reason", "end_reason", "text"),
            ("message_count", "message_count", "bigint"),
            ("input_tokens", "input_tokens", "bigint"),
            ("output_tokens", "output_tokens", "bigint"),
            ("system_prompt", "system_prompt", "text"),
            ("last_prompt_tokens", "last_prompt_tokens", "bigint"),
            ("compression_count", "compression_count", "bigint"),
        ],
        order: "started_at, rowid",
    },
    Table {
        name: "messages",
        same: &["id", "session_id", "content"],
        columns: &[
            ("id", "id", "bigint"),
            ("session_id", "session_id", "text"),
            ("role", "role", "text"),
            ("content", "content", "text"),
            ("tool_call_id", "tool_call_id", "text"),
            ("tool_calls", "tool_calls", "text"),
            ("tool_name", "tool_name", "text"),
            ("event_id", "event_id", "text"),
            ("finish_reason", "finish_reason", "text"),
            ("timestamp", "timestamp", "bigint"),
            ("active", "active", "boolean"),
            ("images", "images", "text"),
        ],
        order: "id",
    },
    Table {
        name: "routes",
        same: &["session_key"],
        columns: &[
            ("session_key", "session_key", "text"),
            ("session_id", "session_id", "text"),
            ("origin", "origin", "text"),
            ("overrides", "overrides", "text"),
            ("updated_at", "updated_at", "bigint"),
        ],
        order: "rowid",
    },
    Table {
        name: "inbox",
        same: &["id", "event_id"],
        columns: &[
            ("id", "rowid", "bigint"),
            ("event_id", "event_id", "text"),
            ("platform", "platform", "text"),
            ("payload", "payload", "text"),
            ("state", "state", "text"),
            ("attempts", "attempts", "bigint"),
            ("error", "error", "text"),
            ("received_at", "received_at", "bigint"),
            ("updated_at", "updated_at", "bigint"),
        ],
        order: "rowid",
    },
    Table {
        name: "outbox",
        same: &["id", "idempotency_key"],
        columns: &[
            ("id", "rowid", "bigint"),
            ("idempotency_key", "idempotency_key", "text"),
            ("target", "target", "text"),
            ("body", "body", "text"),
            ("state", "state", "text"),
            ("attempts", "attempts", "bigint"),
            ("platform_message_id", "platform_message_id", "text"),
            ("error", "error", "text"),
            ("created_at", "created_at", "bigint"),
            ("updated_at", "updated_at", "bigint"),
            ("lane", "lane", "text"),
            ("platform", "platform", "text"),
            ("message", "message", "text"),
            ("next_attempt_at", "next_attempt_at", "bigint"),
            ("deadline", "deadline", "bigint"),
            ("notify_on_death", "notify_on_death", "boolean"),
            ("lead", "lead", "boolean"),
            ("resent_marked", "resent_marked", "boolean"),
        ],
        order: "rowid",
    },
    Table {
        name: "usage",
        same: &["session_id", "model"],
        columns: &[
            ("session_id", "session_id", "text"),
            ("model", "model", "text"),
            ("prompt_tokens", "prompt_tokens", "bigint"),
            ("completion_tokens", "completion_tokens", "bigint"),
            ("cached_tokens", "cached_tokens", "bigint"),
            ("api_calls", "api_calls", "bigint"),
            ("cost_usd", "cost_usd", "double precision"),
        ],
        order: "rowid",
    },
    Table {
        name: "claims",
        same: &["name"],
        columns: &[
            ("name", "name", "text"),
            ("holder", "holder", "text"),
            ("expires_at", "expires_at", "bigint"),
            ("updated_at", "updated_at", "bigint"),
        ],
        order: "rowid",
    },
    Table {
        name: "approvals",
        same: &["id"],
        columns: &[
            ("id", "id", "text"),
            ("session_key", "session_key", "text"),
            ("platform", "platform", "text"),
            ("chat_id", "chat_id", "text"),
            ("thread_id", "thread_id", "text"),
            ("command", "command", "text"),
            ("created_at", "created_at", "bigint"),
            ("outcome", "outcome", "text"),
            ("closed_at", "closed_at", "bigint"),
        ],
        order: "rowid",
    },
];

/// The tables whose identity column must continue after the copied ids.
const IDENTITIES: &[&str] = &["messages", "inbox", "outbox"];

/// Rows read from SQLite and sent to PostgreSQL at a time: bounds the memory a large history
/// takes while it is copied.
const CHUNK: i64 = 2000;

/// What one table's copy did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopiedTable {
    pub table: &'static str,
    /// Rows in the SQLite store.
    pub read: u64,
    /// Rows written to PostgreSQL; the others were there already.
    pub copied: u64,
}

/// Copy every table of the SQLite store `from` into `to`, in one transaction: all of it or
/// nothing. `from` is opened (and so migrated to this build's schema) by the caller.
pub async fn copy_sqlite_into(from: &SqliteStore, to: &PostgresStore) -> Result<Vec<CopiedTable>, StoreError> {
    let mut client = to.client().await?;
    let tx = client.transaction().await?;
    let mut report = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        report.push(copy_table(from, &tx, table).await?);
    }
    for name in IDENTITIES {
        // The next id the database hands out comes after every copied one.
        tx.execute(&format!("SELECT setval(pg_get_serial_sequence('{name}', 'id'), GREATEST((SELECT max(id) FROM {name}), 1))"), &[])
            .await?;
    }
    tx.commit().await?;
    Ok(report)
}

async fn copy_table(from: &SqliteStore, tx: &deadpool_postgres::Transaction<'_>, table: &'static Table) -> Result<CopiedTable, StoreError> {
    let names: Vec<&str> = table.columns.iter().map(|(name, _, _)| *name).collect();
    let casts: Vec<String> = table.columns.iter().enumerate().map(|(i, (_, _, kind))| format!("${}::text::{kind}", i + 1)).collect();
    // No conflict target: a clash on any unique column (the key, or a number) skips the row,
    // and `same_row` then tells a row copied before from a different one.
    let insert = format!("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING", table.name, names.join(", "), casts.join(", "));
    let statement = tx.prepare(&insert).await?;
    let same = same_row_query(table);
    let same = tx.prepare(&same).await?;
    let (mut read, mut copied, mut offset) = (0u64, 0u64, 0i64);
    loop {
        let rows = read_chunk(from, table, offset).await?;
        if rows.is_empty() {
            break;
        }
        offset += rows.len() as i64;
        for row in &rows {
            let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                row.iter().map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
            match tx.execute(&statement, &params).await? {
                0 => check_same(tx, &same, table, row).await?,
                n => copied += n,
            }
        }
        read += rows.len() as u64;
    }
    Ok(CopiedTable { table: table.name, read, copied })
}

/// Where each [`Table::same`] column is in a copied row. Every one is a column the table copies
/// (a test below holds the tables to it).
fn same_positions(table: &Table) -> Vec<usize> {
    table.same.iter().filter_map(|column| table.columns.iter().position(|(name, _, _)| name == column)).collect()
}

/// `SELECT` whether the table holds this very row: its [`Table::same`] columns all equal, given
/// in that order.
fn same_row_query(table: &Table) -> String {
    let conditions: Vec<String> = same_positions(table)
        .into_iter()
        .enumerate()
        .map(|(n, position)| {
            let (column, _, kind) = table.columns[position];
            format!("{column} IS NOT DISTINCT FROM ${}::text::{kind}", n + 1)
        })
        .collect();
    format!("SELECT count(*) FROM {} WHERE {}", table.name, conditions.join(" AND "))
}

/// A skipped row must be one copied before; anything else stops the copy.
async fn check_same(
    tx: &deadpool_postgres::Transaction<'_>,
    same: &tokio_postgres::Statement,
    table: &'static Table,
    row: &[Option<String>],
) -> Result<(), StoreError> {
    let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
        same_positions(table).into_iter().map(|position| &row[position] as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
    let found: i64 = tx.query_one(same, &params).await?.try_get(0)?;
    if found == 1 {
        return Ok(());
    }
    // Named by its first identifying column (a number or a key, never message content).
    let key = same_positions(table)
        .first()
        .map(|&position| format!("{} {}", table.columns[position].0, row[position].as_deref().unwrap_or("NULL")))
        .unwrap_or_default();
    Err(StoreError::CopyConflict { table: table.name, row: key })
}

/// Up to [`CHUNK`] rows of `table` from `offset`, each value as text (`None` for NULL).
async fn read_chunk(from: &SqliteStore, table: &'static Table, offset: i64) -> Result<Vec<Vec<Option<String>>>, StoreError> {
    let sources: Vec<&str> = table.columns.iter().map(|(_, source, _)| *source).collect();
    let sql = format!("SELECT {} FROM {} ORDER BY {} LIMIT {CHUNK} OFFSET {offset}", sources.join(", "), table.name, table.order);
    from.read_rows(sql, table.columns.len(), as_text).await
}

fn as_text(value: ValueRef<'_>) -> Option<String> {
    match value {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_tells_its_rows_apart_by_columns_it_copies() {
        for table in TABLES {
            assert!(!table.same.is_empty(), "{}", table.name);
            for column in table.same {
                assert!(table.columns.iter().any(|(name, _, _)| name == column), "{}.{column} is not copied", table.name);
            }
            assert_eq!(same_positions(table).len(), table.same.len());
        }
    }
}
