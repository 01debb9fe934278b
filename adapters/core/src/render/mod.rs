//! Rendering the agent's Markdown into a platform's dialect, from a parsed AST (never by escaping
//! strings by hand), as a [`Doc`] that [`crate::chunk`] can split without breaking its markup.
//!
//! - [`doc`]: the rendered document (text runs and the frames around them).
//! - [`markdown`]: Markdown passed through (Discord, HTTP clients).
//! - [`telegram_html`]: Telegram's HTML subset.
//! - [`slack_mrkdwn`]: Slack's mrkdwn.
//! - [`matrix_html`]: Matrix's HTML `formatted_body`, beside a Markdown `body` (not a chunking
//!   dialect: Matrix chunks are Markdown, each rendered once it is cut).
//! - [`plain`]: plain text.
//!
//! With the `oracle` feature (tests, fuzzing): `oracle`, the round-trip checker of split
//! messages, and `matrix_oracle`, an HTML parser's reading of Matrix's `formatted_body`.

pub mod doc;
pub mod markdown;
pub mod matrix_html;
pub mod plain;
pub mod slack_mrkdwn;
pub mod telegram_html;

#[cfg(any(test, feature = "oracle"))]
pub mod matrix_oracle;
#[cfg(any(test, feature = "oracle"))]
pub mod oracle;
#[cfg(test)]
mod proptests;

pub use doc::{Doc, Escape, Frame, FrameKind, Piece, TextKind};

use crate::capabilities::MarkdownDialect;

/// `markdown` in `dialect`, as one string.
pub fn render(markdown: &str, dialect: MarkdownDialect) -> String {
    match dialect {
        // Passed through untouched: no need to build the document.
        MarkdownDialect::Markdown => markdown.to_string(),
        _ => document(markdown, dialect).to_text(),
    }
}

/// `markdown` in `dialect`, as a document for the chunker.
pub fn document(markdown: &str, dialect: MarkdownDialect) -> Doc {
    match dialect {
        MarkdownDialect::Markdown => markdown::document(markdown),
        MarkdownDialect::Plain => plain::document(markdown),
        MarkdownDialect::TelegramHtml => telegram_html::document(markdown),
        MarkdownDialect::SlackMrkdwn => slack_mrkdwn::document(markdown),
    }
}

/// Text already rendered in `dialect`, as plain words: what is sent when the platform refuses
/// the markup.
pub fn to_plain_text(rendered: &str, dialect: MarkdownDialect) -> String {
    match dialect {
        MarkdownDialect::Markdown => plain::to_plain(rendered),
        MarkdownDialect::Plain => rendered.to_string(),
        MarkdownDialect::TelegramHtml => telegram_html::html_to_plain(rendered),
        MarkdownDialect::SlackMrkdwn => slack_mrkdwn::mrkdwn_to_plain(rendered),
    }
}

/// `text` escaped for `dialect` (a cursor or a counter written next to rendered text).
pub fn escape(text: &str, dialect: MarkdownDialect) -> String {
    match dialect {
        MarkdownDialect::TelegramHtml => Escape::Html.apply(text).into_owned(),
        MarkdownDialect::SlackMrkdwn => Escape::Slack.apply(text).into_owned(),
        MarkdownDialect::Markdown | MarkdownDialect::Plain => text.to_string(),
    }
}
