//! The agent's Markdown rendered to Telegram's HTML subset from a parsed AST, so every character
//! Telegram treats specially is escaped by construction and every tag is closed (hand-escaped
//! MarkdownV2 strings are the classic source of "can't parse entities").

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Markdown to Telegram HTML. Markup characters disappear into tags, so the visible text is no
/// longer than the Markdown it came from (tables aside, whose ruler row makes up for their cell
/// separators): a chunk that fits the limit as Markdown fits it rendered.
pub fn to_telegram_html(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len() + 32);
    let mut lists: Vec<Option<u64>> = Vec::new();
    let mut in_code_block = false;
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Text(text) => escape_into(&mut out, &text),
            Event::Code(code) => {
                out.push_str("<code>");
                escape_into(&mut out, &code);
                out.push_str("</code>");
            }
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => out.push_str("\n——————\n"),
            Event::Html(html) | Event::InlineHtml(html) => escape_into(&mut out, &html),
            Event::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(name) => escape_into(&mut out, &format!("[{name}]")),
            Event::InlineMath(m) | Event::DisplayMath(m) => escape_into(&mut out, &m),
            Event::Start(tag) => open(&mut out, tag, &mut lists, &mut in_code_block),
            Event::End(tag) => close(&mut out, tag, &mut lists, &mut in_code_block),
        }
    }
    let trimmed = out.trim_end();
    trimmed.trim_start_matches('\n').to_string()
}

fn open(out: &mut String, tag: Tag<'_>, lists: &mut Vec<Option<u64>>, in_code_block: &mut bool) {
    match tag {
        Tag::Paragraph => {}
        Tag::Heading { .. } => out.push_str("<b>"),
        Tag::BlockQuote(_) => out.push_str("<blockquote>"),
        Tag::CodeBlock(kind) => {
            *in_code_block = true;
            match kind {
                CodeBlockKind::Fenced(lang) if !lang.trim().is_empty() => {
                    let lang = lang.split_whitespace().next().unwrap_or_default();
                    out.push_str("<pre><code class=\"language-");
                    escape_into(out, lang);
                    out.push_str("\">");
                }
                _ => out.push_str("<pre><code>"),
            }
        }
        Tag::List(start) => {
            if !lists.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            lists.push(start);
        }
        Tag::Item => {
            let depth = lists.len().saturating_sub(1);
            out.push_str(&"  ".repeat(depth));
            match lists.last_mut() {
                Some(Some(n)) => {
                    out.push_str(&format!("{n}. "));
                    *n += 1;
                }
                _ => out.push_str("• "),
            }
        }
        Tag::Emphasis => out.push_str("<i>"),
        Tag::Strong => out.push_str("<b>"),
        Tag::Strikethrough => out.push_str("<s>"),
        Tag::Link { dest_url, .. } => {
            out.push_str("<a href=\"");
            escape_into(out, &dest_url);
            out.push_str("\">");
        }
        Tag::Image { dest_url, .. } => {
            out.push_str("<a href=\"");
            escape_into(out, &dest_url);
            out.push_str("\">");
        }
        Tag::Table(_) => {
            *in_code_block = true;
            out.push_str("<pre>");
        }
        Tag::TableCell => out.push_str("| "),
        _ => {}
    }
}

fn close(out: &mut String, tag: TagEnd, lists: &mut Vec<Option<u64>>, in_code_block: &mut bool) {
    match tag {
        TagEnd::Paragraph => out.push_str(if lists.is_empty() { "\n\n" } else { "\n" }),
        TagEnd::Heading(level) => {
            out.push_str("</b>");
            out.push_str(if level == HeadingLevel::H1 { "\n\n" } else { "\n" });
        }
        TagEnd::BlockQuote(_) => {
            trim_trailing_newlines(out);
            out.push_str("</blockquote>\n");
        }
        TagEnd::CodeBlock => {
            *in_code_block = false;
            trim_trailing_newlines(out);
            out.push_str("</code></pre>\n");
        }
        TagEnd::List(_) => {
            lists.pop();
            if lists.is_empty() {
                trim_trailing_newlines(out);
                out.push_str("\n\n");
            }
        }
        TagEnd::Item if !out.ends_with('\n') => out.push('\n'),
        TagEnd::Emphasis => out.push_str("</i>"),
        TagEnd::Strong => out.push_str("</b>"),
        TagEnd::Strikethrough => out.push_str("</s>"),
        TagEnd::Link | TagEnd::Image => out.push_str("</a>"),
        TagEnd::Table => {
            *in_code_block = false;
            trim_trailing_newlines(out);
            out.push_str("</pre>\n");
        }
        TagEnd::TableHead | TagEnd::TableRow => out.push_str("|\n"),
        TagEnd::TableCell => out.push(' '),
        _ => {}
    }
}

fn trim_trailing_newlines(out: &mut String) {
    while out.ends_with('\n') {
        out.pop();
    }
}

/// Telegram HTML needs `&`, `<`, `>` and (in attributes) `"` escaped, nothing else.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
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
            let html = to_telegram_html(md);
            let visible = strip_tags(&html);
            assert!(visible.encode_utf16().count() <= md.encode_utf16().count() + 8, "{md:?} -> {visible:?}");
        }
    }

    fn strip_tags(html: &str) -> String {
        let mut out = String::new();
        let mut in_tag = false;
        for c in html.chars() {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                c if !in_tag => out.push(c),
                _ => {}
            }
        }
        out.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").replace("&quot;", "\"")
    }
}
