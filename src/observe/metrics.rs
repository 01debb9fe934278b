//! The gateway's Prometheus metrics (`/metrics` on the admin listener, Prometheus text format
//! 0.0.4 through the `prometheus-client` crate): messages in and out, send errors, reply latency,
//! LLM latency and tokens, tool calls, approvals, cron runs, adapter states and restarts, queue
//! depths, the outbox's waiting and undelivered messages per platform, each MCP server's state,
//! tools and calls, resident memory and the build.
//!
//! **One process-wide registry ([`global`]), not a handle passed down.** The events happen in the
//! inbox, the outbound path, the agent's provider and tool loop, the approval board, the router,
//! the cron runner and the supervisor: threading an `Arc<Metrics>` through every constructor on
//! the way would change a dozen signatures (and their tests) for what is, in the end, one set of
//! counters per process. A `OnceLock` gives the same sharing with one line at each site; tests
//! that need their own numbers read deltas, or build a [`Metrics`] of their own.
//!
//! **Recording is cheap.** Counters and gauges are atomics; a label lookup takes the family's read
//! lock. Label values are `&'static str` from [`labels::BoundedLabels`], so a message copies no
//! string, and every label set is bounded: platforms by the configured adapters, providers,
//! models and tools by a cap past which values count as `other` (a user may `/model` any string,
//! a model may call a tool that does not exist). No chat or user id is ever a label.

pub(crate) mod labels;
pub(crate) mod replies;

use hermes_adapter::SendError;
use labels::BoundedLabels;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use replies::ReplyClocks;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The `Content-Type` of [`Metrics::render`]'s text.
pub(crate) const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Distinct values kept per label before the rest count as `other`.
const PLATFORM_LABELS: usize = 32;
const PROVIDER_LABELS: usize = 16;
const MODEL_LABELS: usize = 32;
const TOOL_LABELS: usize = 64;
const MCP_SERVER_LABELS: usize = 32;

