//! An independent reading of Matrix's `formatted_body`: the HTML is parsed with a real HTML
//! parser (ruma-html, on html5ever: how Rust Matrix clients read a message) and compared with the
//! Markdown it was made from, as CommonMark reads that Markdown. The expectation never comes from
//! rendering the Markdown again with [`super::matrix_html`]; it is written here, from the spec:
//!
//! * the elements, in document order: which tag each Markdown construct becomes (a paragraph
//!   `p`, a fenced block `pre` + `code`, a list `ul`/`ol` of `li`, a table's cells `th`/`td`, ...);
//! * every code block's text, exactly (what a reader copies must be what the model wrote);
//! * the rest of the text, ignoring whitespace (HTML puts line breaks between blocks), so text
//!   the model wrote as HTML arrives as text;
//! * every element is one the Matrix spec lists for `org.matrix.custom.html`, and every link's
//!   scheme is http(s), mailto or matrix (or it has none).

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use ruma_html::{Html, NodeData, NodeRef};

/// The tags the spec suggests clients allow in `formatted_body` (client-server API,
/// "m.room.message msgtypes": <https://spec.matrix.org/v1.11/client-server-api/#mroommessage-msgtypes>).
const MATRIX_TAGS: &[&str] = &[
    "font",
    "del",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "p",
    "a",
    "ul",
    "ol",
    "sup",
    "sub",
    "li",
    "b",
    "i",
    "u",
    "strong",
    "em",
    "s",
    "code",
    "hr",
    "br",
    "div",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "caption",
    "pre",
    "span",
    "img",
    "details",
    "summary",
];

/// What a reader gets from a message.
#[derive(Debug, Default, PartialEq)]
struct Reading {
    /// Element names in document order; table cells as `cell`, table rows and sections left out
    /// (CommonMark has no events for them).
    elements: Vec<String>,
    code_blocks: Vec<String>,
    /// Text outside code blocks, whitespace removed.
    text: String,
}

/// Whether `html` (a `formatted_body`) says what `markdown` (its `body`) says; the first
/// difference when it does not.
pub fn check(markdown: &str, html: &str) -> Result<(), String> {
    let markdown = unify_line_ends(markdown);
    let expected = expect(&markdown);
    let mut shown = Reading::default();
    let mut foreign = Vec::new();
    let mut hrefs = Vec::new();
    for node in Html::parse(html).children() {
        read(&node, &mut shown, &mut foreign, &mut hrefs);
    }
    if let Some(tag) = foreign.first() {
        return Err(format!("<{tag}> is not in Matrix's HTML subset: {html}"));
    }
    if let Some(href) = hrefs.iter().find(|h| !safe_scheme(h)) {
        return Err(format!("a link to {href:?} reached the HTML: {html}"));
    }
    if shown.elements != expected.elements {
        return Err(format!("elements differ:\n  markdown: {:?}\n  html:     {:?}\n{html}", expected.elements, shown.elements));
    }
    if shown.code_blocks != expected.code_blocks {
        return Err(format!("code differs:\n  markdown: {:?}\n  html:     {:?}", expected.code_blocks, shown.code_blocks));
    }
    if shown.text != expected.text {
        return Err(format!("text differs:\n  markdown: {:?}\n  html:     {:?}", expected.text, shown.text));
    }
    Ok(())
}

/// HTML parsers read CR LF and lone CR as LF; so does a reader.
fn unify_line_ends(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

fn safe_scheme(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        None => true,
        Some((scheme, _)) if scheme.contains(['/', '?', '#']) => true,
        Some((scheme, _)) => matches!(scheme, "http" | "https" | "mailto" | "matrix"),
    }
}

