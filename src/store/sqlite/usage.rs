//! Token usage in SQLite: one row per session and model, and the session's running totals.

use super::{CachedStatements, SqliteStore};
use crate::store::{CallUsage, StoreError, UsageLedger, UsageTotals};
use async_trait::async_trait;
use hermes_adapter::Usage;
use rusqlite::{Connection, params};

#[async_trait]
impl UsageLedger for SqliteStore {
    async fn usage_add(&self, session_id: &str, model: &str, usage: &Usage, cost_usd: f64) -> Result<(), StoreError> {
        let call = CallUsage { model: model.to_string(), usage: *usage, cost_usd };
        let session_id = session_id.to_string();
        self.write(move |c| add_usage(c, &session_id, &call)).await
    }

    async fn session_usage(&self, session_id: &str) -> Result<UsageTotals, StoreError> {
        let session_id = session_id.to_string();
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT model, prompt_tokens, completion_tokens, cached_tokens, api_calls, cost_usd FROM usage WHERE session_id = ?1 ORDER BY model",
            )?;
            let mut totals = UsageTotals::default();
            let rows = stmt.query_map([session_id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?, r.get::<_, i64>(4)?, r.get::<_, f64>(5)?))
            })?;
            for row in rows {
                let (model, prompt, completion, cached, calls, cost) = row?;
                totals.prompt_tokens += prompt;
                totals.completion_tokens += completion;
                totals.cached_tokens += cached;
                totals.api_calls += calls;
                totals.cost_usd += cost;
                totals.models.push(model);
            }
            Ok(totals)
        })
        .await
    }
}

/// Add one call's usage to the session's account for its model and to the session's totals.
pub(super) fn add_usage(c: &Connection, session_id: &str, call: &CallUsage) -> Result<(), StoreError> {
    let (prompt, completion, cached) =
        (call.usage.prompt_tokens as i64, call.usage.completion_tokens as i64, call.usage.cached_tokens as i64);
    c.run(
        "INSERT INTO usage (session_id, model, prompt_tokens, completion_tokens, cached_tokens, api_calls, cost_usd) VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6)
         ON CONFLICT(session_id, model) DO UPDATE SET
             prompt_tokens = prompt_tokens + excluded.prompt_tokens,
             completion_tokens = completion_tokens + excluded.completion_tokens,
             cached_tokens = cached_tokens + excluded.cached_tokens,
             api_calls = api_calls + 1,
             cost_usd = cost_usd + excluded.cost_usd",
        params![session_id, call.model, prompt, completion, cached, call.cost_usd],
    )?;
    c.run(
        "UPDATE sessions SET input_tokens = input_tokens + ?2, output_tokens = output_tokens + ?3 WHERE id = ?1",
        params![session_id, prompt, completion],
    )?;
    Ok(())
}
