//! Context compression: estimate a conversation's tokens, and when it grows past the threshold,
//! summarize its middle through an auxiliary model call — keeping the first messages (how the
//! conversation started) and the last ones (what is happening now) verbatim. Tool calls and their
//! results are never split across the boundary. The summarizer reads a picture as a text marker
//! (`[image WxH]`), never its pixels, and the summary carries no pictures: a compressed session
//! keeps a description of what was shown, not the images.

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

/// A rough token count: about four characters per token plus a little per message, and for each
/// image sent with its data about what providers bill for it (width × height / 750, capped
/// as Anthropic caps it); an image without data is its line of text. Good enough to decide when
/// to compress; the provider's own count (when reported) is preferred.
pub(crate) fn estimate_tokens(messages: &[ChatMessage]) -> u64 {
    messages
        .iter()
        .map(|m| {
            let calls: usize = m.tool_calls.iter().map(|c| c.name.len() + c.arguments.len()).sum();
            let images: u64 = m
                .images
                .iter()
                .map(|i| match i.data {
                    Some(_) => (u64::from(i.width) * u64::from(i.height) / 750).clamp(85, 1600),
                    None => (i.placeholder().len() / 4) as u64,
                })
                .sum();
            ((m.content.len() + calls) / 4 + 4) as u64 + images
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
    let transcript = transcript(middle);
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

/// `middle` as the text the summarizer reads: one line per message, tool calls named, each
/// picture a `[image WxH]` marker (the summarizer is sent no image).
fn transcript(middle: &[ChatMessage]) -> String {
    let mut transcript = String::new();
    for m in middle {
        let who = match m.role {
            Role::User => "User",
            Role::Assistant => "Assistant",
            Role::Tool => "Tool result",
            Role::System => "System",
        };
        let markers: String = m.images.iter().map(|i| format!(" [image {}x{}]", i.width, i.height)).collect();
        transcript.push_str(&format!("{who}: {}{markers}\n", m.content));
        for c in &m.tool_calls {
            transcript.push_str(&format!("Assistant called {}({})\n", c.name, c.arguments));
        }
    }
    transcript
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

    #[tokio::test]
    async fn the_summarizer_reads_pictures_as_markers_and_the_summary_keeps_none() {
        use crate::agent::ImagePart;
        use crate::agent::providers::openai::OpenAiCompatible;
        use crate::agent::run_loop::RetryPolicy;
        let llm = hermes_fakes::FakeLlm::start().await;
        llm.push(hermes_fakes::Reply::text("The user showed a photo of a cat on a sofa."));
        let provider = OpenAiCompatible::new(std::time::Duration::from_secs(10));
        let agent = Arc::new(Agent::new(Arc::new(provider), crate::agent::tools::ToolRegistry::new(), 1, RetryPolicy::default()));
        let model = ModelSpec { model: "summarizer".into(), provider: None, base_url: llm.base_url(), api_key: Some("sk-test".into()) };
        let photo = ImagePart {
            media_type: "image/jpeg".into(),
            path: "/cache/images/cat.prepared.jpg".into(),
            width: 1568,
            height: 1176,
            data: Some(Arc::from("/9j/4AAQSkZJRg")),
        };
        let middle = vec![ChatMessage { images: vec![photo], ..ChatMessage::user("what is this?") }, ChatMessage::assistant("A cat.")];
        let summary = summarize(&agent, model, &middle, None, 500, CancellationToken::new()).await.unwrap();
        let request = &llm.requests()[0];
        let excerpt = request.last_user_text().unwrap();
        assert!(excerpt.contains("User: what is this? [image 1568x1176]"), "{excerpt}");
        assert!(request.images().is_empty() && !request.body.to_string().contains("/9j/4AAQ"), "no pixels reach the summarizer");
        let carried = summary_message(&summary);
        assert!(carried.images.is_empty() && carried.content.contains("photo of a cat"), "the summary is text only");
    }

    #[test]
    fn an_attached_picture_counts_like_the_tokens_it_costs() {
        use crate::agent::ImagePart;
        let image = |data: Option<&str>| ImagePart {
            media_type: "image/jpeg".into(),
            path: "p".into(),
            width: 1000,
            height: 750,
            data: data.map(Arc::from),
        };
        let text = estimate_tokens(&[ChatMessage::user("hi")]);
        let sent = estimate_tokens(&[ChatMessage { images: vec![image(Some("x"))], ..ChatMessage::user("hi") }]);
        let named = estimate_tokens(&[ChatMessage { images: vec![image(None)], ..ChatMessage::user("hi") }]);
        assert_eq!(sent - text, 1000, "1000x750 / 750");
        assert!(named > text && named - text < 30, "an image not sent is its line of text");
    }

    #[test]
    fn estimate_grows_with_text() {
        let short = estimate_tokens(&[ChatMessage::user("hi")]);
        let long = estimate_tokens(&[ChatMessage::user("word ".repeat(400))]);
        assert!(long > short * 50, "{short} {long}");
    }
}
