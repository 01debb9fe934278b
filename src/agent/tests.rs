//! The turn loop against the scripted fake LLM over real HTTP, asserting on the requests it
//! recorded: multi-step and parallel tool calls, malformed calls, the text protocol, retries,
//! fallbacks, the iteration budget, steering and delegation.

use super::providers::openai::OpenAiCompatible;
use super::run_loop::{Agent, RetryPolicy, SteeringInbox, TurnRequest, TurnTools};
use super::tool_protocol::ToolProtocol;
use super::tools::{self, AgentPaths, Tool, ToolContext, ToolFilter, ToolOutput, ToolSchema, ToolSettings};
use super::{ChatMessage, ModelSpec};
use async_trait::async_trait;
use hermes_fakes::{FakeLlm, Reply, ToolCall};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn spec(llm: &FakeLlm, model: &str) -> ModelSpec {
    ModelSpec { model: model.into(), provider: None, base_url: llm.base_url(), api_key: Some("sk-test-key-123456".into()) }
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy { max_retries: 2, base_delay: Duration::from_millis(5), max_delay: Duration::from_millis(50) }
}

fn agent_with(registry: tools::ToolRegistry, max_iterations: u32) -> Arc<Agent> {
    let provider = OpenAiCompatible::new(Duration::from_secs(10));
    Arc::new(Agent::new(Arc::new(provider), registry, max_iterations, fast_retries()))
}

fn request(llm: &FakeLlm, dir: &std::path::Path, text: &str) -> TurnRequest {
    let context = ToolContext::detached(AgentPaths::under(dir), ToolSettings::default());
    let mut r = TurnRequest::new(spec(llm, "main-model"), vec![ChatMessage::system("You are a test."), ChatMessage::user(text)]);
    r.tools = Some(TurnTools { filter: ToolFilter::default(), context });
    r
}

/// The tool messages of a recorded request.
fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"].as_array().map(|a| a.iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect()).unwrap_or_default()
}

#[tokio::test]
async fn a_multi_step_tool_loop_feeds_each_result_back() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    llm.push(Reply::tool_call("c1", "memory", r#"{"action":"add","target":"user","content":"Prefers tea"}"#));
    llm.push(Reply::tool_call("c2", "skills_list", "{}"));
    llm.push(Reply::text("All set."));
    let agent = agent_with(tools::builtin(), 10);
    let outcome = agent.run_to_end(request(&llm, dir.path(), "remember I like tea"), CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.text, "All set.");
    assert_eq!(outcome.api_calls, 3);
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 3);
    assert!(tool_names(&reqs[0].body).contains(&"memory".to_string()));
    assert!(tool_results(&reqs[1].body)[0].contains("Memory added"), "{:?}", tool_results(&reqs[1].body));
    assert!(tool_results(&reqs[2].body)[1].contains("No skills saved yet"), "{:?}", tool_results(&reqs[2].body));
    assert_eq!(std::fs::read_to_string(dir.path().join("memories/USER.md")).unwrap(), "Prefers tea");
}

/// Waits until `parties` calls are inside at once: a sequential runner never gets there.
struct Rendezvous(Arc<tokio::sync::Barrier>);

#[async_trait]
impl Tool for Rendezvous {
    fn schema(&self) -> ToolSchema {
        ToolSchema { name: "rendezvous".into(), description: "test".into(), parameters: json!({"type": "object"}) }
    }
    fn toolset(&self) -> &'static str {
        "file"
    }
    async fn call(&self, _ctx: &ToolContext, args: Value) -> ToolOutput {
        match tokio::time::timeout(Duration::from_secs(5), self.0.wait()).await {
            Ok(_) => ToolOutput::ok(format!("met {}", args["n"])),
            Err(_) => ToolOutput::error("alone: the other call never ran at the same time"),
        }
    }
}

