//! Rendering the agent's Markdown into a platform's dialect, from a parsed AST (never by
//! escaping strings by hand).

use crate::capabilities::MarkdownDialect;
use pulldown_cmark::{Event, Parser, Tag, TagEnd};

/// Render `markdown` for a platform.
pub fn render(markdown: &str, dialect: MarkdownDialect) -> String {
    match dialect {
        MarkdownDialect::Markdown => markdown.to_string(),
        MarkdownDialect::Plain => to_plain(markdown),
    }
}

/// Markdown to readable plain text: emphasis dropped, links as `text (url)`, list items as `- `,
/// code kept verbatim.
pub fn to_plain(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut link_urls: Vec<String> = Vec::new();
    let mut list_depth = 0usize;
    for event in Parser::new(markdown) {
        match event {
            Event::Text(t) | Event::Code(t) => out.push_str(&t),
            Event::SoftBreak => out.push('\n'),
            Event::HardBreak => out.push('\n'),
            Event::Start(Tag::Link { dest_url, .. }) => link_urls.push(dest_url.to_string()),
            Event::End(TagEnd::Link) => {
                if let Some(url) = link_urls.pop()
                    && !out.ends_with(url.as_str())
                {
                    out.push_str(&format!(" ({url})"));
                }
            }
            Event::Start(Tag::List(_)) => list_depth += 1,
            Event::End(TagEnd::List(_)) => {
                list_depth = list_depth.saturating_sub(1);
                if list_depth == 0 {
                    out.push('\n');
                }
            }
            Event::Start(Tag::Item) => {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(&"  ".repeat(list_depth.saturating_sub(1)));
                out.push_str("- ");
            }
            Event::End(TagEnd::Item) if !out.ends_with('\n') => out.push('\n'),
            Event::End(TagEnd::Paragraph) | Event::End(TagEnd::Heading(_)) | Event::End(TagEnd::CodeBlock) => {
                while out.ends_with("\n\n\n") {
                    out.pop();
                }
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                if list_depth == 0 {
                    out.push('\n');
                }
            }
            Event::Rule => out.push_str("\n---\n"),
            _ => {}
        }
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_drops_markup_and_keeps_content() {
        let md = "# Title\n\nSome **bold** and *em* with [a link](https://x.test).\n\n- one\n- two\n\n```\ncode  here\n```";
        let plain = to_plain(md);
        assert!(plain.contains("Title"));
        assert!(plain.contains("Some bold and em with a link (https://x.test)."));
        assert!(plain.contains("- one\n- two"));
        assert!(plain.contains("code  here"));
        assert!(!plain.contains("**"));
    }

    #[test]
    fn markdown_dialect_is_passthrough() {
        assert_eq!(render("**x**", MarkdownDialect::Markdown), "**x**");
    }
}
