//! One agent turn: call the model, run the tools it asks for (concurrently when one response
//! asks for several), repeat until it answers or the iteration budget runs out — then one last
//! call without tools so the turn still ends with an answer. Provider failures are retried with
//! backoff and, on auth / rate-limit / outage, handed to the next configured fallback model.
//! Everything that happens is streamed to the caller as [`TurnEvent`]s.

use super::message::{ChatMessage, Role, ToolCallRequest};
use super::providers::{ChatProvider, ChatRequest, ChatResponse, ModelSpec, ProviderError};
use super::tool_protocol::{self, ParsedCall, StreamFilter, ToolProtocol};
use super::tools::context::Delegation;
use super::tools::{ToolContext, ToolFilter, ToolOutput, ToolRegistry, ToolSchema};
use futures::FutureExt;
use hermes_adapter::Usage;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

/// Sub-agents one turn may run at once.
pub const MAX_CONCURRENT_SUBAGENTS: usize = 3;

/// Everything a turn needs; the caller assembled the prompt and the history.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    pub model: ModelSpec,
    /// Tried in order when `model` fails with an auth error, a rate limit or an outage.
    pub fallbacks: Vec<ModelSpec>,
    /// System prompt first, then the history, ending with the new user message.
    pub messages: Vec<ChatMessage>,
    /// Ask the provider to stream (the caller shows deltas).
    pub stream: bool,
    /// The tools this turn may use and the context they run in; `None` = no tools.
    pub tools: Option<TurnTools>,
    pub tool_protocol: ToolProtocol,
    /// Messages the user sent while the turn runs (`/steer`, busy mode `steer`): injected after
    /// the next round of tool calls. What is left when the turn ends is the caller's to queue.
    pub steering: Option<SteeringInbox>,
    /// Compress the conversation inside the turn when a tool loop outgrows the context.
    pub compression: Option<InTurnCompression>,
}

/// When and how a turn compresses its own working conversation. The stored transcript is not
/// touched here: the gateway rotates the stored session (with lineage) before the next turn.
#[derive(Debug, Clone)]
pub struct InTurnCompression {
    pub context_tokens: u64,
    /// Fraction of `context_tokens` above which the middle is summarized.
    pub threshold: f64,
    pub protect_first: usize,
    pub protect_last: usize,
    pub target_ratio: f64,
    pub summarizer: ModelSpec,
}

impl TurnRequest {
    pub fn new(model: ModelSpec, messages: Vec<ChatMessage>) -> Self {
        Self {
            model,
            fallbacks: Vec::new(),
            messages,
            stream: false,
            tools: None,
            tool_protocol: ToolProtocol::default(),
            steering: None,
            compression: None,
        }
    }
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

/// Guidance for a running turn, shared between the session actor (which adds) and the turn
/// (which takes after a tool round).
#[derive(Debug, Clone, Default)]
pub struct SteeringInbox(Arc<Mutex<Vec<String>>>);

impl SteeringInbox {
    pub fn push(&self, text: impl Into<String>) {
        if let Ok(mut v) = self.0.lock() {
            v.push(text.into());
        }
    }
    pub fn take(&self) -> Vec<String> {
        self.0.lock().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default()
    }
}

/// Answers by which the model chooses to say nothing: stored, never delivered.
const SILENCE_TOKENS: [&str; 4] = ["[SILENT]", "SILENT", "NO_REPLY", "NO REPLY"];

/// Whether the answer is one of the [`SILENCE_TOKENS`] and nothing else.
pub fn is_silence(answer: &str) -> bool {
    let answer = answer.trim();
    SILENCE_TOKENS.iter().any(|token| answer.eq_ignore_ascii_case(token))
}

/// How a turn ended successfully.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub text: String,
    pub finish_reason: String,
    pub usage: Usage,
    pub api_calls: u32,
    /// The model that wrote the answer (a fallback, when the primary failed).
    pub model: String,
}

