//! Agent-core benchmark: the per-turn overhead of the turn loop (request assembly, the provider's
//! HTTP client and JSON/SSE parsing, tool dispatch, event channel) against an instant scripted LLM
//! on loopback, compared with the same HTTP requests sent to the fake directly.
//!
//! Run with `cargo bench --bench agent_core`. It prints numbers; it asserts nothing.

use hermes::agent::providers::openai::OpenAiCompatible;
use hermes::agent::run_loop::{Agent, RetryPolicy, TurnRequest, TurnTools};
use hermes::agent::tools::{self, AgentPaths, ToolContext, ToolFilter, ToolSettings};
use hermes::agent::{ChatMessage, ModelSpec};
use hermes_fakes::{FakeLlm, LlmConfig, Reply};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const TURNS: usize = 400;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(run());
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

async fn run() {
    let llm = FakeLlm::start_with(LlmConfig { record: false, ..LlmConfig::default() }).await.expect("fake LLM");
    llm.set_default(Reply::text("ok"));
    let dir = tempfile::tempdir().expect("temp dir");
    let provider = OpenAiCompatible::new(Duration::from_secs(10));
    let agent = Arc::new(Agent::new(Arc::new(provider), tools::builtin(), 90, RetryPolicy::default()));
    let spec = ModelSpec { model: "bench".into(), provider: None, base_url: llm.base_url(), api_key: Some("sk-bench".into()) };
    let history: Vec<ChatMessage> = (0..20)
        .map(|i| if i % 2 == 0 { ChatMessage::user(format!("question {i}")) } else { ChatMessage::assistant(format!("answer {i}")) })
        .collect();
    let request = |stream: bool| {
        let mut messages = vec![ChatMessage::system("You are a benchmark.")];
        messages.extend(history.clone());
        messages.push(ChatMessage::user("hello"));
        let mut r = TurnRequest::new(spec.clone(), messages);
        r.stream = stream;
        r.tools = Some(TurnTools {
            filter: ToolFilter::default(),
            context: ToolContext::detached(AgentPaths::under(dir.path()), ToolSettings::default()),
        });
        r
    };

    // The same HTTP request straight to the fake: the floor the core adds to.
    let client = reqwest::Client::new();
    let chat_request = hermes::agent::providers::ChatRequest {
        model: spec.clone(),
        messages: request(false).messages,
        tools: agent.tools().schemas(),
        stream: false,
    };
    let body = hermes::agent::providers::openai::request_body(&chat_request);
    let mut direct = Vec::new();
    for i in 0..TURNS + 50 {
        let t = Instant::now();
        let r = client.post(format!("{}/chat/completions", llm.base_url())).json(&body).send().await.expect("direct");
        let _ = r.bytes().await;
        if i >= 50 {
            direct.push(t.elapsed());
        }
    }
    direct.sort();

    for (label, stream, with_tool) in
        [("non-streaming turn", false, false), ("streaming turn", true, false), ("turn with one tool call (2 model calls)", false, true)]
    {
        let mut times = Vec::new();
        for i in 0..TURNS + 50 {
            if with_tool {
                llm.push(Reply::tool_call("c1", "skills_list", "{}"));
            }
            let t = Instant::now();
            agent.run_to_end(request(stream), CancellationToken::new()).await.expect("turn");
            if i >= 50 {
                times.push(t.elapsed());
            }
        }
        times.sort();
        let calls = if with_tool { 2 } else { 1 };
        let overhead = percentile(&times, 0.5).saturating_sub(percentile(&direct, 0.5) * calls);
        println!(
            "{label}: p50 {} p90 {} p99 {} | direct HTTP p50 {} | core overhead p50 ≈ {}",
            ms(percentile(&times, 0.5)),
            ms(percentile(&times, 0.9)),
            ms(percentile(&times, 0.99)),
            ms(percentile(&direct, 0.5)),
            ms(overhead)
        );
    }
}
