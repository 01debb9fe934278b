//! Token usage in PostgreSQL: one row per session and model, added to with an atomic upsert, and
//! the session's running totals, both in one transaction.

use super::PostgresStore;
use crate::store::{CallUsage, StoreError, UsageLedger, UsageTotals};
use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use hermes_adapter::Usage;

#[async_trait]
impl UsageLedger for PostgresStore {
    async fn usage_add(&self, session_id: &str, model: &str, usage: &Usage, cost_usd: f64) -> Result<(), StoreError> {
        let call = CallUsage { model: model.to_string(), usage: *usage, cost_usd };
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        add_usage(&tx, session_id, &call).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn session_usage(&self, session_id: &str) -> Result<UsageTotals, StoreError> {
        // Summed by the server in one row; `sum(bigint)` is NUMERIC, hence the casts back.
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "SELECT coalesce(sum(prompt_tokens), 0)::bigint, coalesce(sum(completion_tokens), 0)::bigint,
                        coalesce(sum(cached_tokens), 0)::bigint, coalesce(sum(api_calls), 0)::bigint,
                        coalesce(sum(cost_usd), 0)::double precision, coalesce(array_agg(model ORDER BY model), '{}')
                 FROM usage WHERE session_id = $1",
            )
            .await?;
        let r = client.query_one(&statement, &[&session_id]).await?;
        Ok(UsageTotals {
            prompt_tokens: r.try_get(0)?,
            completion_tokens: r.try_get(1)?,
            cached_tokens: r.try_get(2)?,
            api_calls: r.try_get(3)?,
            cost_usd: r.try_get(4)?,
            models: r.try_get(5)?,
        })
    }
}

/// Add one call's usage to the session's account for its model and to the session's totals.
/// Two writes: the caller runs it inside a transaction (its own, or a turn's).
pub(super) async fn add_usage(c: &impl GenericClient, session_id: &str, call: &CallUsage) -> Result<(), StoreError> {
    let (prompt, completion, cached) =
        (call.usage.prompt_tokens as i64, call.usage.completion_tokens as i64, call.usage.cached_tokens as i64);
    let upsert = c
        .prepare_cached(
            "INSERT INTO usage (session_id, model, prompt_tokens, completion_tokens, cached_tokens, api_calls, cost_usd)
             VALUES ($1, $2, $3, $4, $5, 1, $6)
             ON CONFLICT (session_id, model) DO UPDATE SET
                 prompt_tokens = usage.prompt_tokens + excluded.prompt_tokens,
                 completion_tokens = usage.completion_tokens + excluded.completion_tokens,
                 cached_tokens = usage.cached_tokens + excluded.cached_tokens,
                 api_calls = usage.api_calls + 1,
                 cost_usd = usage.cost_usd + excluded.cost_usd",
        )
        .await?;
    c.execute(&upsert, &[&session_id, &call.model, &prompt, &completion, &cached, &call.cost_usd]).await?;
    let totals =
        c.prepare_cached("UPDATE sessions SET input_tokens = input_tokens + $2, output_tokens = output_tokens + $3 WHERE id = $1").await?;
    c.execute(&totals, &[&session_id, &prompt, &completion]).await?;
    Ok(())
}
