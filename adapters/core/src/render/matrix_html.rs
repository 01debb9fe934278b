//! Matrix's `formatted_body` (`org.matrix.custom.html`) from the agent's Markdown, built from the
//! pulldown-cmark AST. Matrix clients show a broad HTML subset, so the Markdown keeps its shape
//! (headings, lists, tables, code blocks with their language); the plain `body` beside it is the
//! Markdown itself, as Matrix clients send it.
//!
//! Nothing the model writes becomes markup it did not ask for through Markdown: raw HTML in the
//! text is shown as text, and a link or image whose scheme is not http(s), mailto or matrix is
//! shown as its words without the link (`javascript:` never reaches a client's `href`). Images
//! become links: a client would otherwise fetch the model's URL without being asked.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};

/// `markdown` as Matrix HTML.
pub fn to_html(markdown: &str) -> String {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    let mut dropped_links = Vec::new();
    let events = Parser::new_ext(markdown, options).filter_map(|event| match event {
        // Raw HTML from the model is text, never markup.
        Event::Html(html) | Event::InlineHtml(html) => Some(Event::Text(html)),
        Event::Start(Tag::Link { link_type, dest_url, title, id }) => {
            let safe = safe_url(&dest_url);
            dropped_links.push(!safe);
            safe.then_some(Event::Start(Tag::Link { link_type, dest_url, title, id }))
        }
        Event::End(TagEnd::Link) => (!dropped_links.pop().unwrap_or(false)).then_some(Event::End(TagEnd::Link)),
        Event::Start(Tag::Image { link_type, dest_url, title, id }) => {
            let safe = safe_url(&dest_url);
            dropped_links.push(!safe);
            safe.then_some(Event::Start(Tag::Link { link_type, dest_url, title, id }))
        }
        Event::End(TagEnd::Image) => (!dropped_links.pop().unwrap_or(false)).then_some(Event::End(TagEnd::Link)),
        Event::TaskListMarker(done) => Some(Event::Text(CowStr::Borrowed(if done { "☑ " } else { "☐ " }))),
        other => Some(other),
    });
    let mut html = String::with_capacity(markdown.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, events);
    html.trim_end().to_string()
}

fn safe_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        // A relative link has no scheme: harmless, though rarely meaningful in a chat.
        None => true,
        Some((scheme, _)) if scheme.contains('/') || scheme.contains('?') || scheme.contains('#') => true,
        Some((scheme, _)) => matches!(scheme, "http" | "https" | "mailto" | "matrix"),
    }
}

#[cfg(test)]
mod tests {
    use super::to_html;

    #[test]
    fn markdown_keeps_its_shape() {
        let html = to_html("# Plan\n\n**bold** _it_ ~~gone~~ `x<y`\n\n- one\n- two\n\n```rust\nfn main() {\n    let a = 1;\n}\n```");
        assert!(html.contains("<h1>Plan</h1>"), "{html}");
        assert!(html.contains("<strong>bold</strong> <em>it</em> <del>gone</del> <code>x&lt;y</code>"), "{html}");
        assert!(html.contains("<ul>\n<li>one</li>\n<li>two</li>\n</ul>"), "{html}");
        assert!(html.contains("<pre><code class=\"language-rust\">fn main() {\n    let a = 1;\n}\n</code></pre>"), "{html}");
    }

    #[test]
    fn raw_html_from_the_model_is_shown_as_text() {
        let html = to_html("hi <img src=x onerror=alert(1)> there\n\n<script>steal()</script>");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<script"), "{html}");
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"), "{html}");
    }

    #[test]
    fn only_safe_link_schemes_become_links() {
        let html = to_html("[click](javascript:alert(1)) [site](https://example.org/a?b=\"c\") [me](mailto:a@b.c)");
        assert!(!html.to_ascii_lowercase().contains("javascript"), "{html}");
        assert!(html.contains("click"), "the words stay: {html}");
        assert!(html.contains("<a href=\"https://example.org/a?b=%22c%22\">site</a>"), "{html}");
        assert!(html.contains("<a href=\"mailto:a@b.c\">me</a>"), "{html}");
        let image = to_html("![cat](https://example.org/cat.png) ![x](data:text/html;base64,AAAA)");
        assert!(!image.contains("<img"), "a client must not fetch the model's image unasked: {image}");
        assert!(image.contains("<a href=\"https://example.org/cat.png\">cat</a>"), "{image}");
        assert!(!image.contains("data:"), "{image}");
    }
}
