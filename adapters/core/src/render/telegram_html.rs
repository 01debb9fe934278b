//! The agent's Markdown rendered to Telegram's HTML subset from a parsed AST, so every character
//! Telegram treats specially is escaped by construction and every tag is closed (hand-escaped
//! MarkdownV2 strings are the classic source of "can't parse entities").
//!
//! Telegram turns every tab into a single space, which flattens tab-indented code; tabs are
//! expanded to the next multiple of [`TAB_WIDTH`] columns instead, so indentation survives.

use super::doc::{Doc, DocBuilder, Escape, Frame, FrameKind, TextKind};
use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Columns between tab stops when tabs are expanded.
pub const TAB_WIDTH: usize = 4;

/// Markdown to Telegram HTML. Markup characters disappear into tags, so the visible text is no
/// longer than the Markdown it came from (tables aside, whose ruler row makes up for their cell
/// separators).
pub fn to_telegram_html(markdown: &str) -> String {
    document(markdown).to_text()
}

/// Markdown to Telegram HTML, as a [`Doc`] the chunker can split.
pub fn document(markdown: &str) -> Doc {
    let mut w = Writer { out: DocBuilder::new(Escape::Html, false, false), lists: Vec::new(), in_code: false, column: 0 };
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Text(text) => w.text(&text),
            Event::Code(code) => {
                w.out.open(Frame::symmetric(FrameKind::Inline { splittable: false }, "<code>", "</code>"));
                w.push(&code, TextKind::Code);
                w.out.close();
            }
            Event::SoftBreak | Event::HardBreak => w.push("\n", TextKind::Prose),
            Event::Rule => w.push("\n——————\n", TextKind::Markup),
            Event::Html(html) | Event::InlineHtml(html) => w.text(&html),
            Event::TaskListMarker(done) => w.push(if done { "☑ " } else { "☐ " }, TextKind::Markup),
            Event::FootnoteReference(name) => w.text(&format!("[{name}]")),
            Event::InlineMath(m) | Event::DisplayMath(m) => w.text(&m),
            Event::Start(tag) => w.open(tag),
            Event::End(tag) => w.close(tag),
        }
    }
    w.out.finish_trimmed()
}

struct Writer {
    out: DocBuilder,
    lists: Vec<Option<u64>>,
    /// Inside a code block or a table (shown as preformatted text).
    in_code: bool,
    /// Columns since the last newline, for tab stops.
    column: usize,
}

impl Writer {
    fn text(&mut self, text: &str) {
        let kind = if self.in_code { TextKind::Code } else { TextKind::Prose };
        self.push(text, kind);
    }

    fn push(&mut self, text: &str, kind: TextKind) {
        let expanded = expand_tabs(text, &mut self.column);
        self.out.text(&expanded, kind);
    }

    fn tag(&mut self, kind: FrameKind, open: String, close: &str) {
        self.out.open(Frame::symmetric(kind, open, close));
    }

    fn open(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {}
            Tag::Heading { .. } => self.tag(FrameKind::Lines, "<b>".into(), "</b>"),
            Tag::BlockQuote(_) => self.tag(FrameKind::Block, "<blockquote>".into(), "</blockquote>"),
            Tag::CodeBlock(kind) => {
                self.in_code = true;
                // A code block is a block of its own: its tab stops count from its margin.
                self.column = 0;
                self.tag(FrameKind::Code, "<pre>".into(), "</pre>");
                let open = match kind {
                    CodeBlockKind::Fenced(lang) if !lang.trim().is_empty() => {
                        let lang = lang.split_whitespace().next().unwrap_or_default();
                        format!("<code class=\"language-{}\">", Escape::Html.apply(lang))
                    }
                    _ => "<code>".to_string(),
                };
                self.tag(FrameKind::Code, open, "</code>");
            }
            Tag::List(start) => {
                if !self.lists.is_empty() && !self.out.ends_with('\n') {
                    self.push("\n", TextKind::Prose);
                }
                self.lists.push(start);
            }
            Tag::Item => {
                let depth = self.lists.len().saturating_sub(1);
                let bullet = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let bullet = format!("{n}. ");
                        *n += 1;
                        bullet
                    }
                    _ => "• ".to_string(),
                };
                self.push(&format!("{}{bullet}", "  ".repeat(depth)), TextKind::Markup);
            }
            Tag::Emphasis => self.tag(FrameKind::Inline { splittable: true }, "<i>".into(), "</i>"),
            Tag::Strong => self.tag(FrameKind::Inline { splittable: true }, "<b>".into(), "</b>"),
            Tag::Strikethrough => self.tag(FrameKind::Inline { splittable: true }, "<s>".into(), "</s>"),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                let open = format!("<a href=\"{}\">", Escape::Html.apply(&dest_url));
                self.tag(FrameKind::Inline { splittable: false }, open, "</a>");
            }
            Tag::Table(_) => {
                self.in_code = true;
                self.tag(FrameKind::Code, "<pre>".into(), "</pre>");
            }
            Tag::TableCell => self.push("| ", TextKind::Code),
            _ => {}
        }
    }

    fn close(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.push(if self.lists.is_empty() { "\n\n" } else { "\n" }, TextKind::Prose),
            TagEnd::Heading(level) => {
                self.out.close();
                self.push(if level == HeadingLevel::H1 { "\n\n" } else { "\n" }, TextKind::Prose);
            }
            TagEnd::BlockQuote(_) => {
                self.out.trim_trailing_newlines();
                self.out.close();
                self.push("\n", TextKind::Prose);
            }
            TagEnd::CodeBlock => {
                self.in_code = false;
                self.out.trim_trailing_newlines();
                self.out.close();
                self.out.close();
                self.push("\n", TextKind::Prose);
            }
            TagEnd::List(_) => {
                self.lists.pop();
                if self.lists.is_empty() {
                    self.out.trim_trailing_newlines();
                    self.push("\n\n", TextKind::Prose);
                }
            }
            TagEnd::Item if !self.out.ends_with('\n') => self.push("\n", TextKind::Prose),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link | TagEnd::Image => self.out.close(),
            TagEnd::Table => {
                self.in_code = false;
                self.out.trim_trailing_newlines();
                self.out.close();
                self.push("\n", TextKind::Prose);
            }
            TagEnd::TableHead | TagEnd::TableRow => self.push("|\n", TextKind::Code),
            TagEnd::TableCell => self.push(" ", TextKind::Code),
            _ => {}
        }
    }
}