#[derive(Debug, Clone)]
pub enum TurnEvent {
    TextDelta(String),
    ToolCall(ToolCallRequest),
    ToolResult {
        id: String,
        name: String,
        content: String,
        is_error: bool,
    },
    /// A message the caller should persist (assistant tool-call requests, tool results, injected
    /// steering; the final answer comes with `Done`).
    Persist(ChatMessage),
    /// One provider call finished; for accounting per model.
    CallUsage {
        model: String,
        usage: Usage,
    },
    /// The working conversation was compressed inside the turn (a long tool loop).
    Compressed {
        tokens_before: u64,
        tokens_after: u64,
    },
    /// The primary model failed and the turn continues on a fallback.
    FellBack {
        from: String,
        to: String,
        reason: String,
    },
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

/// Errors for which the next fallback model is tried.
fn falls_back(e: &ProviderError) -> bool {
    matches!(e, ProviderError::Auth(_) | ProviderError::RateLimited { .. } | ProviderError::Transient(_))
}

impl Agent {
    pub fn new(provider: Arc<dyn ChatProvider>, tools: ToolRegistry, max_iterations: u32, retry: RetryPolicy) -> Self {
        Self { provider, tools, max_iterations: max_iterations.max(1), retry }
    }

    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    pub fn provider(&self) -> &Arc<dyn ChatProvider> {
        &self.provider
    }

