//! One agent turn: call the model, run the tools it asks for, repeat until it answers or the
//! iteration budget runs out; stream what happens as [`TurnEvent`]s.

use super::message::{ChatMessage, Role, ToolCallRequest};
use super::providers::{ChatProvider, ChatRequest, ModelSpec, ProviderError};
use super::tools::{ToolContext, ToolFilter, ToolRegistry};
use hermes_adapter::Usage;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Everything a turn needs; the caller assembled the prompt and the history.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    pub model: ModelSpec,
    /// System prompt first, then the history, ending with the new user message.
    pub messages: Vec<ChatMessage>,
    /// Ask the provider to stream (the caller shows deltas).
    pub stream: bool,
    /// The tools this turn may use and the context they run in; `None` = no tools.
    pub tools: Option<TurnTools>,
}

/// Tools for one turn.
#[derive(Clone)]
pub struct TurnTools {
    pub filter: ToolFilter,
    pub context: ToolContext,
}

impl std::fmt::Debug for TurnTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnTools").field("filter", &self.filter).field("scope", &self.context.scope).finish()
    }
}

/// How a turn ended successfully.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub text: String,
    pub finish_reason: String,
    pub usage: Usage,
    pub api_calls: u32,
}

#[derive(Debug, Clone)]
pub enum TurnEvent {
    TextDelta(String),
    ToolCall(ToolCallRequest),
    ToolResult {
        id: String,
        name: String,
        content: String,
    },
    /// A message the caller should persist (assistant tool-call requests and tool results; the
    /// final answer comes with `Done`).
    Persist(ChatMessage),
    Done(TurnOutcome),
    Failed(ProviderError),
}

/// Retries of one provider call.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_retries: 2, base_delay: Duration::from_millis(1000), max_delay: Duration::from_secs(30) }
    }
}

pub struct Agent {
    provider: Arc<dyn ChatProvider>,
    tools: ToolRegistry,
    max_iterations: u32,
    retry: RetryPolicy,
}

const BUDGET_NOTE: &str = "You have reached the maximum number of tool iterations for this turn. Do not call any more tools; give your best final answer now from what you have.";

impl Agent {
    pub fn new(provider: Arc<dyn ChatProvider>, tools: ToolRegistry, max_iterations: u32, retry: RetryPolicy) -> Self {
        Self { provider, tools, max_iterations: max_iterations.max(1), retry }
    }

    /// Start a turn; events arrive on the returned channel, which closes after `Done` or
    /// `Failed`. Cancelling `cancel` ends the turn with `Failed(Cancelled)`.
    pub fn run_turn(self: &Arc<Self>, request: TurnRequest, cancel: CancellationToken) -> mpsc::Receiver<TurnEvent> {
        let (tx, rx) = mpsc::channel(256);
        let agent = Arc::clone(self);
        tokio::spawn(async move {
            let result = tokio::select! {
                r = agent.drive(request, &tx) => r,
                _ = cancel.cancelled() => Err(ProviderError::Cancelled),
            };
            let last = match result {
                Ok(outcome) => TurnEvent::Done(outcome),
                Err(e) => TurnEvent::Failed(e),
            };
            // The receiver may be gone if the caller stopped listening; nothing left to do then.
            let _ = tx.send(last).await;
        });
        rx
    }

    async fn drive(&self, request: TurnRequest, tx: &mpsc::Sender<TurnEvent>) -> Result<TurnOutcome, ProviderError> {
        let mut messages = request.messages;
        let mut usage = Usage::default();
        for iteration in 0..=self.max_iterations {
            let budget_spent = iteration == self.max_iterations;
            if budget_spent {
                messages.push(ChatMessage::system(BUDGET_NOTE));
            }
            let chat = ChatRequest {
                model: request.model.clone(),
                messages: messages.clone(),
                tools: match (&request.tools, budget_spent) {
                    (Some(t), false) => self.tools.schemas_for(&t.filter, &t.context),
                    _ => Vec::new(),
                },
                stream: request.stream,
            };
            let response = self.call_with_retries(&chat, tx).await?;
            usage.prompt_tokens += response.usage.prompt_tokens;
            usage.completion_tokens += response.usage.completion_tokens;
            usage.cached_tokens += response.usage.cached_tokens;
            if response.tool_calls.is_empty() || budget_spent {
                return Ok(TurnOutcome { text: response.text, finish_reason: response.finish_reason, usage, api_calls: iteration + 1 });
            }
            let mut assistant = ChatMessage::assistant(response.text.clone());
            assistant.tool_calls = response.tool_calls.clone();
            let _ = tx.send(TurnEvent::Persist(assistant.clone())).await;
            messages.push(assistant);
            for call in &response.tool_calls {
                let _ = tx.send(TurnEvent::ToolCall(call.clone())).await;
            }
            // Independent calls of one response run concurrently.
            let results = futures::future::join_all(response.tool_calls.iter().map(|c| async {
                match &request.tools {
                    Some(t) => self.tools.call(&t.filter, &t.context, &c.name, &c.arguments).await,
                    None => super::tools::ToolOutput::error(format!("tool `{}` is not available. Answer without it.", c.name)),
                }
            }))
            .await;
            for (call, output) in response.tool_calls.iter().zip(results) {
                let _ =
                    tx.send(TurnEvent::ToolResult { id: call.id.clone(), name: call.name.clone(), content: output.content.clone() }).await;
                let mut tool_msg = ChatMessage::new(Role::Tool, output.content);
                tool_msg.tool_call_id = Some(call.id.clone());
                tool_msg.tool_name = Some(call.name.clone());
                let _ = tx.send(TurnEvent::Persist(tool_msg.clone())).await;
                messages.push(tool_msg);
            }
        }
        // The loop always returns on its last iteration (budget_spent); this is unreachable in
        // practice but keeps the function total without a panic.
        Err(ProviderError::Fatal("iteration budget exhausted".into()))
    }

    async fn call_with_retries(
        &self,
        chat: &ChatRequest,
        tx: &mpsc::Sender<TurnEvent>,
    ) -> Result<super::providers::ChatResponse, ProviderError> {
        let mut attempt = 0;
        loop {
            let (delta_tx, mut delta_rx) = mpsc::channel::<String>(256);
            let forward = async {
                let mut forwarded = 0usize;
                while let Some(d) = delta_rx.recv().await {
                    forwarded += 1;
                    let _ = tx.send(TurnEvent::TextDelta(d)).await;
                }
                forwarded
            };
            let call = async {
                let r = self.provider.complete(chat, chat.stream.then_some(&delta_tx)).await;
                drop(delta_tx);
                r
            };
            let (result, forwarded) = tokio::join!(call, forward);
            match result {
                Ok(r) => return Ok(r),
                // Text already shown must not be shown twice, so a stream that broke midway is
                // not retried.
                Err(e) if e.is_retryable() && attempt < self.retry.max_retries && forwarded == 0 => {
                    let backoff = self.retry.base_delay.saturating_mul(1 << attempt.min(16));
                    let wait = match &e {
                        ProviderError::RateLimited { retry_after: Some(after) } => *after,
                        _ => backoff,
                    }
                    .min(self.retry.max_delay);
                    tracing::warn!(error = %e, attempt = attempt + 1, wait_ms = wait.as_millis() as u64, "model call failed; retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}