/// `text` with each tab replaced by the spaces up to the next tab stop; `column` carries the
/// position in the current line across calls.
pub fn expand_tabs(text: &str, column: &mut usize) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\t' => {
                let spaces = TAB_WIDTH - *column % TAB_WIDTH;
                out.extend(std::iter::repeat_n(' ', spaces));
                *column += spaces;
            }
            '\n' => {
                out.push(c);
                *column = 0;
            }
            c => {
                out.push(c);
                *column += 1;
            }
        }
    }
    out
}

/// Telegram HTML back to the words it shows, for when Telegram refuses the markup: tags
/// dropped, entities decoded.
pub fn html_to_plain(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(i) = rest.find(['<', '&']) {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if rest.starts_with('<') {
            match rest.find('>') {
                Some(end) => rest = &rest[end + 1..],
                None => {
                    out.push_str(rest);
                    rest = "";
                }
            }
            continue;
        }
        let entity = rest.find(';').filter(|&end| end <= 10).and_then(|end| decode_entity(&rest[1..end]).map(|c| (c, end)));
        match entity {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn decode_entity(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "quot" => Some('"'),
        _ => {
            let code = match name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
                Some(hex) => u32::from_str_radix(hex, 16).ok(),
                None => name.strip_prefix('#').and_then(|d| d.parse().ok()),
            };
            code.and_then(char::from_u32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_markup_becomes_tags_and_specials_are_escaped() {
        let html = to_telegram_html("Use **bold**, *em*, ~~gone~~ and `a<b && c>d` at 5 < 6 & [site](https://x.test/?a=1&b=\"2\").");
        assert_eq!(
            html,
            "Use <b>bold</b>, <i>em</i>, <s>gone</s> and <code>a&lt;b &amp;&amp; c&gt;d</code> at 5 &lt; 6 &amp; \
             <a href=\"https://x.test/?a=1&amp;b=&quot;2&quot;\">site</a>."
        );
    }

    #[test]
    fn code_blocks_keep_their_language_and_content() {
        let html = to_telegram_html("Before\n\n```rust\nfn main() { if a < b { println!(\"&\"); } }\n```\nAfter");
        assert!(
            html.contains("<pre><code class=\"language-rust\">fn main() { if a &lt; b { println!(&quot;&amp;&quot;); } }</code></pre>"),
            "{html}"
        );
        assert!(html.starts_with("Before\n\n<pre>"));
        assert!(html.ends_with("After"));
    }

    #[test]
    fn tabs_become_spaces_to_the_next_stop() {
        let html = to_telegram_html("```py\ndef f():\n\tif x:\n\t\treturn 1\n\ta\tb\n```");
        assert!(html.contains("def f():\n    if x:\n        return 1\n    a   b</code>"), "{html}");
    }

    #[test]
    fn lists_headings_and_quotes() {
        let html = to_telegram_html("# Plan\n\n1. first\n2. second\n   - nested\n\n> quoted *text*\n\nend");
        assert!(html.starts_with("<b>Plan</b>\n\n1. first\n2. second\n  • nested"), "{html}");
        assert!(html.contains("<blockquote>quoted <i>text</i></blockquote>"), "{html}");
        assert!(html.ends_with("end"));
    }

    #[test]
    fn raw_html_from_the_model_is_shown_as_text() {
        assert_eq!(to_telegram_html("a <script>x</script> b"), "a &lt;script&gt;x&lt;/script&gt; b");
    }

    #[test]
    fn an_unclosed_fence_while_streaming_still_renders_balanced_tags() {
        let html = to_telegram_html("Here:\n```py\nprint(1)");
        assert!(html.ends_with("print(1)</code></pre>"), "{html}");
    }

    #[test]
    fn visible_text_is_never_longer_than_the_markdown() {
        let samples = ["**a** _b_ [c](http://x) `d`", "# h\n\n- x\n- y\n\n```\ncode\n```", "| a | b |\n|---|---|\n| 1 | 2 |"];
        for md in samples {
            let visible = html_to_plain(&to_telegram_html(md));
            assert!(visible.encode_utf16().count() <= md.encode_utf16().count() + 8, "{md:?} -> {visible:?}");
        }
    }

    #[test]
    fn plain_fallback_drops_tags_and_decodes_entities() {
        let html = to_telegram_html("**a < b** & `c>d` [x](http://y?a&b)");
        assert_eq!(html_to_plain(&html), "a < b & c>d x");
        assert_eq!(html_to_plain("1 &bogus; 2 &amp 3 <b"), "1 &bogus; 2 &amp 3 <b");
    }
}