    /// Start a turn; events arrive on the returned channel, which closes after `Done` or
    /// `Failed`. Cancelling `cancel` ends the turn with `Failed(Cancelled)`.
    pub fn run_turn(self: &Arc<Self>, request: TurnRequest, cancel: CancellationToken) -> mpsc::Receiver<TurnEvent> {
        let (tx, rx) = mpsc::channel(256);
        let agent = Arc::clone(self);
        tokio::spawn(async move {
            // A panic anywhere in the turn ends it as a failure the gateway can report, instead
            // of a silently closed channel.
            let driven = std::panic::AssertUnwindSafe(agent.drive(request, &tx, cancel.clone())).catch_unwind();
            let result = tokio::select! {
                r = driven => r.unwrap_or_else(|panic| Err(crashed(panic))),
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

    /// Run a turn to its end and return the answer (sub-agents, background tasks, compression).
    pub async fn run_to_end(self: &Arc<Self>, request: TurnRequest, cancel: CancellationToken) -> Result<TurnOutcome, ProviderError> {
        let mut events = self.run_turn(request, cancel);
        while let Some(ev) = events.recv().await {
            match ev {
                TurnEvent::Done(o) => return Ok(o),
                TurnEvent::Failed(e) => return Err(e),
                _ => {}
            }
        }
        Err(ProviderError::Fatal("the agent stopped unexpectedly".into()))
    }

    /// The loop: ask the model, run the tools it asked for, feed the results back, until it
    /// answers or the iteration budget is spent.
    async fn drive(
        self: &Arc<Self>,
        request: TurnRequest,
        tx: &mpsc::Sender<TurnEvent>,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, ProviderError> {
        let mut work = self.begin(request, &cancel);
        for iteration in 0..=self.max_iterations {
            let budget_spent = iteration == self.max_iterations;
            if budget_spent {
                work.messages.push(ChatMessage::system(BUDGET_NOTE));
            }
            if iteration > 0 {
                self.compress_when_over_threshold(&mut work, &cancel, tx).await;
            }
            let (response, used) = self.ask_model(&mut work, budget_spent, &cancel, tx).await?;
            work.usage.add(&response.usage);
            let _ = tx.send(TurnEvent::CallUsage { model: used.clone(), usage: response.usage }).await;
            let (text, calls) = work.calls_in(response.text, response.tool_calls, budget_spent, iteration);
            if calls.is_empty() || budget_spent {
                let finish_reason = if calls.is_empty() { response.finish_reason } else { "length".to_string() };
                let text = if work.text_protocol { tool_protocol::parse(&text, "").0 } else { text };
                return Ok(TurnOutcome { text, finish_reason, usage: work.usage, api_calls: iteration + 1, model: used });
            }
            self.run_tool_round(&mut work, text, &calls, tx).await;
            work.inject_steering(tx).await;
        }
        // The loop always returns on its last iteration (budget_spent); this keeps the function
        // total without a panic.
        Err(ProviderError::Fatal("iteration budget exhausted".into()))
    }

    /// The working state of a turn: its tools bound to this turn (cancellation, sub-agents), the
    /// tool schemas offered and, for the text protocol, the tools described in the system prompt.
    fn begin(self: &Arc<Self>, request: TurnRequest, cancel: &CancellationToken) -> TurnWork {
        let TurnRequest { model, fallbacks, mut messages, stream, tools, tool_protocol, steering, compression } = request;
        let mut tools = tools;
        if let Some(t) = tools.as_mut() {
            t.context.cancel = cancel.clone();
            if t.context.delegation.is_none() {
                t.context.delegation = Some(Delegation {
                    agent: Arc::clone(self),
                    model: model.clone(),
                    fallbacks: fallbacks.clone(),
                    filter: t.filter.clone(),
                    depth: 0,
                    slots: Arc::new(Semaphore::new(MAX_CONCURRENT_SUBAGENTS)),
                });
            }
        }
        let schemas = tools.as_ref().map(|t| self.tools.schemas_for(&t.filter, &t.context)).unwrap_or_default();
        let text_protocol = tool_protocol == ToolProtocol::Hermes && !schemas.is_empty();
        if text_protocol && let Some(first) = messages.first_mut().filter(|m| m.role == Role::System) {
            first.content = format!("{}\n\n{}", first.content, tool_protocol::tools_prompt(&schemas));
        }
        TurnWork {
            messages,
            chain: std::iter::once(model).chain(fallbacks).collect(),
            usage: Usage::default(),
            tools,
            schemas,
            text_protocol,
            tool_protocol,
            stream,
            steering,
            compression,
        }
    }

    /// A long tool loop outgrew the context: summarize its middle before the next call.
    async fn compress_when_over_threshold(self: &Arc<Self>, work: &mut TurnWork, cancel: &CancellationToken, tx: &mpsc::Sender<TurnEvent>) {
        if let Some(policy) = &work.compression
            && super::compress::estimate_tokens(&work.messages) as f64 > policy.threshold * policy.context_tokens as f64
        {
            self.compress_in_turn(&mut work.messages, policy, cancel, tx).await;
        }
    }

    /// One model response (through the fallback chain); a context overflow compresses once and
    /// asks again. On the last iteration no tools are offered.
    async fn ask_model(
        self: &Arc<Self>,
        work: &mut TurnWork,
        budget_spent: bool,
        cancel: &CancellationToken,
        tx: &mpsc::Sender<TurnEvent>,
    ) -> Result<(ChatResponse, String), ProviderError> {
        // An MCP server may change its tools mid-turn (`tools/list_changed`): offer what is
        // registered now (MCP schemas are cached per hub generation, so this is cheap). The text
        // protocol described its tools in the system prompt once and keeps them.
        if !work.text_protocol
            && self.tools.mcp_source().is_some()
            && let Some(t) = &work.tools
        {
            work.schemas = self.tools.schemas_for(&t.filter, &t.context);
        }
        let parse_text_calls = work.parses_text_calls(budget_spent);
        match self.call_with_fallback(work.chat_request(budget_spent), &mut work.chain, parse_text_calls, tx).await {
            Err(ProviderError::ContextOverflow(detail)) => match &work.compression {
                Some(policy) if self.compress_in_turn(&mut work.messages, policy, cancel, tx).await => {
                    self.call_with_fallback(work.chat_request(budget_spent), &mut work.chain, parse_text_calls, tx).await
                }
                _ => Err(ProviderError::ContextOverflow(detail)),
            },
            other => other,
        }
    }

    /// Record the assistant's tool calls, run them (independent calls of one response run
    /// concurrently) and record their results, streaming each to the caller.
    async fn run_tool_round(&self, work: &mut TurnWork, text: String, calls: &[ParsedCall], tx: &mpsc::Sender<TurnEvent>) {
        let requests: Vec<ToolCallRequest> = calls
            .iter()
            .map(|c| match c {
                ParsedCall::Call(r) => r.clone(),
                ParsedCall::Malformed { id, raw, .. } => {
                    ToolCallRequest { id: id.clone(), name: "invalid_tool_call".into(), arguments: raw.clone() }
                }
            })
            .collect();
        let mut assistant = ChatMessage::assistant(text);
        assistant.tool_calls = requests.clone();
        work.persist(assistant, tx).await;
        for call in &requests {
            let _ = tx.send(TurnEvent::ToolCall(call.clone())).await;
        }
        let results = futures::future::join_all(calls.iter().map(|c| self.run_call(c, work.tools.as_ref()))).await;
        for (call, output) in requests.iter().zip(results) {
            crate::observe::metrics::global().tool_call(&call.name, output.is_error);
            let _ = tx
                .send(TurnEvent::ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    content: output.content.clone(),
                    is_error: output.is_error,
                })
                .await;
            let mut tool_msg = ChatMessage::new(Role::Tool, output.content);
            tool_msg.tool_call_id = Some(call.id.clone());
            tool_msg.tool_name = Some(call.name.clone());
            work.persist(tool_msg, tx).await;
        }
    }

    /// Summarize the middle of the working conversation (system prompt kept); true when it
    /// shrank. A failed summary leaves the conversation as it was.
    async fn compress_in_turn(
        self: &Arc<Self>,
        messages: &mut Vec<ChatMessage>,
        policy: &InTurnCompression,
        cancel: &CancellationToken,
        tx: &mpsc::Sender<TurnEvent>,
    ) -> bool {
        let system_len = messages.iter().take_while(|m| m.role == Role::System).count();
        let body = &messages[system_len..];
        let Some(split) = super::compress::split(body, policy.protect_first, policy.protect_last) else { return false };
        let (head, tail) = (system_len + split.head, system_len + split.tail);
        let middle = &messages[head..tail];
        let target = ((super::compress::estimate_tokens(middle) as f64) * policy.target_ratio).max(200.0) as u64;
        let before = super::compress::estimate_tokens(messages);
        match super::compress::summarize(self, policy.summarizer.clone(), middle, None, target, cancel.child_token()).await {
            Ok(summary) => {
                messages.splice(head..tail, [super::compress::summary_message(&summary)]);
                let after = super::compress::estimate_tokens(messages);
                let _ = tx.send(TurnEvent::Compressed { tokens_before: before, tokens_after: after }).await;
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "in-turn compression failed; continuing uncompressed");
                false
            }
        }
    }

    async fn run_call(&self, call: &ParsedCall, tools: Option<&TurnTools>) -> ToolOutput {
        match (call, tools) {
            (ParsedCall::Malformed { problem, .. }, _) => ToolOutput::error(format!(
                "{problem}. Write the call as <tool_call>{{\"name\": \"<tool>\", \"arguments\": {{...}}}}</tool_call> with valid JSON, or answer without tools."
            )),
            (ParsedCall::Call(c), Some(t)) => {
                let mut ctx = t.context.clone();
                ctx.call_id = c.id.clone();
                self.tools.call(&t.filter, &ctx, &c.name, &c.arguments).await
            }
            (ParsedCall::Call(c), None) => ToolOutput::error(format!("tool `{}` is not available. Answer without it.", c.name)),
        }
    }

    /// One model response from the first model in `chain` that gives one. A model that fails with
    /// an auth error, a rate limit or an outage is dropped from the chain for the rest of the turn.
    async fn call_with_fallback(
        &self,
        mut chat: ChatRequest,
        chain: &mut Vec<ModelSpec>,
        filter_blocks: bool,
        tx: &mpsc::Sender<TurnEvent>,
    ) -> Result<(ChatResponse, String), ProviderError> {
        loop {
            chat.model = chain[0].clone();
            match self.call_with_retries(&chat, filter_blocks, tx).await {
                Ok(r) => return Ok((r, chain[0].model.clone())),
                Err((e, shown)) if falls_back(&e) && chain.len() > 1 && !shown => {
                    let from = chain.remove(0);
                    tracing::warn!(error = %e, from = %from.model, to = %chain[0].model, "model failed; using the next fallback");
                    let _ = tx.send(TurnEvent::FellBack { from: from.model, to: chain[0].model.clone(), reason: e.to_string() }).await;
                }
                Err((e, _)) => return Err(e),
            }
        }
    }

    /// One provider call with retries; on failure also says whether text was already shown.
    async fn call_with_retries(
        &self,
        chat: &ChatRequest,
        filter_blocks: bool,
        tx: &mpsc::Sender<TurnEvent>,
    ) -> Result<ChatResponse, (ProviderError, bool)> {
        let mut attempt = 0;
        loop {
            let (delta_tx, mut delta_rx) = mpsc::channel::<String>(256);
            let forward = async {
                let mut forwarded = 0usize;
                let mut filter = StreamFilter::default();
                while let Some(d) = delta_rx.recv().await {
                    let shown = if filter_blocks { filter.push(&d) } else { d };
                    if !shown.is_empty() {
                        forwarded += 1;
                        let _ = tx.send(TurnEvent::TextDelta(shown)).await;
                    }
                }
                let rest = filter.finish();
                if !rest.is_empty() {
                    forwarded += 1;
                    let _ = tx.send(TurnEvent::TextDelta(rest)).await;
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
                Err(e) => return Err((e, forwarded > 0)),
            }
        }
    }
}

/// One turn's working conversation and what it was given to work with.
struct TurnWork {
    messages: Vec<ChatMessage>,
    /// The model, then its fallbacks; a model that fails over is dropped for the rest of the turn.
    chain: Vec<ModelSpec>,
    usage: Usage,
    tools: Option<TurnTools>,
    schemas: Vec<Arc<ToolSchema>>,
    /// Tools are described in the system prompt and called in text (`<tool_call>` blocks).
    text_protocol: bool,
    tool_protocol: ToolProtocol,
    stream: bool,
    steering: Option<SteeringInbox>,
    compression: Option<InTurnCompression>,
}

impl TurnWork {
    /// Whether `<tool_call>` blocks in the model's text are calls (and are kept out of the
    /// streamed text).
    fn parses_text_calls(&self, budget_spent: bool) -> bool {
        !budget_spent && self.tool_protocol != ToolProtocol::Native && self.tools.is_some()
    }

    fn chat_request(&self, budget_spent: bool) -> ChatRequest {
        let offered = if budget_spent || self.text_protocol { Vec::new() } else { self.schemas.clone() };
        let messages = if self.text_protocol { tool_protocol::to_text_messages(&self.messages) } else { self.messages.clone() };
        ChatRequest { model: self.chain[0].clone(), messages, tools: offered, stream: self.stream }
    }

    /// The tool calls of a response: native ones, else `<tool_call>` blocks in its text (which a
    /// native-protocol model's history then keeps out of its text).
    fn calls_in(&self, mut text: String, native: Vec<ToolCallRequest>, budget_spent: bool, iteration: u32) -> (String, Vec<ParsedCall>) {
        let mut calls: Vec<ParsedCall> = native.into_iter().map(ParsedCall::Call).collect();
        if calls.is_empty() && self.parses_text_calls(budget_spent) && text.contains("<tool_call>") {
            let (visible, parsed) = tool_protocol::parse(&text, &format!("call_{iteration}_"));
            calls = parsed;
            if !self.text_protocol {
                text = visible;
            }
        }
        (text, calls)
    }

    async fn persist(&mut self, message: ChatMessage, tx: &mpsc::Sender<TurnEvent>) {
        let _ = tx.send(TurnEvent::Persist(message.clone())).await;
        self.messages.push(message);
    }

    /// What the user added while the tools ran (`/steer`) joins the conversation now.
    async fn inject_steering(&mut self, tx: &mpsc::Sender<TurnEvent>) {
        let added = self.steering.as_ref().map(SteeringInbox::take).unwrap_or_default();
        for text in added {
            self.persist(ChatMessage::user(format!("[The user added, while you were working:] {text}")), tx).await;
        }
    }
}

/// Log a turn's panic under a fresh incident id (the log is redacted) and name the incident.
fn crashed(panic: Box<dyn std::any::Any + Send>) -> ProviderError {
    let incident = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let message =
        panic.downcast_ref::<String>().map(String::as_str).or_else(|| panic.downcast_ref::<&str>().copied()).unwrap_or("(no message)");
    tracing::error!(incident, panic = %crate::observe::redact::redact_patterns(message), "a turn panicked");
    ProviderError::Crashed { incident }
}
