//! Context compression: estimate a conversation's tokens, and when it grows past the threshold,
//! summarize its middle through an auxiliary model call — keeping the first messages (how the
//! conversation started) and the last ones (what is happening now) verbatim. Tool calls and their
//! results are never split across the boundary.

use super::message::{ChatMessage, Role};
use super::providers::{ModelSpec, ProviderError};
use super::run_loop::{Agent, TurnRequest};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Fewest messages worth compressing.
pub(crate) const MIN_MESSAGES: usize = 4;
/// Prefix of the message that carries a summary.
pub(crate) const SUMMARY_PREFIX: &str = "[CONTEXT SUMMARY] Earlier turns of this conversation were compressed into this summary:";

const SUMMARIZER_PROMPT: &str = "You compress conversations. Summarize the conversation excerpt you are given so that an assistant can \
continue the conversation without it. Keep: the user's goals and preferences, decisions made, facts learned (names, numbers, paths, \
commands and their results), open questions and unfinished work. Drop pleasantries and repetition. Write plain prose or short bullets; \
do not address the user; do not invent anything.";

/// A rough token count: about four characters per token plus a little per message. Good enough
/// to decide when to compress; the provider's own count (when reported) is preferred.
pub(crate) fn estimate_tokens(messages: &[ChatMessage]) -> u64 {
    messages
        .iter()
        .map(|m| {
            let calls: usize = m.tool_calls.iter().map(|c| c.name.len() + c.arguments.len()).sum();
            ((m.content.len() + calls) / 4 + 4) as u64
        })
        .sum()
}

/// How a conversation splits for compression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Split {
    pub head: usize,
    /// Index where the protected tail starts; `head..tail` is summarized.
    pub tail: usize,
}

/// Where to cut `messages` (without the system prompt), or `None` when there is nothing to
/// compress.
pub(crate) fn split(messages: &[ChatMessage], protect_first: usize, protect_last: usize) -> Option<Split> {
    if messages.len() < MIN_MESSAGES {
        return None;
    }
    let mut head = protect_first.min(messages.len());
    // The head must not end between a tool call and its results.
    while head < messages.len() && messages[head].role == Role::Tool {
        head += 1;
    }
    let mut tail = messages.len().saturating_sub(protect_last).max(head);
    // The tail must start at a message that does not answer a call in the summarized middle.
    while tail > head && messages[tail].role == Role::Tool {
        tail -= 1;
    }
    (tail > head).then_some(Split { head, tail })
}

/// Summarize `middle` with `model`. `focus` (from `/compress <focus>`) says what matters most.
pub(crate) async fn summarize(
    agent: &Arc<Agent>,
    model: ModelSpec,
    middle: &[ChatMessage],
    focus: Option<&str>,
    target_tokens: u64,
    cancel: CancellationToken,
) -> Result<String, ProviderError> {
    let mut transcript = String::new();
    for m in middle {
        let who = match m.role {
            Role::User => "User",
            Role::Assistant => "Assistant",
            Role::Tool => "Tool result",
            Role::System => "System",
        };
        transcript.push_str(&format!("{who}: {}\n", m.content));
        for c in &m.tool_calls {
            transcript.push_str(&format!("Assistant called {}({})\n", c.name, c.arguments));
        }
    }
    let mut instructions = format!("Summarize this excerpt in at most about {} words.", (target_tokens * 3 / 4).max(100));
    if let Some(f) = focus.map(str::trim).filter(|f| !f.is_empty()) {
        instructions.push_str(&format!(" Focus on: {f}."));
    }
    let request = TurnRequest::new(
        model,
        vec![ChatMessage::system(SUMMARIZER_PROMPT), ChatMessage::user(format!("{instructions}\n\n<excerpt>\n{transcript}</excerpt>"))],
    );
    let outcome = agent.run_to_end(request, cancel).await?;
    let summary = outcome.text.trim().to_string();
    if summary.is_empty() {
        return Err(ProviderError::Fatal("the summarizer returned an empty summary".into()));
    }
    Ok(summary)
}

/// The message that replaces the summarized middle.
pub(crate) fn summary_message(summary: &str) -> ChatMessage {
    ChatMessage::user(format!("{SUMMARY_PREFIX}\n{summary}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::message::ToolCallRequest;

    fn conv(roles: &[Role]) -> Vec<ChatMessage> {
        roles.iter().map(|r| ChatMessage::new(*r, "x")).collect()
    }

    #[test]
    fn protects_head_and_tail_without_splitting_tool_rounds() {
        use Role::*;
        let m = conv(&[User, Assistant, User, Assistant, User, Assistant, User, Assistant]);
        assert_eq!(split(&m, 3, 2), Some(Split { head: 3, tail: 6 }));
        assert_eq!(split(&m, 3, 20), None, "nothing between the protected parts");
        assert_eq!(split(&conv(&[User, Assistant, User]), 0, 0), None, "too short");
        let mut m = conv(&[User, Assistant, Tool, Tool, User, Assistant, Tool, Assistant, User, Assistant]);
        m[1].tool_calls = vec![ToolCallRequest { id: "1".into(), name: "t".into(), arguments: "{}".into() }];
        // protect_first = 2 would end the head between a call and its results: it grows.
        // protect_last = 4 would start the tail at a tool result: it shrinks back to its call.
        assert_eq!(split(&m, 2, 4), Some(Split { head: 4, tail: 5 }));
    }

    #[test]
    fn estimate_grows_with_text() {
        let short = estimate_tokens(&[ChatMessage::user("hi")]);
        let long = estimate_tokens(&[ChatMessage::user("word ".repeat(400))]);
        assert!(long > short * 50, "{short} {long}");
    }
}
