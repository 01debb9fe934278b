//! What the gateway sends back through an adapter, and how sending can fail.

use crate::source::Platform;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A chat to send to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatTarget {
    pub platform: Platform,
    pub chat_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

impl ChatTarget {
    /// Parse `platform:chat_id[:thread_id]` (delivery targets in config, cron and tools); the error
    /// says what is wrong with the value. Matrix room ids (`!room:server`, `#alias:server`) contain
    /// colons themselves, so for them everything after the platform is the chat id.
    pub fn parse(text: &str) -> Result<ChatTarget, String> {
        let Some((platform, rest)) = text.trim().split_once(':') else {
            return Err("expected `platform:chat_id[:thread_id]`".to_string());
        };
        if platform.is_empty() || !platform.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!("`{platform}` is not a platform name (letters, digits and '_')"));
        }
        let (chat_id, thread_id) = if rest.starts_with('!') || rest.starts_with('#') {
            (rest, None)
        } else {
            match rest.split_once(':') {
                Some((chat, thread)) => (chat, Some(thread)),
                None => (rest, None),
            }
        };
        if chat_id.is_empty() {
            return Err("the chat id is empty".to_string());
        }
        if thread_id.is_some_and(|t| t.is_empty() || t.contains(':')) {
            return Err("the thread id is empty or contains ':'".to_string());
        }
        Ok(ChatTarget { platform: Platform::new(platform), chat_id: chat_id.to_string(), thread_id: thread_id.map(str::to_string) })
    }
}

#[cfg(test)]
mod target_tests {
    use super::*;

    #[test]
    fn parses_targets() {
        let t = ChatTarget::parse("telegram:-100123:42").unwrap();
        assert_eq!((t.platform.as_str(), t.chat_id.as_str(), t.thread_id.as_deref()), ("telegram", "-100123", Some("42")));
        let t = ChatTarget::parse("matrix:!abc:example.org").unwrap();
        assert_eq!((t.chat_id.as_str(), t.thread_id), ("!abc:example.org", None));
        assert_eq!(
            ChatTarget::parse("Discord:55").unwrap(),
            ChatTarget { platform: Platform::new("discord"), chat_id: "55".into(), thread_id: None }
        );
        for bad in ["telegram", "telegram:", ":123", "tele gram:1", "telegram:1:", "telegram:1:2:3"] {
            assert!(ChatTarget::parse(bad).is_err(), "{bad} should be rejected");
        }
    }
}

/// One message, already rendered to the platform's dialect and chunked to its limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboundMessage {
    pub target: ChatTarget,
    pub text: String,
    /// The inbound message this answers, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// Stable across retries and restarts (turn id + chunk index); adapters that can pass an
    /// idempotency key to their platform do.
    pub idempotency_key: String,
    /// This is the last message of a turn's answer.
    #[serde(default)]
    pub is_final: bool,
    /// Token usage of the turn, for adapters that report it (the OpenAI-compatible API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Why the turn ended (`stop`, `length`, `error`, `interrupted`), with the final message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Rows of buttons under the message (approvals, model picker), for adapters whose
    /// [`crate::Capabilities::supports_buttons`] is true; others get the choices as text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buttons: Vec<Vec<Button>>,
    /// A file sent with `text` as its caption, for adapters whose
    /// [`crate::Capabilities::supports_files`] is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<crate::media::OutboundFile>,
}

/// One button under a message. Pressing it arrives as an [`crate::InboundEvent`] of kind
/// [`crate::MessageKind::ButtonPress`] whose text is `data` (a command such as `/approve`), so a
/// press means exactly what typing that text would.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Button {
    pub label: String,
    /// At most 64 bytes (Telegram's `callback_data` limit).
    pub data: String,
}

/// Token usage of one turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens read from the provider's cache (included in `prompt_tokens`).
    #[serde(default)]
    pub cached_tokens: u64,
    /// Prompt tokens written to the provider's cache (Anthropic `cache_creation_input_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Add another call's usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens += other.cached_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }

    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// What the platform said about a sent message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SendReceipt {
    /// The platform's id for the message, when it has one (needed to edit it later).
    pub message_id: Option<String>,
}

/// Incremental output of a turn, for adapters that stream events rather than edit messages. The
/// turn always ends with a [`crate::PlatformAdapter::send`] of the whole final text with
/// `is_final` set, which is also the end of the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    Token { text: String },
    ToolCall { id: String, name: String, arguments: String },
    ToolResult { id: String, name: String, content: String },
}

/// Why a send failed; it decides what the outbound path does next.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("rate limited by the platform; retry after {retry_after:?}")]
    RateLimited { retry_after: Duration },
    #[error("message too long for the platform")]
    TooLong,
    #[error("the platform rejected the formatting: {0}")]
    BadFormat(String),
    #[error("not allowed to post in this chat: {0}")]
    Forbidden(String),
    #[error("chat or message not found: {0}")]
    NotFound(String),
    /// Failed before the platform could have acted on it (connect refused, 5xx); safe to retry.
    #[error("transient failure: {0}")]
    Transient(String),
    /// The request may have reached the platform (timed out after sending); never blindly resent.
    #[error("ambiguous failure (may have been delivered): {0}")]
    Ambiguous(String),
    /// Nobody is waiting for this message any more (an HTTP client went away).
    #[error("the recipient is gone: {0}")]
    Gone(String),
    #[error("this adapter does not support {0}")]
    Unsupported(&'static str),
    #[error("{0}")]
    Other(String),
}

impl SendError {
    /// Whether resending the same message may succeed without risking a duplicate.
    pub fn is_retryable(&self) -> bool {
        matches!(self, SendError::RateLimited { .. } | SendError::Transient(_))
    }
}
