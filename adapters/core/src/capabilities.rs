//! What a platform can do. The core reads these instead of branching on platform names.

/// How a platform counts message length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthUnit {
    /// Unicode scalar values.
    Chars,
    /// UTF-16 code units (Telegram).
    Utf16,
}

impl LengthUnit {
    pub fn measure(self, text: &str) -> usize {
        match self {
            LengthUnit::Chars => text.chars().count(),
            LengthUnit::Utf16 => text.encode_utf16().count(),
        }
    }
    pub fn of_char(self, c: char) -> usize {
        match self {
            LengthUnit::Chars => 1,
            LengthUnit::Utf16 => c.len_utf16(),
        }
    }
}

/// The markup a platform understands; the gateway renders the agent's Markdown into it (see
/// [`crate::render`]) before splitting, so what a platform receives is already its own markup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkdownDialect {
    /// Markdown passed through unchanged (Discord, HTTP clients).
    Markdown,
    /// Markup removed; text only (email, SMS, logs).
    Plain,
    /// Telegram's HTML subset (`parse_mode: HTML`).
    TelegramHtml,
}

/// How a platform shows an answer while it is being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamStyle {
    /// No incremental output; the final text is sent once.
    None,
    /// One message edited in place.
    EditInPlace,
    /// Incremental events through [`crate::PlatformAdapter::stream`].
    Events,
}

#[derive(Debug, Clone)]
pub struct Capabilities {
    pub max_message_len: usize,
    pub length_unit: LengthUnit,
    pub dialect: MarkdownDialect,
    pub streaming: StreamStyle,
    pub supports_edit: bool,
    pub supports_buttons: bool,
    pub supports_typing: bool,
    pub supports_threads: bool,
    /// Can receive messages nobody asked for right now (cron results, background answers).
    pub supports_async_delivery: bool,
    /// Long answers are split into several messages (false: one message, however long).
    pub splits_long_messages: bool,
    /// Can send files (`MEDIA:` tags in answers); elsewhere the answer says a file was left out.
    pub supports_files: bool,
    /// Someone reads the conversation as it happens, so tool progress lines and questions back
    /// make sense (false where the answer goes to a program: a webhook callback, an HTTP client).
    pub read_live: bool,
}

impl Capabilities {
    /// Defaults for a request/response HTTP surface: one message of any length, markdown kept.
    pub fn http() -> Self {
        Self {
            max_message_len: usize::MAX,
            length_unit: LengthUnit::Chars,
            dialect: MarkdownDialect::Markdown,
            streaming: StreamStyle::None,
            supports_edit: false,
            supports_buttons: false,
            supports_typing: false,
            supports_threads: false,
            supports_async_delivery: false,
            splits_long_messages: false,
            supports_files: false,
            read_live: false,
        }
    }
}
