//! Model providers behind one trait. A provider turns a conversation into one model response,
//! streaming text deltas as they arrive, and classifies its failures so the turn loop knows what
//! to retry.

pub(crate) mod anthropic;
pub(crate) mod http;
pub mod openai;
pub(crate) mod sse;

use crate::agent::message::{ChatMessage, ToolCallRequest};
use crate::agent::tools::ToolSchema;
use async_trait::async_trait;
use hermes_adapter::Usage;
use std::sync::Arc;
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
    pub tools: Vec<Arc<ToolSchema>>,
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
    /// The turn panicked; the incident id is in the log with the panic.
    #[error("internal error (incident {incident})")]
    Crashed { incident: String },
}

impl ProviderError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, ProviderError::RateLimited { .. } | ProviderError::Transient(_))
    }
    /// Short class name shown to users ("Sorry, I encountered an error (`<kind>`)").
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::RateLimited { .. } => "RateLimited",
            ProviderError::Auth(_) => "AuthenticationError",
            ProviderError::ContextOverflow(_) => "ContextOverflow",
            ProviderError::Transient(_) => "ProviderUnavailable",
            ProviderError::Fatal(_) => "ProviderError",
            ProviderError::Cancelled => "Cancelled",
            ProviderError::Crashed { .. } => "InternalError",
        }
    }
}

#[async_trait]
pub trait ChatProvider: Send + Sync + 'static {
    /// Run one completion. When `deltas` is given and the request streams, text deltas are sent to
    /// it as they arrive; the returned response still carries the whole text.
    async fn complete(&self, request: &ChatRequest, deltas: Option<&mpsc::Sender<String>>) -> Result<ChatResponse, ProviderError>;
}

/// The HTTP API a model is spoken to with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    /// OpenAI-compatible `POST {base_url}/chat/completions`.
    ChatCompletions,
    /// Anthropic `POST {base_url}/v1/messages`.
    AnthropicMessages,
}

/// Hosts that serve Claude (and everything else) through the OpenAI-compatible API, so a
/// `claude-…` model name there does not mean the Anthropic wire format.
const OPENAI_COMPATIBLE_AGGREGATORS: &[&str] =
    &["openrouter.ai", "ai-gateway.vercel.sh", "api.requesty.ai", "router.requesty.ai", "api.portkey.ai", "gateway.ai.cloudflare.com"];

/// Which API `spec` is called with: Anthropic Messages for the `anthropic` provider, for
/// Anthropic's own host, for the `/anthropic` endpoints other vendors expose (MiniMax, DeepSeek,
/// Moonshot, …) and for an unlabelled `claude-…` model outside the known aggregators;
/// Chat Completions for everything else.
pub fn wire_format(spec: &ModelSpec) -> WireFormat {
    let labelled_anthropic = spec.provider.as_deref().is_some_and(|p| p.trim().eq_ignore_ascii_case("anthropic"));
    let unlabelled_claude =
        spec.provider.is_none() && spec.model.to_ascii_lowercase().starts_with("claude-") && !is_aggregator(&spec.base_url);
    if labelled_anthropic || is_anthropic_url(&spec.base_url) || unlabelled_claude {
        WireFormat::AnthropicMessages
    } else {
        WireFormat::ChatCompletions
    }
}

fn is_aggregator(base_url: &str) -> bool {
    let host = reqwest::Url::parse(base_url.trim()).ok().and_then(|u| u.host_str().map(str::to_ascii_lowercase));
    host.is_some_and(|h| OPENAI_COMPATIBLE_AGGREGATORS.iter().any(|a| h == *a || h.strip_suffix(a).is_some_and(|rest| rest.ends_with('.'))))
}

/// Anthropic's own host, or a vendor's Anthropic-compatible endpoint.
fn is_anthropic_url(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url.trim()) else { return false };
    let path = url.path().trim_end_matches('/').to_ascii_lowercase();
    url.host_str().is_some_and(|h| h.eq_ignore_ascii_case("api.anthropic.com"))
        || path.ends_with("/anthropic")
        || path.ends_with("/anthropic/v1")
}

/// A provider that speaks each request's [`WireFormat`], so a session can switch between an
/// OpenAI-compatible model and a Claude model without a restart.
#[derive(Clone)]
pub struct ProviderRouter {
    openai: openai::OpenAiCompatible,
    anthropic: anthropic::AnthropicMessages,
}

impl ProviderRouter {
    pub fn new(request_timeout: Duration) -> Self {
        // One client, so both wire formats share its connection pool.
        let client = http::ModelClient::new(request_timeout);
        Self { openai: openai::OpenAiCompatible::with_client(client.clone()), anthropic: anthropic::AnthropicMessages::with_client(client) }
    }
}

