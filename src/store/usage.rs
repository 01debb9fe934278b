//! Token usage per session and model, and the session's running totals.

use super::{Store, StoreError};
use hermes_adapter::Usage;
use rusqlite::params;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageTotals {
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub cached_tokens: i64,
    pub api_calls: i64,
    pub cost_usd: f64,
    /// The models that served this session.
    pub models: Vec<String>,
}

impl Store {
    /// Add one API call's usage to the session's account for `model`.
    pub async fn usage_add(&self, session_id: &str, model: &str, usage: &Usage, cost_usd: f64) -> Result<(), StoreError> {
        let (session_id, model) = (session_id.to_string(), model.to_string());
        let (prompt, completion, cached) = (usage.prompt_tokens as i64, usage.completion_tokens as i64, usage.cached_tokens as i64);
        self.write(move |c| {
            c.execute(
                "INSERT INTO usage (session_id, model, prompt_tokens, completion_tokens, cached_tokens, api_calls, cost_usd) VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6)
                 ON CONFLICT(session_id, model) DO UPDATE SET
                     prompt_tokens = prompt_tokens + excluded.prompt_tokens,
                     completion_tokens = completion_tokens + excluded.completion_tokens,
                     cached_tokens = cached_tokens + excluded.cached_tokens,
                     api_calls = api_calls + 1,
                     cost_usd = cost_usd + excluded.cost_usd",
                params![session_id, model, prompt, completion, cached, cost_usd],
            )?;
            c.execute(
                "UPDATE sessions SET input_tokens = input_tokens + ?2, output_tokens = output_tokens + ?3 WHERE id = ?1",
                params![session_id, prompt, completion],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn session_usage(&self, session_id: &str) -> Result<UsageTotals, StoreError> {
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