#[tokio::test]
async fn parallel_tool_calls_of_one_response_run_concurrently() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    llm.push(Reply::ToolCalls(vec![ToolCall::new("a", "rendezvous", r#"{"n":1}"#), ToolCall::new("b", "rendezvous", r#"{"n":2}"#)]));
    llm.push(Reply::text("both done"));
    let mut registry = tools::ToolRegistry::new();
    registry.register(Arc::new(Rendezvous(Arc::new(tokio::sync::Barrier::new(2)))));
    let agent = agent_with(registry, 10);
    let outcome = agent.run_to_end(request(&llm, dir.path(), "go"), CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.text, "both done");
    let results = tool_results(&llm.requests()[1].body);
    assert_eq!(results, ["met 1", "met 2"], "results in call order, both met");
}

#[tokio::test]
async fn a_malformed_tool_call_is_answered_with_a_tool_error() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    llm.push(Reply::tool_call("c1", "memory", r#"{"action": "add", "target": "#));
    llm.push(Reply::tool_call("c2", "no_such_tool", "{}"));
    llm.push(Reply::text("recovered"));
    let agent = agent_with(tools::builtin(), 10);
    let outcome = agent.run_to_end(request(&llm, dir.path(), "x"), CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.text, "recovered");
    let reqs = llm.requests();
    assert!(tool_results(&reqs[1].body)[0].contains("not valid JSON"), "{:?}", tool_results(&reqs[1].body));
    assert!(tool_results(&reqs[2].body)[1].contains("`no_such_tool` is not available"), "{:?}", tool_results(&reqs[2].body));
}

#[tokio::test]
async fn the_text_protocol_offers_tools_in_the_prompt_and_reads_blocks_back() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    llm.push(Reply::text("Let me check.\n<tool_call>\n{\"name\": \"skills_list\", \"arguments\": {}}\n</tool_call>"));
    llm.push(Reply::text("<tool_call>{\"name\": \"skills_list\", \"arguments\": {oops}</tool_call>"));
    llm.push(Reply::text("No skills yet."));
    let agent = agent_with(tools::builtin(), 10);
    let mut req = request(&llm, dir.path(), "what skills?");
    req.tool_protocol = ToolProtocol::Hermes;
    let outcome = agent.run_to_end(req, CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.text, "No skills yet.");
    let reqs = llm.requests();
    assert!(reqs[0].body.get("tools").is_none(), "no native tools in text mode");
    assert!(reqs[0].messages()[0].1.contains("<tools>"), "tools described in the system prompt");
    let second = reqs[1].messages();
    assert_eq!(second[2].0, "assistant");
    assert!(second[2].1.contains("<tool_call>"), "the call stays in the assistant's text: {second:?}");
    assert_eq!(second[3].0, "user");
    assert!(second[3].1.contains("<tool_response>") && second[3].1.contains("No skills saved yet"), "{second:?}");
    let third = reqs[2].messages();
    assert!(third.last().unwrap().1.contains("not valid JSON"), "a malformed block comes back as an error: {third:?}");
}

#[tokio::test]
async fn a_rate_limit_is_retried_then_succeeds() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    llm.push(Reply::rate_limited(0));
    llm.push(Reply::text("after the wait"));
    let agent = agent_with(tools::builtin(), 10);
    let outcome = agent.run_to_end(request(&llm, dir.path(), "hi"), CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.text, "after the wait");
    assert_eq!(llm.request_count(), 2);
}

#[tokio::test]
async fn an_auth_error_falls_back_to_the_next_provider() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    llm.push(Reply::error(401, "invalid api key"));
    llm.push(Reply::text("answered by the backup"));
    let agent = agent_with(tools::builtin(), 10);
    let mut req = request(&llm, dir.path(), "hi");
    req.fallbacks = vec![spec(&llm, "backup-model")];
    let outcome = agent.run_to_end(req, CancellationToken::new()).await.unwrap();
    assert_eq!((outcome.text.as_str(), outcome.model.as_str()), ("answered by the backup", "backup-model"));
    let models: Vec<_> = llm.requests().iter().map(|r| r.model().unwrap_or_default().to_string()).collect();
    assert_eq!(models, ["main-model", "backup-model"], "an auth error is not retried on the same model");
    // Without a fallback the auth error ends the turn with the error.
    llm.push(Reply::error(401, "invalid api key"));
    let err = agent.run_to_end(request(&llm, dir.path(), "hi"), CancellationToken::new()).await.unwrap_err();
    assert_eq!(err.kind(), "AuthenticationError");
}

#[tokio::test]
async fn the_iteration_budget_ends_with_one_call_without_tools() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    llm.push(Reply::tool_call("c1", "skills_list", "{}"));
    llm.push(Reply::tool_call("c2", "skills_list", "{}"));
    llm.push(Reply::text("Here is what I found so far."));
    let agent = agent_with(tools::builtin(), 2);
    let outcome = agent.run_to_end(request(&llm, dir.path(), "loop"), CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.text, "Here is what I found so far.");
    assert_eq!(outcome.api_calls, 3);
    let last = llm.requests()[2].clone();
    assert!(last.body.get("tools").is_none(), "the final call offers no tools");
    assert!(last.messages().iter().any(|(role, text)| role == "system" && text.contains("maximum number of tool iterations")));
}

