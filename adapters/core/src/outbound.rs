//! What the gateway sends back through an adapter, and how sending can fail.

use crate::source::Platform;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A chat to send to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatTarget {
    /// Which adapter delivers it.
    pub platform: Platform,
    /// The platform's id of the chat, as the adapter put it in [`crate::SessionSource::chat_id`].
    pub chat_id: String,
    /// A thread or topic inside the chat, on platforms that have them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

impl ChatTarget {
    /// Parse `platform:chat_id[:thread_id]` (delivery targets in config, cron and tools); the error
    /// says what is wrong with the value. Matrix room ids (`!room:server`, `#alias:server`) contain
    /// colons themselves, so for them everything after the platform is the chat id.
    pub fn parse(text: &str) -> Result<ChatTarget, ChatTargetError> {
        let Some((platform, rest)) = text.trim().split_once(':') else {
            return Err(ChatTargetError::NoColon);
        };
        if platform.is_empty() || !platform.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(ChatTargetError::BadPlatform(platform.to_string()));
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
            return Err(ChatTargetError::EmptyChat);
        }
        if thread_id.is_some_and(|t| t.is_empty() || t.contains(':')) {
            return Err(ChatTargetError::BadThread);
        }
        Ok(ChatTarget { platform: Platform::new(platform), chat_id: chat_id.to_string(), thread_id: thread_id.map(str::to_string) })
    }
}

/// What is wrong with a `platform:chat_id[:thread_id]` value; callers add which setting or
/// argument held it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatTargetError {
    /// There is no `:` at all, so no platform.
    #[error("expected `platform:chat_id[:thread_id]`")]
    NoColon,
    /// The part before the first `:` is empty or has characters no platform name has.
    #[error("`{0}` is not a platform name (letters, digits and '_')")]
    BadPlatform(String),
    /// Nothing follows the platform.
    #[error("the chat id is empty")]
    EmptyChat,
    /// A third part is present but empty, or there is a fourth.
    #[error("the thread id is empty or contains ':'")]
    BadThread,
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
    /// The chat it goes to.
    pub target: ChatTarget,
    /// The text, in the platform's dialect and within its length limit.
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
    /// What the button shows.
    pub label: String,
    /// At most 64 bytes (Telegram's `callback_data` limit).
    pub data: String,
}

/// Token usage of one turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens sent to the model, summed over the turn's calls.
    pub prompt_tokens: u64,
    /// Tokens the model generated, summed over the turn's calls.
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

    /// Prompt plus completion tokens (cache counts are part of the prompt already).
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

/// What a platform can say about a message whose send was cut off (see
/// [`crate::PlatformAdapter::find_sent`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The platform has it (found by its idempotency key).
    Found(SendReceipt),
    /// The platform looked and does not have it: sending it is no repeat.
    NotThere,
    /// Sending it again is deduplicated by the platform (a nonce or transaction id it remembers).
    ResendIsDeduplicated,
    /// The platform cannot tell.
    CannotTell,
}

/// Incremental output of a turn, for adapters that stream events rather than edit messages. The
/// turn always ends with a [`crate::PlatformAdapter::send`] of the whole final text with
/// `is_final` set, which is also the end of the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// More of the answer's text.
    Token {
        /// The new text, to append to what came before.
        text: String,
    },
    /// The agent called a tool.
    ToolCall {
        /// The call's id, which its [`StreamEvent::ToolResult`] repeats.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments, as the model wrote them (JSON text).
        arguments: String,
    },
    /// A tool call finished.
    ToolResult {
        /// The id of the [`StreamEvent::ToolCall`] this answers.
        id: String,
        /// The tool's name.
        name: String,
        /// What the tool returned to the model.
        content: String,
    },
}

/// Why a send failed; it decides what the outbound path does next.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The platform refused for now (HTTP 429); the message was not taken, so waiting and
    /// resending is always safe.
    #[error("rate limited by the platform; retry after {retry_after:?}")]
    RateLimited {
        /// How long the platform asked to wait.
        retry_after: Duration,
    },
    /// The text is over the platform's limit (chunking should prevent this).
    #[error("message too long for the platform")]
    TooLong,
    /// The platform could not parse the markup; the gateway resends the same words as plain text.
    #[error("the platform rejected the formatting: {0}")]
    BadFormat(String),
    /// The bot may not post there (removed from the chat, blocked by the user).
    #[error("not allowed to post in this chat: {0}")]
    Forbidden(String),
    /// The chat, or the message being edited or replied to, no longer exists.
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
    /// The adapter has no such operation (the name of it: `edit`, `typing`, ...).
    #[error("this adapter does not support {0}")]
    Unsupported(&'static str),
    /// Anything else the platform said; not retried.
    #[error("{0}")]
    Other(String),
}

impl SendError {
    /// Whether resending the same message may succeed without risking a duplicate.
    pub fn is_retryable(&self) -> bool {
        matches!(self, SendError::RateLimited { .. } | SendError::Transient(_))
    }
}
