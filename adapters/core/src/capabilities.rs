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
    /// The length of `text` as the platform counts it against its message limit.
    pub fn measure(self, text: &str) -> usize {
        match self {
            LengthUnit::Chars => text.chars().count(),
            LengthUnit::Utf16 => text.encode_utf16().count(),
        }
    }
    /// How much of the message limit one character uses up (1, or 2 for a UTF-16 surrogate
    /// pair), so a splitter can count as it walks the text.
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
    /// Slack's mrkdwn (`chat.postMessage` with `mrkdwn: true`): `*bold*`, `_italic_`, `~strike~`,
    /// `<url|text>` links, and `&`, `<`, `>` as entities (see [`crate::render::slack_mrkdwn`]).
    SlackMrkdwn,
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

/// Everything the core needs to know about a platform to deliver to it: limits, markup, streaming
/// and optional features. An adapter returns one from [`crate::PlatformAdapter::capabilities`].
#[derive(Debug, Clone)]
pub struct Capabilities {
    /// The longest message the platform accepts, counted in [`Self::length_unit`]; longer
    /// answers are split (see [`Self::splits_long_messages`]).
    pub max_message_len: usize,
    /// How [`Self::max_message_len`] is counted.
    pub length_unit: LengthUnit,
    /// The markup the agent's Markdown is rendered into before it is sent.
    pub dialect: MarkdownDialect,
    /// How an answer is shown while it is still being written.
    pub streaming: StreamStyle,
    /// Sent messages can be edited ([`crate::PlatformAdapter::edit`] works).
    pub supports_edit: bool,
    /// Messages can carry [`crate::Button`]s; elsewhere the choices are written out as text.
    pub supports_buttons: bool,
    /// A "typing…" indicator can be shown while the agent works
    /// ([`crate::PlatformAdapter::typing`]).
    pub supports_typing: bool,
    /// Chats have threads or topics, which the adapter reports in [`crate::SessionSource`] and
    /// expects back in [`crate::ChatTarget::thread_id`].
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
    /// People write back in this conversation, if not at once (a chat, a mailbox): an approval
    /// or a question can wait for their answer. False where the other end is a program (a
    /// webhook sender, an HTTP client), which never answers one.
    pub people_reply: bool,
    /// Plays a [`crate::FileKind::Voice`] file as a voice note (Telegram, Discord, Matrix);
    /// elsewhere it arrives as an audio file. `/voice` says which.
    pub voice_notes: bool,
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
            people_reply: false,
            voice_notes: false,
        }
    }
}