#[tokio::test]
async fn steering_arrives_after_the_next_tool_call() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    llm.push(Reply::tool_call("c1", "skills_list", "{}"));
    llm.push(Reply::text("adjusted"));
    let agent = agent_with(tools::builtin(), 10);
    let steering = SteeringInbox::default();
    steering.push("use metric units");
    let mut req = request(&llm, dir.path(), "plan a hike");
    req.steering = Some(steering.clone());
    agent.run_to_end(req, CancellationToken::new()).await.unwrap();
    let second = llm.requests()[1].messages();
    assert!(second.last().unwrap().1.contains("use metric units"), "{second:?}");
    assert!(steering.take().is_empty(), "taken by the turn");
}

#[tokio::test]
async fn a_sub_agent_gets_a_fresh_context_and_fewer_tools() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    llm.push(Reply::tool_call("d1", "delegate_task", r#"{"goal":"count the skills","context":"skills live in ~/skills"}"#));
    llm.push(Reply::text("There are no skills."));
    llm.push(Reply::text("The sub-agent says there are none."));
    let agent = agent_with(tools::builtin(), 10);
    let outcome = agent.run_to_end(request(&llm, dir.path(), "delegate it"), CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.text, "The sub-agent says there are none.");
    let reqs = llm.requests();
    let sub = &reqs[1];
    assert!(sub.messages()[0].1.contains("sub-agent"), "its own prompt");
    assert!(!sub.messages().iter().any(|(_, t)| t.contains("delegate it")), "none of the parent's conversation");
    let names = tool_names(&sub.body);
    for denied in ["delegate_task", "clarify", "memory", "send_message"] {
        assert!(!names.contains(&denied.to_string()), "sub-agent must not get {denied}: {names:?}");
    }
    assert!(names.contains(&"skills_list".to_string()));
    assert!(tool_results(&reqs[2].body)[0].contains("There are no skills."));
}

#[tokio::test]
async fn the_tool_loop_speaks_anthropic_messages_streaming() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    llm.push(Reply::ToolCalls(vec![ToolCall::new("toolu_1", "skills_list", "{}"), ToolCall::new("toolu_2", "skills_list", "{}")]));
    llm.push(Reply::chunks(["No skills ", "yet."]));
    let provider = super::providers::ProviderRouter::new(Duration::from_secs(10));
    let agent = Arc::new(Agent::new(Arc::new(provider), tools::builtin(), 10, fast_retries()));
    let mut req = request(&llm, dir.path(), "list skills");
    req.model = ModelSpec { provider: Some("anthropic".into()), base_url: llm.base_url().trim_end_matches("/v1").into(), ..req.model };
    req.stream = true;
    let mut events = agent.run_turn(req, CancellationToken::new());
    let mut deltas = String::new();
    let mut outcome = None;
    while let Some(ev) = events.recv().await {
        match ev {
            super::TurnEvent::TextDelta(d) => deltas.push_str(&d),
            super::TurnEvent::Done(o) => outcome = Some(o),
            super::TurnEvent::Failed(e) => panic!("turn failed: {e}"),
            _ => {}
        }
    }
    let outcome = outcome.unwrap();
    assert_eq!((outcome.text.as_str(), deltas.as_str()), ("No skills yet.", "No skills yet."));
    let reqs = llm.requests();
    assert!(reqs.iter().all(|r| r.wire() == "anthropic" && r.stream));
    let second = &reqs[1].body["messages"];
    let tool_results = second
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|block| block["type"] == "tool_result")
        .count();
    assert_eq!(tool_results, 2, "both parallel results go back as tool_result blocks: {second}");
}