#[async_trait]
impl ChatProvider for ProviderRouter {
    async fn complete(&self, request: &ChatRequest, deltas: Option<&mpsc::Sender<String>>) -> Result<ChatResponse, ProviderError> {
        let started = std::time::Instant::now();
        let (wire, result) = match wire_format(&request.model) {
            WireFormat::ChatCompletions => ("openai", self.openai.complete(request, deltas).await),
            WireFormat::AnthropicMessages => ("anthropic", self.anthropic.complete(request, deltas).await),
        };
        record_request(request.model.provider.as_deref().unwrap_or(wire), &request.model.model, started.elapsed(), &result);
        result
    }
}

/// One request in `/metrics`: latency, outcome and tokens per provider and model.
fn record_request(provider: &str, model: &str, elapsed: Duration, result: &Result<ChatResponse, ProviderError>) {
    use crate::observe::metrics::{LlmOutcome, global};
    let outcome = match result {
        Ok(r) => LlmOutcome::Answered { prompt_tokens: r.usage.prompt_tokens, completion_tokens: r.usage.completion_tokens },
        Err(e) => LlmOutcome::Failed(e.kind()),
    };
    global().llm_request(provider, model, elapsed, outcome);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(model: &str, provider: Option<&str>, base_url: &str) -> ModelSpec {
        ModelSpec { model: model.into(), provider: provider.map(Into::into), base_url: base_url.into(), api_key: Some("sk-secret".into()) }
    }

    #[test]
    fn wire_format_table() {
        use WireFormat::{AnthropicMessages as A, ChatCompletions as C};
        let cases: &[(&str, Option<&str>, &str, WireFormat)] = &[
            // The provider label decides first.
            ("claude-sonnet-4-5", Some("anthropic"), "https://api.anthropic.com", A),
            ("anything", Some("Anthropic"), "http://127.0.0.1:9000/v1", A),
            ("claude-sonnet-4-5", Some("openrouter"), "https://openrouter.ai/api/v1", C),
            ("gpt-4o", Some("openai"), "https://api.openai.com/v1", C),
            // Anthropic's host and the vendors' /anthropic endpoints, whatever the model.
            ("claude-opus-4-1", None, "https://api.anthropic.com", A),
            ("claude-opus-4-1", None, "https://API.anthropic.com/v1/", A),
            ("MiniMax-M2", None, "https://api.minimax.io/anthropic", A),
            ("deepseek-chat", None, "https://api.deepseek.com/anthropic/", A),
            ("kimi-k2", Some("custom"), "https://api.moonshot.ai/anthropic/v1", A),
            ("deepseek-chat", None, "https://api.deepseek.com/v1", C),
            // An unlabelled claude- model: Anthropic unless the host is an OpenAI-style aggregator.
            ("claude-3-5-haiku-latest", None, "https://my-proxy.example/v1", A),
            ("Claude-3-5-haiku", None, "https://my-proxy.example/v1", A),
            ("claude-sonnet-4-5", None, "https://openrouter.ai/api/v1", C),
            ("claude-sonnet-4-5", None, "https://eu.openrouter.ai/api/v1", C),
            ("anthropic/claude-sonnet-4-5", None, "https://openrouter.ai/api/v1", C),
            // Everything else speaks Chat Completions.
            ("gpt-4o", None, "https://api.openai.com/v1", C),
            ("llama3", None, "http://localhost:11434/v1", C),
            ("gpt-4o", None, "not a url", C),
            ("claudette", None, "https://api.openai.com/v1", C),
        ];
        for (model, provider, base_url, expected) in cases {
            assert_eq!(wire_format(&spec(model, *provider, base_url)), *expected, "{model} / {provider:?} / {base_url}");
        }
    }

    #[tokio::test]
    async fn router_dispatches_on_the_wire_format() {
        let llm = hermes_fakes::FakeLlm::start().await;
        let router = ProviderRouter::new(Duration::from_secs(10));
        for (provider, model) in [(Some("anthropic"), "claude-test"), (None, "gpt-test")] {
            let request = ChatRequest {
                model: spec(model, provider, &llm.base_url()),
                messages: vec![ChatMessage::system("sys"), ChatMessage::user(model)],
                tools: Vec::new(),
                stream: false,
            };
            let response = router.complete(&request, None).await.map_err(|e| e.to_string()).unwrap();
            assert_eq!(response.text, format!("echo: {model}"));
        }
        let wires: Vec<String> = llm.requests().iter().map(|r| r.wire().to_string()).collect();
        assert_eq!(wires, vec!["anthropic", "openai"]);
    }
}
