//! Token usage per session and model, and the session's running totals.

use crate::store::StoreError;
use async_trait::async_trait;
use hermes_adapter::Usage;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageTotals {
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub cached_tokens: i64,
    pub api_calls: i64,
    pub cost_usd: f64,
    /// The models that served this session, in name order.
    pub models: Vec<String>,
}

/// One model call's usage and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct CallUsage {
    pub model: String,
    pub usage: Usage,
    pub cost_usd: f64,
}

/// Named for what it keeps: `Usage` is the adapters' per-call token count.
#[async_trait]
pub trait UsageLedger: Send + Sync {
    /// Add one API call's usage to the session's account for `model` and to the session's
    /// token totals.
    async fn usage_add(&self, session_id: &str, model: &str, usage: &Usage, cost_usd: f64) -> Result<(), StoreError>;

    async fn session_usage(&self, session_id: &str) -> Result<UsageTotals, StoreError>;
}
