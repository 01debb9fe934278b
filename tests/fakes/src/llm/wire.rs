//! The OpenAI Chat Completions wire format: `chat.completion` bodies,
//! `chat.completion.chunk` SSE events and the token-usage estimate.
//!
//! Pure functions only, so the exact bytes a client sees can be unit-tested
//! without a server.

use serde_json::{Value, json};

use super::reply::ToolCall;

/// A successful answer, independent of whether it is streamed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// Assistant text; `deltas` is how it is cut when streamed and always
    /// concatenates to `content`.
    Text {
        content: String,
        deltas: Vec<String>,
    },
    ToolCalls(Vec<ToolCall>),
}

impl Answer {
    /// Text cut into about three deltas so clients must reassemble.
    pub(crate) fn text(content: String) -> Answer {
        let deltas = split_even(&content, 3).into_iter().filter(|d| !d.is_empty()).collect();
        Answer::Text { content, deltas }
    }

    /// Exact deltas chosen by the test.
    pub(crate) fn chunks(deltas: Vec<String>) -> Answer {
        Answer::Text { content: deltas.concat(), deltas }
    }

    fn finish_reason(&self) -> &'static str {
        match self {
            Answer::Text { .. } => "stop",
            Answer::ToolCalls(_) => "tool_calls",
        }
    }

    fn completion_chars(&self) -> usize {
        match self {
            Answer::Text { content, .. } => content.chars().count(),
            Answer::ToolCalls(calls) => calls.iter().map(|c| c.name.chars().count() + c.arguments.chars().count()).sum(),
        }
    }
}

/// Per-response identity shared by every chunk of one stream.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub id: String,
    pub created: u64,
    pub model: String,
    pub prompt_tokens: u64,
}

/// The rough "4 characters per token" rule, never below 1 so clients that
/// divide by or assert on usage see a plausible value.
pub(crate) fn estimate_tokens(chars: usize) -> u64 {
    (chars.div_ceil(4) as u64).max(1)
}

fn usage(meta: &Meta, answer: &Answer) -> Value {
    let completion = estimate_tokens(answer.completion_chars());
    json!({
        "prompt_tokens": meta.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": meta.prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    })
}

fn tool_calls_json(calls: &[ToolCall]) -> Value {
    calls
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            })
        })
        .collect()
}

/// A complete non-streaming `chat.completion` body.
pub(crate) fn completion(meta: &Meta, answer: &Answer) -> Value {
    let message = match answer {
        Answer::Text { content, .. } => json!({
            "role": "assistant",
            "content": content,
            "refusal": null,
        }),
        Answer::ToolCalls(calls) => json!({
            "role": "assistant",
            "content": null,
            "refusal": null,
            "tool_calls": tool_calls_json(calls),
        }),
    };
    json!({
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": answer.finish_reason(),
        }],
        "usage": usage(meta, answer),
    })
}

/// Every SSE event of a streamed answer, each already framed as
/// `data: …\n\n`, ending with `data: [DONE]`.
pub(crate) fn stream_events(meta: &Meta, answer: &Answer, include_usage: bool) -> Vec<String> {
    let chunk = |delta: Value, finish_reason: Option<&str>| {
        let mut c = json!({
            "id": meta.id,
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": meta.model,
            "choices": [{
                "index": 0,
                "delta": delta,
                "logprobs": null,
                "finish_reason": finish_reason,
            }],
        });
        // OpenAI puts an explicit null usage on every chunk once the client
        // opted into usage reporting; mirror it so strict parsers are tested.
        if include_usage {
            c["usage"] = Value::Null;
        }
        c
    };

    let mut chunks = vec![chunk(json!({"role": "assistant"}), None)];
    match answer {
        Answer::Text { deltas, .. } => {
            chunks.extend(deltas.iter().map(|d| chunk(json!({"content": d}), None)));
        }
        Answer::ToolCalls(calls) => {
            for (index, call) in calls.iter().enumerate() {
                // The header delta carries id/type/name and empty arguments,
                // then arguments trickle in, as OpenAI streams them.
                chunks.push(chunk(
                    json!({"tool_calls": [{
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }]}),
                    None,
                ));
                for piece in split_arguments(&call.arguments) {
                    chunks.push(chunk(
                        json!({"tool_calls": [{
                            "index": index,
                            "function": {"arguments": piece},
                        }]}),
                        None,
                    ));
                }
            }
        }
    }
    chunks.push(chunk(json!({}), Some(answer.finish_reason())));
    if include_usage {
        chunks.push(json!({
            "id": meta.id,
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": meta.model,
            "choices": [],
            "usage": usage(meta, answer),
        }));
    }

    let mut events: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    events.push("data: [DONE]\n\n".to_owned());
    events
}

/// Arguments always arrive in at least two deltas so clients are forced to
/// concatenate; three for anything long enough.
fn split_arguments(arguments: &str) -> Vec<String> {
    let n = if arguments.chars().count() >= 3 { 3 } else { 2 };
    split_even(arguments, n)
}

/// Cuts `s` into exactly `n` pieces of near-equal char count, on char
/// boundaries; trailing pieces are empty when `s` is shorter than `n`.
fn split_even(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let size = chars.len().div_ceil(n).max(1);
    let mut pieces: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
    pieces.resize(n, String::new());
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta { id: "chatcmpl-fake-1".into(), created: 1, model: "fake-model".into(), prompt_tokens: 3 }
    }

    #[test]
    fn split_even_keeps_char_boundaries_and_count() {
        assert_eq!(split_even("héllo wörld", 3).concat(), "héllo wörld");
        assert_eq!(split_even("héllo wörld", 3).len(), 3);
        assert_eq!(split_even("a", 2), vec!["a".to_owned(), String::new()]);
        assert_eq!(split_even("", 3), vec![String::new(); 3]);
    }

    #[test]
    fn text_drops_empty_deltas() {
        assert_eq!(Answer::text("ab".into()), Answer::Text { content: "ab".into(), deltas: vec!["a".into(), "b".into()] });
        assert_eq!(Answer::text(String::new()), Answer::Text { content: String::new(), deltas: vec![] });
    }

    #[test]
    fn token_estimate_rounds_up_with_floor_of_one() {
        assert_eq!(estimate_tokens(0), 1);
        assert_eq!(estimate_tokens(4), 1);
        assert_eq!(estimate_tokens(5), 2);
    }

    #[test]
    fn completion_has_usage_and_finish_reason() {
        let body = completion(&meta(), &Answer::text("12345".into()));
        assert_eq!(body["choices"][0]["message"]["content"], "12345");
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert_eq!(body["usage"]["completion_tokens"], 2);
        assert_eq!(body["usage"]["total_tokens"], 5);
        assert_eq!(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    }

    #[test]
    fn stream_usage_chunk_only_on_request() {
        let answer = Answer::text("hi".into());
        let without = stream_events(&meta(), &answer, false);
        let with = stream_events(&meta(), &answer, true);
        assert_eq!(with.len(), without.len() + 1);
        assert_eq!(with.last().unwrap(), "data: [DONE]\n\n");
        let usage: Value = serde_json::from_str(with[with.len() - 2].trim_start_matches("data: ")).unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["prompt_tokens"], 3);
    }
}