/// What the Markdown says, as CommonMark (with GitHub's tables, strikethrough and task lists)
/// reads it.
fn expect(markdown: &str) -> Reading {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    let mut out = Reading::default();
    let mut code: Option<String> = None;
    let mut text = String::new();
    let element = |out: &mut Reading, name: &str| out.elements.push(name.to_string());
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Paragraph => element(&mut out, "p"),
                Tag::Heading { level, .. } => element(&mut out, &format!("h{}", level as usize)),
                Tag::BlockQuote(_) => element(&mut out, "blockquote"),
                Tag::CodeBlock(_) => {
                    element(&mut out, "pre");
                    element(&mut out, "code");
                    code = Some(String::new());
                }
                Tag::List(Some(_)) => element(&mut out, "ol"),
                Tag::List(None) => element(&mut out, "ul"),
                Tag::Item => element(&mut out, "li"),
                Tag::Table(_) => element(&mut out, "table"),
                Tag::TableCell => element(&mut out, "cell"),
                Tag::Emphasis => element(&mut out, "em"),
                Tag::Strong => element(&mut out, "strong"),
                Tag::Strikethrough => element(&mut out, "del"),
                // An image becomes a link to it (a client must not fetch it unasked); a link
                // with any other scheme keeps its words only.
                Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } if safe_scheme(&dest_url) => element(&mut out, "a"),
                _ => {}
            },
            Event::End(TagEnd::CodeBlock) => out.code_blocks.extend(code.take()),
            Event::Text(t) => match code.as_mut() {
                Some(code) => code.push_str(&t),
                None => text.push_str(&t),
            },
            Event::Code(c) => {
                element(&mut out, "code");
                text.push_str(&c);
            }
            // Raw HTML from the model is text to its readers.
            Event::Html(h) | Event::InlineHtml(h) => text.push_str(&h),
            Event::HardBreak => element(&mut out, "br"),
            Event::Rule => element(&mut out, "hr"),
            Event::TaskListMarker(done) => text.push_str(if done { "☑" } else { "☐" }),
            _ => {}
        }
    }
    out.text = text.chars().filter(|c| !c.is_whitespace()).collect();
    out
}

/// Read `node` and what is under it into `out`; elements outside Matrix's subset into
/// `foreign`, link targets into `hrefs`.
fn read(node: &NodeRef, out: &mut Reading, foreign: &mut Vec<String>, hrefs: &mut Vec<String>) {
    match node.data() {
        NodeData::Text(text) => out.text.extend(text.borrow().chars().filter(|c| !c.is_whitespace())),
        NodeData::Element(data) => {
            let name = data.name.local.to_string();
            if !MATRIX_TAGS.contains(&name.as_str()) {
                foreign.push(name.clone());
            }
            if name == "a" {
                hrefs.extend(data.attrs.borrow().iter().filter(|a| &*a.name.local == "href").map(|a| a.value.to_string()));
            }
            match name.as_str() {
                "thead" | "tbody" | "tr" => {}
                "th" | "td" => out.elements.push("cell".to_string()),
                _ => out.elements.push(name.clone()),
            }
            if name == "code" && node.parent().and_then(|p| p.as_element().map(|e| &*e.name.local == "pre")).unwrap_or(false) {
                out.code_blocks.push(text_of(node));
                return;
            }
            for child in node.children() {
                read(&child, out, foreign, hrefs);
            }
        }
        NodeData::Document | NodeData::Other => {
            for child in node.children() {
                read(&child, out, foreign, hrefs);
            }
        }
    }
}

/// All the text under `node`, as it is.
fn text_of(node: &NodeRef) -> String {
    match node.data() {
        NodeData::Text(text) => text.borrow().to_string(),
        _ => node.children().map(|child| text_of(&child)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn a_faithful_rendering_passes() {
        let html = "<p><strong>Plan</strong> with <code>x &lt; y</code></p>\n<ul>\n<li>one &lt;b&gt;</li>\n</ul>\n\
                    <pre><code class=\"language-py\">print(&quot;&lt;hi&gt;&quot;)\n</code></pre>";
        check("**Plan** with `x < y`\n\n- one <b>\n\n```py\nprint(\"<hi>\")\n```", html).unwrap();
    }

    #[test]
    fn what_a_broken_renderer_would_do_is_caught() {
        let md = "a <b>bold</b> claim\n\n```\nx < y\n```";
        let good = "<p>a &lt;b&gt;bold&lt;/b&gt; claim</p>\n<pre><code>x &lt; y\n</code></pre>";
        check(md, good).unwrap();
        let unescaped = "<p>a <b>bold</b> claim</p>\n<pre><code>x &lt; y\n</code></pre>";
        assert!(check(md, unescaped).unwrap_err().contains("elements differ"), "the model's HTML became markup");
        let code_changed = "<p>a &lt;b&gt;bold&lt;/b&gt; claim</p>\n<pre><code>x &lt;  y\n</code></pre>";
        assert!(check(md, code_changed).unwrap_err().contains("code differs"));
        let lost_words = "<p>a claim</p>\n<pre><code>x &lt; y\n</code></pre>";
        assert!(check(md, lost_words).unwrap_err().contains("text differs"));
        let script = check("[x](javascript:alert(1))", "<p><a href=\"javascript:alert(1)\">x</a></p>").unwrap_err();
        assert!(script.contains("elements differ") || script.contains("reached the HTML"), "{script}");
        assert!(check("x", "<p><marquee>x</marquee></p>").unwrap_err().contains("not in Matrix's HTML subset"));
    }
}
