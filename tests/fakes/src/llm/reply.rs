//! The script vocabulary of [`FakeLlm`](super::FakeLlm): what the fake answers
//! to one request.

use std::time::Duration;

/// One scripted answer to a `POST /v1/chat/completions`.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Whole answer text; when streamed it is split into about 3 deltas.
    Text(String),
    /// Exact stream deltas; joined into one message for non-stream requests.
    Chunks(Vec<String>),
    /// Assistant message carrying tool calls, `finish_reason: "tool_calls"`.
    ToolCalls(Vec<ToolCall>),
    /// HTTP error with a JSON body, optionally with a `Retry-After` header.
    Error { status: u16, body: serde_json::Value, retry_after_secs: Option<u64> },
    /// Accept the request and never answer, until the client gives up or the
    /// fake shuts down.
    Hang,
    /// Wait, then answer with the inner reply.
    Delay(Duration, Box<Reply>),
    /// `echo: <text of the last user message>`; the initial default reply.
    Echo,
}

impl Reply {
    /// Shorthand for [`Reply::Text`].
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text(text.into())
    }

    /// Shorthand for [`Reply::Chunks`].
    pub fn chunks<I, S>(chunks: I) -> Reply
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Reply::Chunks(chunks.into_iter().map(Into::into).collect())
    }

    /// Shorthand for a single tool call.
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Reply {
        Reply::ToolCalls(vec![ToolCall::new(id, name, arguments)])
    }

    /// An error in the OpenAI error envelope
    /// (`{"error":{"message","type","param","code"}}`).
    pub fn error(status: u16, message: impl Into<String>) -> Reply {
        Reply::Error { status, body: error_body(status, &message.into()), retry_after_secs: None }
    }

    /// A 429 with a `Retry-After: <secs>` header, like OpenAI's rate limiter.
    pub fn rate_limited(retry_after_secs: u64) -> Reply {
        Reply::Error { status: 429, body: error_body(429, "Rate limit reached (fake)"), retry_after_secs: Some(retry_after_secs) }
    }

    /// Wraps `self` in a [`Reply::Delay`].
    pub fn delayed(self, delay: Duration) -> Reply {
        Reply::Delay(delay, Box::new(self))
    }
}

/// The OpenAI error envelope, with the `type` OpenAI uses for that status so
/// clients that branch on it see realistic values.
pub(crate) fn error_body(status: u16, message: &str) -> serde_json::Value {
    let kind = match status {
        429 => "rate_limit_exceeded",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    serde_json::json!({
        "error": {"message": message, "type": kind, "param": null, "code": null}
    })
}

/// A function call requested by the assistant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// JSON-encoded arguments, exactly as the API transmits them.
    pub arguments: String,
}

impl ToolCall {
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> ToolCall {
        ToolCall { id: id.into(), name: name.into(), arguments: arguments.into() }
    }
}
