//! Markdown to readable plain text: emphasis dropped, links as `text (url)`, list items as `- `,
//! code kept verbatim (in frames without markup, so a cut still treats it as code).

use super::doc::{Doc, DocBuilder, Escape, Frame, FrameKind, TextKind};
use pulldown_cmark::{Event, Parser, Tag, TagEnd};

/// The answer as readable plain text, for platforms that show no markup (and as the fallback
/// when a platform rejects its own markup).
pub fn to_plain(markdown: &str) -> String {
    document(markdown).to_text()
}

/// The plain-text rendering as a [`Doc`], so the chunker can split it without cutting code
/// blocks in the wrong place.
pub fn document(markdown: &str) -> Doc {
    let mut out = DocBuilder::new(Escape::None, true, false);
    let mut link_urls: Vec<String> = Vec::new();
    let mut list_depth = 0usize;
    let mut in_code_block = false;
    let mut last_text = String::new();
    for event in Parser::new(markdown) {
        match event {
            Event::Text(t) => {
                out.text(&t, if in_code_block { TextKind::Code } else { TextKind::Prose });
                last_text = t.to_string();
            }
            Event::Code(t) => {
                out.open(Frame::bare(FrameKind::Inline { splittable: false }));
                out.text(&t, TextKind::Code);
                out.close();
                last_text = t.to_string();
            }
            Event::SoftBreak | Event::HardBreak => out.text("\n", TextKind::Prose),
            Event::Start(Tag::Link { dest_url, .. }) => {
                link_urls.push(dest_url.to_string());
                last_text.clear();
            }
            Event::End(TagEnd::Link) => {
                // An autolink or a bare URL as its own text needs no repeat.
                if let Some(url) = link_urls.pop()
                    && last_text != url
                {
                    out.text(&format!(" ({url})"), TextKind::Prose);
                }
            }
            Event::Start(Tag::CodeBlock(_)) => {
                // Code starts on a line of its own, even right after a list bullet.
                if !out.is_empty() && !out.ends_with('\n') {
                    out.text("\n", TextKind::Prose);
                }
                in_code_block = true;
                out.open(Frame::bare(FrameKind::Code));
            }
            Event::Start(Tag::List(_)) => list_depth += 1,
            Event::End(TagEnd::List(_)) => {
                list_depth = list_depth.saturating_sub(1);
                if list_depth == 0 {
                    out.text("\n", TextKind::Prose);
                }
            }
            Event::Start(Tag::Item) => {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.text("\n", TextKind::Prose);
                }
                out.text(&format!("{}- ", "  ".repeat(list_depth.saturating_sub(1))), TextKind::Markup);
            }
            Event::End(TagEnd::Item) if !out.ends_with('\n') => out.text("\n", TextKind::Prose),
            Event::End(end @ (TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::CodeBlock)) => {
                if end == TagEnd::CodeBlock {
                    // The code's own last newline goes outside its frame, with the separator.
                    in_code_block = false;
                    out.trim_trailing_newlines();
                    out.close();
                    out.text("\n", TextKind::Prose);
                }
                out.keep_trailing_newlines(2);
                if !out.ends_with('\n') {
                    out.text("\n", TextKind::Prose);
                }
                if list_depth == 0 {
                    out.text("\n", TextKind::Prose);
                }
            }
            Event::Rule => out.text("\n---\n", TextKind::Markup),
            _ => {}
        }
    }
    out.finish_trimmed()
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
    fn code_keeps_its_indentation_and_blank_lines() {
        let plain = to_plain("Intro\n\n```py\ndef f():\n    x = 1\n\n        return x\n```\nafter");
        assert_eq!(plain, "Intro\n\ndef f():\n    x = 1\n\n        return x\n\nafter");
    }

    #[test]
    fn autolinks_are_not_repeated() {
        assert_eq!(to_plain("see <https://x.test>"), "see https://x.test");
    }
}
