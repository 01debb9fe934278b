//! SQL that destroys data (`DROP TABLE`, `DELETE` without `WHERE`, `TRUNCATE`), read from what
//! a database client is given: its arguments, a here-document, or `echo … |`.
//!
//! Only text reaching a client counts, so `grep "DROP TABLE" notes.md` stays safe.

use super::super::invocation::{Invocation, Stdin};
use super::super::judge::Judge;
use crate::keys;
use regex::Regex;
use std::sync::LazyLock;

const CLIENTS: &[&str] = &[
    "psql",
    "mysql",
    "mariadb",
    "sqlite3",
    "sqlite",
    "duckdb",
    "sqlcmd",
    "clickhouse-client",
    "clickhouse",
    "cockroach",
    "pgcli",
    "mycli",
    "litecli",
];

pub(crate) fn is_client(name: &str) -> bool {
    CLIENTS.contains(&name)
}

struct SqlPatterns {
    drop: Regex,
    delete: Regex,
    where_clause: Regex,
    truncate: Regex,
}

/// `None` only if a pattern below failed to compile, which the tests rule out; the rules then
/// fall back to flagging every client invocation (see `sql_client`).
static PATTERNS: LazyLock<Option<SqlPatterns>> = LazyLock::new(|| {
    Some(SqlPatterns {
        drop: Regex::new(r"(?i)\bDROP\s+(TABLE|DATABASE|SCHEMA)\b").ok()?,
        delete: Regex::new(r"(?i)\bDELETE\s+FROM\b").ok()?,
        where_clause: Regex::new(r"(?i)\bWHERE\b").ok()?,
        truncate: Regex::new(r"(?i)\bTRUNCATE\s+(TABLE\s+)?\w").ok()?,
    })
});

impl Judge<'_> {
    pub(crate) fn sql_client(&mut self, invocation: &Invocation) {
        let mut texts: Vec<String> = invocation.args.iter().map(|field| field.text.clone()).collect();
        match &invocation.stdin {
            Stdin::Document(document) => texts.push(document.text.clone()),
            Stdin::Pipe(producers) => texts.extend(producers.iter().flat_map(|producer| {
                producer.args.iter().map(|field| field.text.clone()).chain(producer.document.iter().map(|document| document.text.clone()))
            })),
            Stdin::Inherited | Stdin::File => {}
        }
        let Some(patterns) = PATTERNS.as_ref() else {
            self.flag(keys::SQL_DROP, "the SQL patterns could not be loaded");
            return;
        };
        for text in &texts {
            for statement in text.split(';') {
                let shown = statement.trim().chars().take(80).collect::<String>();
                if patterns.drop.is_match(statement) {
                    self.flag(keys::SQL_DROP, shown.clone());
                }
                if patterns.delete.is_match(statement) && !patterns.where_clause.is_match(statement) {
                    self.flag(keys::SQL_DELETE_WITHOUT_WHERE, shown.clone());
                }
                if patterns.truncate.is_match(statement) {
                    self.flag(keys::SQL_TRUNCATE, shown);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patterns_compile() {
        assert!(PATTERNS.is_some());
    }
}