fn in_turn_compression(llm: &FakeLlm, context_tokens: u64) -> super::run_loop::InTurnCompression {
    super::run_loop::InTurnCompression {
        context_tokens,
        threshold: 0.5,
        protect_first: 1,
        protect_last: 2,
        target_ratio: 0.2,
        summarizer: spec(llm, "summarizer-model"),
    }
}

#[tokio::test]
async fn a_long_tool_loop_is_compressed_inside_the_turn() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    llm.push(Reply::tool_call("c1", "skills_list", "{}"));
    llm.push(Reply::tool_call("c2", "skills_list", "{}"));
    llm.push(Reply::text("SUMMARY: listed skills twice, none found"));
    llm.push(Reply::text("done"));
    let agent = agent_with(tools::builtin(), 10);
    let mut req = request(&llm, dir.path(), &format!("inventory please {}", "x".repeat(2000)));
    req.compression = Some(in_turn_compression(&llm, 600));
    let outcome = agent.run_to_end(req, CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.text, "done");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 4);
    assert_eq!(reqs[2].model(), Some("summarizer-model"), "the middle went to the summarizer");
    let last = reqs[3].messages();
    assert_eq!(last[0].0, "system");
    assert!(last[1].1.starts_with("inventory please"), "the first message is protected");
    assert!(last[2].1.contains("[CONTEXT SUMMARY]") && last[2].1.contains("listed skills twice"), "{last:?}");
    assert_eq!(last.len(), 5, "system, first message, summary, last call and its result: {last:?}");
}

#[tokio::test]
async fn a_context_overflow_is_compressed_and_asked_again() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    llm.push(Reply::error(400, "This model's maximum context length is 8192 tokens"));
    llm.push(Reply::text("SUMMARY: earlier chit-chat"));
    llm.push(Reply::text("fits now"));
    let agent = agent_with(tools::builtin(), 10);
    let mut messages = vec![ChatMessage::system("You are a test.")];
    for i in 0..6 {
        messages.push(if i % 2 == 0 { ChatMessage::user(format!("q{i}")) } else { ChatMessage::assistant(format!("a{i}")) });
    }
    messages.push(ChatMessage::user("latest"));
    let mut req = TurnRequest::new(spec(&llm, "main-model"), messages);
    req.compression = Some(in_turn_compression(&llm, 1_000_000));
    let outcome = agent.run_to_end(req, CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.text, "fits now");
    let last = llm.requests()[2].messages();
    assert!(last.iter().any(|(_, t)| t.contains("[CONTEXT SUMMARY]")), "{last:?}");
    assert_eq!(last.last().unwrap().1, "latest");
    // Without a compression policy the overflow ends the turn with its class.
    llm.push(Reply::error(400, "This model's maximum context length is 8192 tokens"));
    let err = agent.run_to_end(request(&llm, dir.path(), "x"), CancellationToken::new()).await.unwrap_err();
    assert_eq!(err.kind(), "ContextOverflow");
}
