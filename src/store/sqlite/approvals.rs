//! Pending approvals in SQLite: a row per prompt, open until answered. Closing marks the row with
//! its outcome rather than deleting it, so the history of who was asked what stays inspectable.

use super::{CachedStatements, SqliteStore, now_ms, to_time};
use crate::store::{Approvals, PendingApproval, StoreError};
use async_trait::async_trait;
use hermes_adapter::{ChatTarget, Platform};
use rusqlite::params;

#[async_trait]
impl Approvals for SqliteStore {
    async fn approval_open(&self, pending: &PendingApproval) -> Result<(), StoreError> {
        let p = pending.clone();
        self.write(move |c| {
            c.run(
                "INSERT INTO approvals (id, session_key, platform, chat_id, thread_id, command, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    p.id,
                    p.session_key,
                    p.target.platform.as_str(),
                    p.target.chat_id,
                    p.target.thread_id,
                    p.command,
                    p.created_at.timestamp_millis()
                ],
            )?;
            Ok(())
        })
        .await
    }

    async fn approval_close(&self, id: &str, outcome: &str) -> Result<bool, StoreError> {
        let (id, outcome) = (id.to_string(), outcome.to_string());
        self.write(move |c| {
            let changed = c.run(
                "UPDATE approvals SET outcome = ?2, closed_at = ?3 WHERE id = ?1 AND outcome IS NULL",
                params![id, outcome, now_ms()],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    async fn approval_close_orphans(&self, outcome: &str, platform: Option<&str>) -> Result<Vec<PendingApproval>, StoreError> {
        let outcome = outcome.to_string();
        let platform = platform.map(str::to_string);
        self.write(move |c| {
            let open = {
                let mut stmt = c.prepare_cached(
                    "SELECT id, session_key, platform, chat_id, thread_id, command, created_at FROM approvals
                     WHERE outcome IS NULL AND (?1 IS NULL OR platform = ?1) ORDER BY created_at, rowid",
                )?;
                let rows = stmt.query_map(params![platform], |r| {
                    Ok(PendingApproval {
                        id: r.get(0)?,
                        session_key: r.get(1)?,
                        target: ChatTarget { platform: Platform::new(&r.get::<_, String>(2)?), chat_id: r.get(3)?, thread_id: r.get(4)? },
                        command: r.get(5)?,
                        created_at: to_time(r.get(6)?),
                    })
                })?;
                rows.collect::<Result<Vec<_>, _>>()?
            };
            c.run(
                "UPDATE approvals SET outcome = ?1, closed_at = ?2 WHERE outcome IS NULL AND (?3 IS NULL OR platform = ?3)",
                params![outcome, now_ms(), platform],
            )?;
            Ok(open)
        })
        .await
    }
}