/// Seconds from a user's message to the first thing they see: a streamed answer starts within
/// a second, a long agent run takes minutes.
const REPLY_BUCKETS: [f64; 14] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];
/// Seconds per model request.
const LLM_BUCKETS: [f64; 12] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PlatformLabel {
    platform: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SendErrorLabels {
    platform: &'static str,
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    provider: &'static str,
    model: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelOutcomeLabels {
    provider: &'static str,
    model: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    provider: &'static str,
    model: &'static str,
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AdapterStateLabels {
    platform: &'static str,
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabel {
    server: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerOutcomeLabels {
    server: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn reply_histogram() -> Histogram {
    Histogram::new(REPLY_BUCKETS)
}

fn llm_histogram() -> Histogram {
    Histogram::new(LLM_BUCKETS)
}

/// Every metric of the gateway and the registry that renders them.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    messages_received: Family<PlatformLabel, Counter>,
    messages_sent: Family<PlatformLabel, Counter>,
    send_errors: Family<SendErrorLabels, Counter>,
    reply_latency: HistogramFamily<PlatformLabel>,
    llm_requests: Family<ModelOutcomeLabels, Counter>,
    llm_latency: HistogramFamily<ModelLabels>,
    llm_tokens: Family<TokenLabels, Counter>,
    tool_calls: Family<ToolLabels, Counter>,
    approvals: Family<OutcomeLabel, Counter>,
    transcriptions: Family<OutcomeLabel, Counter>,
    images: Family<OutcomeLabel, Counter>,
    speech: Family<OutcomeLabel, Counter>,
    approvals_pending: Gauge,
    cron_runs: Family<OutcomeLabel, Counter>,
    cron_delivery_failures: Counter,
    adapter_state: Family<AdapterStateLabels, Gauge>,
    adapter_restarts: Family<PlatformLabel, Counter>,
    inbox_depth: Gauge,
    store_reachable: Gauge,
    connection_leases_held: Gauge,
    outbox_depth: Gauge,
    outbox_pending: Family<PlatformLabel, Gauge>,
    outbox_dead_letters: Family<PlatformLabel, Gauge>,
    outbox_oldest_pending: Family<PlatformLabel, Gauge>,
    /// Platforms the outbox gauges were last set for: one whose queue has emptied since is set
    /// to 0 rather than left showing its last numbers.
    outbox_platforms: Mutex<Vec<&'static str>>,
    sessions_active: Gauge,
    resident_memory: Gauge,
    mcp_server_up: Family<ServerLabel, Gauge>,
    mcp_tools: Family<ServerLabel, Gauge>,
    mcp_calls: Family<ServerOutcomeLabels, Counter>,
    /// Servers the MCP gauges were last set for: one removed by `/reload-mcp` since is dropped
    /// from the exposition rather than left showing its last state.
    mcp_servers_shown: Mutex<Vec<&'static str>>,
    platforms: BoundedLabels,
    providers: BoundedLabels,
    models: BoundedLabels,
    tools: BoundedLabels,
    mcp_servers: BoundedLabels,
    replies: ReplyClocks,
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

/// The process's metrics (see the module doc for why there is one).
pub(crate) fn global() -> &'static Metrics {
    METRICS.get_or_init(Metrics::new)
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::with_prefix("hermes"),
            messages_received: Family::default(),
            messages_sent: Family::default(),
            send_errors: Family::default(),
            reply_latency: Family::new_with_constructor(reply_histogram),
            llm_requests: Family::default(),
            llm_latency: Family::new_with_constructor(llm_histogram),
            llm_tokens: Family::default(),
            tool_calls: Family::default(),
            approvals: Family::default(),
            transcriptions: Family::default(),
            images: Family::default(),
            speech: Family::default(),
            approvals_pending: Gauge::default(),
            cron_runs: Family::default(),
            cron_delivery_failures: Counter::default(),
            adapter_state: Family::default(),
            adapter_restarts: Family::default(),
            inbox_depth: Gauge::default(),
            store_reachable: Gauge::default(),
            connection_leases_held: Gauge::default(),
            outbox_depth: Gauge::default(),
            outbox_pending: Family::default(),
            outbox_dead_letters: Family::default(),
            outbox_oldest_pending: Family::default(),
            outbox_platforms: Mutex::default(),
            sessions_active: Gauge::default(),
            resident_memory: Gauge::default(),
            mcp_server_up: Family::default(),
            mcp_tools: Family::default(),
            mcp_calls: Family::default(),
            mcp_servers_shown: Mutex::default(),
            platforms: BoundedLabels::new(PLATFORM_LABELS),
            providers: BoundedLabels::new(PROVIDER_LABELS),
            models: BoundedLabels::new(MODEL_LABELS),
            tools: BoundedLabels::new(TOOL_LABELS),
            mcp_servers: BoundedLabels::new(MCP_SERVER_LABELS),
            replies: ReplyClocks::default(),
        };
        m.register_all();
        m
    }

    fn register_all(&mut self) {
        let r = &mut self.registry;
        r.register("messages_received", "Inbound messages accepted into the inbox", self.messages_received.clone());
        r.register("messages_sent", "Messages delivered to the platform", self.messages_sent.clone());
        r.register("send_errors", "Failed send attempts, by the platform's kind of refusal", self.send_errors.clone());
        r.register(
            "reply_latency_seconds",
            "From a chat's oldest unanswered message being accepted to the first message the gateway got onto the platform there",
            self.reply_latency.clone(),
        );
        r.register("llm_requests", "Model requests by outcome", self.llm_requests.clone());
        r.register("llm_request_duration_seconds", "Model request latency", self.llm_latency.clone());
        r.register("llm_tokens", "Tokens the provider reported, prompt or completion", self.llm_tokens.clone());
        r.register("tool_calls", "Tool calls the agent made, by outcome", self.tool_calls.clone());
        r.register("approvals", "Command approvals asked of a person, by how they ended", self.approvals.clone());
        r.register("media_transcriptions", "Voice notes and audio files, by how their transcription ended", self.transcriptions.clone());
        r.register("media_images", "Images users sent, by what became of them", self.images.clone());
        r.register("media_speech", "Answers spoken for /voice, by outcome (one per spoken part)", self.speech.clone());
        r.register("approvals_pending", "Command approvals waiting for an answer", self.approvals_pending.clone());
        r.register("cron_runs", "Scheduled job runs by outcome", self.cron_runs.clone());
        r.register("cron_delivery_failures", "Scheduled runs whose output could not be delivered", self.cron_delivery_failures.clone());
        r.register("adapter_state", "1 for each adapter's current state, 0 for the others", self.adapter_state.clone());
        r.register("adapter_restarts", "Adapter runs that failed and were restarted", self.adapter_restarts.clone());
        r.register("inbox_depth", "Accepted inbound events not finished yet (sampled every 2 s)", self.inbox_depth.clone());
        r.register(
            "store_reachable",
            "With a store shared by replicas: 1 while this replica reaches it, 0 when it does not",
            self.store_reachable.clone(),
        );
        r.register(
            "connection_leases_held",
            "With a store shared by replicas: platform connections this replica holds the lease of",
            self.connection_leases_held.clone(),
        );
        r.register("outbox_depth", "Outbound messages being sent (including retries and rate-limit waits)", self.outbox_depth.clone());
        r.register("outbox_pending", "Outbound messages waiting to be delivered (sampled every 2 s)", self.outbox_pending.clone());
        r.register(
            "outbox_dead_letters",
            "Outbound messages given up and neither resent nor dropped (see /undelivered)",
            self.outbox_dead_letters.clone(),
        );
        r.register(
            "outbox_oldest_pending_seconds",
            "How long the oldest outbound message still waiting has waited (0 when none waits)",
            self.outbox_oldest_pending.clone(),
        );
        r.register("sessions_active", "Sessions with a live actor", self.sessions_active.clone());
        r.register(
            "mcp_server_up",
            "1 while the MCP server is connected, 0 otherwise (disabled, connecting, down)",
            self.mcp_server_up.clone(),
        );
        r.register("mcp_tools", "Tools registered from each MCP server (kept while it is down)", self.mcp_tools.clone());
        r.register("mcp_tool_calls", "MCP tool calls by server and outcome", self.mcp_calls.clone());
        r.register("process_resident_memory_bytes", "Resident memory of the gateway process", self.resident_memory.clone());
        let build: Family<BuildLabels, Gauge> = Family::default();
        build.get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION") }).set(1);
        r.register("build_info", "The running build; the value is always 1", build);
    }

    fn platform(&self, name: &str) -> PlatformLabel {
        PlatformLabel { platform: self.platforms.label(name) }
    }

    /// An inbound message was accepted (not a redelivery) in `chat`.
    pub(crate) fn message_received(&self, platform: &str, chat: &str) {
        let label = self.platform(platform);
        self.messages_received.get_or_create(&label).inc();
        self.replies.started(label.platform, chat);
    }

    /// A message reached the platform in `chat`; the first after a user's message times the reply.
    pub(crate) fn message_sent(&self, platform: &str, chat: &str) {
        let label = self.platform(platform);
        self.messages_sent.get_or_create(&label).inc();
        self.answer_seen(label, chat);
    }

    fn answer_seen(&self, label: PlatformLabel, chat: &str) {
        if let Some(waited) = self.replies.answered(label.platform, chat) {
            self.reply_latency.get_or_create(&label).observe(waited.as_secs_f64());
        }
    }

    /// One send attempt failed.
    pub(crate) fn send_failed(&self, platform: &str, error: &SendError) {
        let labels = SendErrorLabels { platform: self.platforms.label(platform), kind: send_error_kind(error) };
        self.send_errors.get_or_create(&labels).inc();
    }

    /// A message starts leaving; the outbox depth counts it until the returned guard drops.
    pub(crate) fn sending(&'static self) -> Sending {
        self.outbox_depth.inc();
        Sending { metrics: self }
    }

    /// A model request ended. `provider` is the configured one, or the wire format's name.
    pub(crate) fn llm_request(&self, provider: &str, model: &str, elapsed: Duration, outcome: LlmOutcome) {
        let (provider, model) = (self.providers.label(provider), self.models.label(model));
        self.llm_latency.get_or_create(&ModelLabels { provider, model }).observe(elapsed.as_secs_f64());
        let outcome_label = match outcome {
            LlmOutcome::Answered { .. } => "ok",
            LlmOutcome::Failed(kind) => kind,
        };
        self.llm_requests.get_or_create(&ModelOutcomeLabels { provider, model, outcome: outcome_label }).inc();
        if let LlmOutcome::Answered { prompt_tokens, completion_tokens } = outcome {
            self.llm_tokens.get_or_create(&TokenLabels { provider, model, kind: "prompt" }).inc_by(prompt_tokens);
            self.llm_tokens.get_or_create(&TokenLabels { provider, model, kind: "completion" }).inc_by(completion_tokens);
        }
    }

    pub(crate) fn tool_call(&self, tool: &str, failed: bool) {
        let outcome = if failed { "error" } else { "ok" };
        self.tool_calls.get_or_create(&ToolLabels { tool: self.tools.label(tool), outcome }).inc();
    }

    /// An approval asked of a person ended: `once`, `session`, `always`, `denied`, `timed_out`,
    /// `stopped` or `undeliverable`.
    pub(crate) fn approval_decided(&self, outcome: &'static str) {
        self.approvals.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// A voice note or audio file: `ok`, `empty` (no speech recognised), `refused` (over a
    /// limit), `failed` or `disabled` (no `stt`).
    pub(crate) fn transcription(&self, outcome: &'static str) {
        self.transcriptions.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// An image: `seen` (sent to the model), `described` (left for `vision_analyze`), `refused`
    /// (over a limit) or `failed` (not an image we can read).
    pub(crate) fn image(&self, outcome: &'static str) {
        self.images.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// One spoken part of an answer: `ok` or `failed`.
    pub(crate) fn speech(&self, outcome: &'static str) {
        self.speech.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    pub(crate) fn set_approvals_pending(&self, waiting: usize) {
        self.approvals_pending.set(as_gauge(waiting));
    }

    /// A scheduled run ended (`delivered`, `silent` or `failed`); `delivery_failed` when a target
    /// did not get its output.
    pub(crate) fn cron_run(&self, outcome: &'static str, delivery_failed: bool) {
        self.cron_runs.get_or_create(&OutcomeLabel { outcome }).inc();
        if delivery_failed {
            self.cron_delivery_failures.inc();
        }
    }

    pub(crate) fn adapter_restarted(&self, platform: &str) {
        self.adapter_restarts.get_or_create(&self.platform(platform)).inc();
    }

    /// Each adapter's current state (1) among `all_states` (0).
    pub(crate) fn set_adapter_states<'a>(&self, adapters: impl IntoIterator<Item = (&'a str, &'static str)>, all_states: &[&'static str]) {
        for (platform, current) in adapters {
            let platform = self.platforms.label(platform);
            for state in all_states {
                self.adapter_state.get_or_create(&AdapterStateLabels { platform, state }).set(i64::from(*state == current));
            }
        }
    }

    /// Each configured MCP server now: (name, connected, tools). A server shown before and
    /// missing now (removed by a reload) leaves the exposition.
    pub(crate) fn set_mcp_servers<'a>(&self, servers: impl IntoIterator<Item = (&'a str, bool, usize)>) {
        let mut shown = self.mcp_servers_shown.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut seen = Vec::new();
        for (name, up, tools) in servers {
            let label = ServerLabel { server: self.mcp_servers.label(name) };
            self.mcp_server_up.get_or_create(&label).set(i64::from(up));
            self.mcp_tools.get_or_create(&label).set(as_gauge(tools));
            seen.push(label.server);
        }
        for gone in shown.iter().filter(|s| !seen.contains(*s)) {
            self.mcp_server_up.remove(&ServerLabel { server: gone });
            self.mcp_tools.remove(&ServerLabel { server: gone });
        }
        *shown = seen;
    }

    /// An MCP tool call ended: `ok`, `error` (the tool, the transport, a timeout or a server that
    /// is down answered with an error), `invalid` (arguments refused before the call) or `denied`
    /// (by a person, or nobody could be asked).
    pub(crate) fn mcp_call(&self, server: &str, outcome: &'static str) {
        let labels = ServerOutcomeLabels { server: self.mcp_servers.label(server), outcome };
        self.mcp_calls.get_or_create(&labels).inc();
    }

    /// This replica's view of a shared store: whether it reaches it, and how many connection
    /// leases it holds.
    pub(crate) fn set_cluster(&self, reachable: bool, leases_held: usize) {
        self.store_reachable.set(i64::from(reachable));
        self.connection_leases_held.set(as_gauge(leases_held));
    }

    pub(crate) fn set_inbox_depth(&self, unfinished: usize) {
        self.inbox_depth.set(as_gauge(unfinished));
    }

    /// The outbox's queues, one entry per platform with messages waiting or given up; every
    /// platform set before and missing now reads 0.
    pub(crate) fn set_outbox_queues(&self, queues: &[OutboxQueue<'_>]) {
        let mut known = self.outbox_platforms.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut seen = Vec::with_capacity(queues.len());
        for queue in queues {
            let label = self.platform(queue.platform);
            self.outbox_pending.get_or_create(&label).set(i64::try_from(queue.pending).unwrap_or(i64::MAX));
            self.outbox_dead_letters.get_or_create(&label).set(i64::try_from(queue.dead).unwrap_or(i64::MAX));
            let oldest = queue.oldest_pending.map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            self.outbox_oldest_pending.get_or_create(&label).set(oldest);
            seen.push(label.platform);
        }
        for gone in known.iter().filter(|p| !seen.contains(*p)) {
            let label = PlatformLabel { platform: gone };
            self.outbox_pending.get_or_create(&label).set(0);
            self.outbox_dead_letters.get_or_create(&label).set(0);
            self.outbox_oldest_pending.get_or_create(&label).set(0);
        }
        known.retain(|p| !seen.contains(p));
        known.extend(seen);
    }

    pub(crate) fn set_sessions_active(&self, sessions: usize) {
        self.sessions_active.set(as_gauge(sessions));
    }

    /// What the status file shows next to the adapters.
    pub(crate) fn queues(&self) -> Queues {
        Queues {
            inbox_depth: self.inbox_depth.get(),
            outbox_depth: self.outbox_depth.get(),
            sessions_active: self.sessions_active.get(),
            approvals_pending: self.approvals_pending.get(),
        }
    }

    /// The Prometheus text of every metric, resident memory read now.
    pub(crate) fn render(&self) -> Result<String, std::fmt::Error> {
        if let Some(rss) = resident_memory_bytes() {
            self.resident_memory.set(i64::try_from(rss).unwrap_or(i64::MAX));
        }
        let mut text = String::with_capacity(8 * 1024);
        prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// How a model request ended, for [`Metrics::llm_request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LlmOutcome {
    Answered {
        prompt_tokens: u64,
        completion_tokens: u64,
    },
    /// The provider error's kind (`rate_limited`, `auth`, …).
    Failed(&'static str),
}

/// The queue gauges, read back for the status file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Queues {
    pub inbox_depth: i64,
    pub outbox_depth: i64,
    pub sessions_active: i64,
    pub approvals_pending: i64,
}

/// One platform's outbox queue, for [`Metrics::set_outbox_queues`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutboxQueue<'a> {
    pub platform: &'a str,
    /// Messages waiting to be delivered.
    pub pending: u64,
    /// Dead letters.
    pub dead: u64,
    /// How long the oldest waiting message has waited.
    pub oldest_pending: Option<Duration>,
}

/// A message being sent; see [`Metrics::sending`].
#[derive(Debug)]
pub(crate) struct Sending {
    metrics: &'static Metrics,
}

impl Drop for Sending {
    fn drop(&mut self) {
        self.metrics.outbox_depth.dec();
    }
}

fn as_gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn send_error_kind(error: &SendError) -> &'static str {
    match error {
        SendError::RateLimited { .. } => "rate_limited",
        SendError::TooLong => "too_long",
        SendError::BadFormat(_) => "bad_format",
        SendError::Forbidden(_) => "forbidden",
        SendError::NotFound(_) => "not_found",
        SendError::Transient(_) => "transient",
        SendError::Ambiguous(_) => "ambiguous",
        SendError::Gone(_) => "gone",
        SendError::Unsupported(_) => "unsupported",
        SendError::Other(_) => "other",
    }
}

/// The process's resident set size in bytes, from `/proc/self/statm` (Linux); `None` elsewhere.
pub(crate) fn resident_memory_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page_size).ok().filter(|p| *p > 0).unwrap_or(4096))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn model_labels(text: &str) -> HashSet<String> {
        text.lines()
            .filter(|l| l.starts_with("hermes_llm_requests_total{"))
            .filter_map(|l| l.split("model=\"").nth(1)?.split('"').next().map(str::to_string))
            .collect()
    }

    #[test]
    fn models_a_user_names_do_not_grow_the_exposition_without_bound() {
        let metrics = Metrics::new();
        for i in 0..2_000 {
            // What `/model` would pass on: any string a user typed.
            let typed = format!("my-own-model-{i} \"with\" {{braces}}\nand lines");
            metrics.llm_request(
                "openai",
                &typed,
                Duration::from_millis(20),
                LlmOutcome::Answered { prompt_tokens: 3, completion_tokens: 1 },
            );
        }
        let text = metrics.render().expect("render");
        let models = model_labels(&text);
        assert_eq!(models.len(), MODEL_LABELS + 1, "{MODEL_LABELS} names and `other`: {models:?}");
        assert!(models.contains(labels::OTHER));
        assert!(models.iter().all(|m| !m.contains('"') && !m.contains('\n')), "{models:?}");
        assert!(text.contains("hermes_llm_tokens_total{provider=\"openai\",model=\"other\",kind=\"prompt\"}"), "{text}");
    }

    #[test]
    fn a_reply_is_timed_from_the_message_to_the_first_send_in_its_chat() {
        let metrics = Metrics::new();
        metrics.message_received("telegram", "1001");
        metrics.message_sent("telegram", "1001");
        metrics.message_sent("telegram", "1001");
        let text = metrics.render().expect("render");
        assert!(text.contains("hermes_messages_received_total{platform=\"telegram\"} 1"), "{text}");
        assert!(text.contains("hermes_messages_sent_total{platform=\"telegram\"} 2"), "{text}");
        assert!(text.contains("hermes_reply_latency_seconds_count{platform=\"telegram\"} 1"), "one reply, two messages: {text}");
        assert!(text.contains("hermes_build_info{version="), "{text}");
        assert!(!text.contains("1001"), "no chat id in the exposition");
    }

    #[test]
    fn outbox_gauges_follow_each_platforms_queue_and_fall_to_zero_when_it_empties() {
        let metrics = Metrics::new();
        metrics.set_outbox_queues(&[
            OutboxQueue { platform: "telegram", pending: 3, dead: 1, oldest_pending: Some(Duration::from_secs(240)) },
            OutboxQueue { platform: "discord", pending: 0, dead: 2, oldest_pending: None },
        ]);
        let text = metrics.render().expect("render");
        for line in [
            "hermes_outbox_pending{platform=\"telegram\"} 3",
            "hermes_outbox_dead_letters{platform=\"telegram\"} 1",
            "hermes_outbox_oldest_pending_seconds{platform=\"telegram\"} 240",
            "hermes_outbox_pending{platform=\"discord\"} 0",
            "hermes_outbox_dead_letters{platform=\"discord\"} 2",
            "hermes_outbox_oldest_pending_seconds{platform=\"discord\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from:\n{text}");
        }
        // Telegram's queue delivered; discord's dead letters were dropped.
        metrics.set_outbox_queues(&[OutboxQueue {
            platform: "discord",
            pending: 1,
            dead: 0,
            oldest_pending: Some(Duration::from_secs(5)),
        }]);
        let text = metrics.render().expect("render");
        for line in [
            "hermes_outbox_pending{platform=\"telegram\"} 0",
            "hermes_outbox_dead_letters{platform=\"telegram\"} 0",
            "hermes_outbox_oldest_pending_seconds{platform=\"telegram\"} 0",
            "hermes_outbox_pending{platform=\"discord\"} 1",
            "hermes_outbox_oldest_pending_seconds{platform=\"discord\"} 5",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from:\n{text}");
        }
    }

    #[test]
    fn resident_memory_is_read_from_proc() {
        let rss = resident_memory_bytes().expect("Linux has /proc/self/statm");
        assert!(rss > 1024 * 1024, "a test process holds more than a megabyte: {rss}");
    }

    #[test]
    fn mcp_servers_show_up_state_and_tools_and_a_removed_server_leaves() {
        let metrics = Metrics::new();
        metrics.set_mcp_servers([("everything", true, 13), ("broken", false, 0)]);
        metrics.mcp_call("everything", "ok");
        let text = metrics.render().expect("render");
        for line in [
            "hermes_mcp_server_up{server=\"everything\"} 1",
            "hermes_mcp_tools{server=\"everything\"} 13",
            "hermes_mcp_server_up{server=\"broken\"} 0",
            "hermes_mcp_tools{server=\"broken\"} 0",
            "hermes_mcp_tool_calls_total{server=\"everything\",outcome=\"ok\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from:\n{text}");
        }
        metrics.set_mcp_servers([("everything", false, 13)]);
        let text = metrics.render().expect("render");
        assert!(text.lines().any(|l| l == "hermes_mcp_server_up{server=\"everything\"} 0"), "{text}");
        assert!(!text.contains("server=\"broken\"}"), "a removed server is not shown as down: {text}");
    }
}
