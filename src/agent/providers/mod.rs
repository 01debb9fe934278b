//! Model providers behind one trait. A provider turns a conversation into one model response,
//! streaming text deltas as they arrive, and classifies its failures so the turn loop knows what
//! to retry.

pub mod openai;
pub mod sse;

use crate::agent::message::{ChatMessage, ToolCallRequest};
use crate::agent::tools::ToolSchema;
use async_trait::async_trait;
use hermes_adapter::Usage;
use std::time::Duration;
use tokio::sync::mpsc;

/// Which model to call and where. Carried per request so a session can switch models.
#[derive(Clone, PartialEq, Eq)]
pub struct ModelSpec {
    pub model: String,
    pub provider: Option<String>,
    pub base_url: String,
    pub api_key: Option<String>,
}

impl std::fmt::Debug for ModelSpec {
    // The key never reaches a log line, even through Debug.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSpec")
            .field("model", &self.model)
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "****"))
            .finish()
    }
}

#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub model: ModelSpec,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSchema>,
    pub stream: bool,
}

/// One model response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCallRequest>,
    pub finish_reason: String,
    pub usage: Usage,
}

/// A provider failure, classified.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    #[error("rate limited by the model provider (retry after {retry_after:?})")]
    RateLimited { retry_after: Option<Duration> },
    #[error("the model provider rejected the credentials: {0}")]
    Auth(String),
    #[error("the conversation is too long for the model's context: {0}")]
    ContextOverflow(String),
    #[error("temporary provider failure: {0}")]
    Transient(String),
    #[error("provider error: {0}")]
    Fatal(String),
    #[error("cancelled")]
    Cancelled,
}

impl ProviderError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, ProviderError::RateLimited { .. } | ProviderError::Transient(_))
    }
    /// Short class name shown to users ("Sorry, I encountered an error (<kind>)").
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::RateLimited { .. } => "RateLimited",
            ProviderError::Auth(_) => "AuthenticationError",
            ProviderError::ContextOverflow(_) => "ContextOverflow",
            ProviderError::Transient(_) => "ProviderUnavailable",
            ProviderError::Fatal(_) => "ProviderError",
            ProviderError::Cancelled => "Cancelled",
        }
    }
}

#[async_trait]
pub trait ChatProvider: Send + Sync + 'static {
    /// Run one completion. When `deltas` is given and the request streams, text deltas are sent to
    /// it as they arrive; the returned response still carries the whole text.
    async fn complete(&self, request: &ChatRequest, deltas: Option<&mpsc::Sender<String>>) -> Result<ChatResponse, ProviderError>;
}
