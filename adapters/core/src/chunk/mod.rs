//! Splitting a rendered answer into messages that fit a platform's limit, losing nothing.
//!
//! The rules follow Hermes and go further: a text that fits is one message; otherwise each part
//! keeps room for a ` (i/n)` counter and is cut, in order of preference, at a line end in the
//! second half of the window, at the last space or line end (the spaces at such a cut are
//! dropped: the break between messages stands for them), between two graphemes, and only when a
//! single span is longer than a part,
//! inside a span that should stay whole. Inside code every character is content: nothing is
//! dropped and cuts fall at line ends. A cut never splits a grapheme cluster, an escape or an
//! entity. A part that ends inside a frame (a code fence, an HTML tag) closes it, and the next
//! part reopens it (a fence with its language, the same tag), so every part renders on its own.

mod atoms;
mod scan;

use crate::capabilities::LengthUnit;
use crate::render::Doc;
use std::ops::Range;

pub use atoms::atoms;

/// Smallest room a part's content gets; below it counters are left out.
const MIN_BUDGET: usize = 8;

/// One part of a split answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The part as sent: reopened frames, its share of the answer, closed frames.
    pub text: String,
    /// Which bytes of the answer's visible text ([`Doc::visible_text`]) it shows.
    pub visible: Range<usize>,
    /// It ends in or right after code or a table, where a counter needs a line of its own.
    pub ends_in_block: bool,
}

/// How long `doc` is in the platform's unit: its text, and its markup where the platform counts
/// markup.
pub fn measure(doc: &Doc, unit: LengthUnit) -> usize {
    scan::doc_width(doc, unit)
}

/// `doc` as messages of at most `max_len` units each, numbered ` (i/n)` when there are several.
pub fn split(doc: &Doc, max_len: usize, unit: LengthUnit) -> Vec<String> {
    if measure(doc, unit) <= max_len {
        return vec![doc.to_text()];
    }
    let mut digits = 1;
    loop {
        // " (" + i + "/" + n + ")"
        let reserve = 4 + 2 * digits;
        let budget = max_len.saturating_sub(reserve);
        if budget < MIN_BUDGET {
            return split_parts(doc, 0, max_len, unit).into_iter().map(|p| p.text).collect();
        }
        let parts = split_parts(doc, 0, budget, unit);
        let total = parts.len();
        let needed = total.to_string().len();
        if needed > digits {
            digits = needed;
            continue;
        }
        return parts.into_iter().enumerate().map(|(i, part)| with_counter(part, i + 1, total)).collect();
    }
}

/// `doc` from visible byte `from` on, as parts of at most `budget` units each, without
/// counters (the stream editor's messages, which grow while the answer is written).
pub fn split_parts(doc: &Doc, from: usize, budget: usize, unit: LengthUnit) -> Vec<Part> {
    scan::Splitter::new(doc, unit, budget.max(1)).split_from(from)
}

fn with_counter(part: Part, index: usize, total: usize) -> String {
    if total == 1 {
        return part.text;
    }
    let mut text = part.text;
    // The break before the counter stands for the line end the part ends with; in code only
    // that one (a blank code line is content).
    let body = if part.ends_in_block {
        text.strip_suffix('\n').map_or(text.len(), |t| t.strip_suffix('\r').unwrap_or(t).len())
    } else {
        text.trim_end_matches(['\r', '\n']).len()
    };
    text.truncate(body);
    let separator = if part.ends_in_block { '\n' } else { ' ' };
    text.push(separator);
    text.push_str(&format!("({index}/{total})"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::MarkdownDialect;
    use crate::render::document;

    fn chunks(markdown: &str, dialect: MarkdownDialect, max: usize, unit: LengthUnit) -> Vec<String> {
        split(&document(markdown, dialect), max, unit)
    }

    #[test]
    fn short_text_is_one_message() {
        assert_eq!(chunks("hello", MarkdownDialect::Markdown, 100, LengthUnit::Chars), vec!["hello"]);
    }

    #[test]
    fn every_part_fits_and_is_numbered() {
        let text = "word ".repeat(3000);
        let parts = chunks(&text, MarkdownDialect::Markdown, 2000, LengthUnit::Chars);
        assert!(parts.len() >= 8);
        for (i, c) in parts.iter().enumerate() {
            assert!(c.chars().count() <= 2000, "part {i} too long");
            assert!(c.ends_with(&format!(" ({}/{})", i + 1, parts.len())));
        }
        let words: usize = parts.iter().map(|c| c.rsplit_once(" (").map_or(c.as_str(), |(b, _)| b).split_whitespace().count()).sum();
        assert_eq!(words, 3000, "no word lost or split");
    }

    #[test]
    fn code_fences_are_closed_and_reopened_with_language() {
        let code: String = (0..400).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("Intro\n```rust\n{code}```\nOutro");
        let parts = chunks(&text, MarkdownDialect::Markdown, 1000, LengthUnit::Chars);
        assert!(parts.len() > 2);
        for c in &parts {
            let fences = c.lines().filter(|l| l.trim_start().starts_with("```")).count();
            assert_eq!(fences % 2, 0, "unbalanced fences in part: {c}");
        }
        assert!(parts[1].starts_with("```rust\n"));
    }

    /// The shape of the field report: indented Python split across Discord messages lost one
    /// space at the start of every part after the first.
    #[test]
    fn indentation_at_the_start_of_a_part_is_kept() {
        let mut answer = String::from("Here is the script:\n\n```python\ndef main():\n");
        for i in 0..300 {
            answer.push_str(&format!("    code_line = {i} * 2\n        nested_line = code_line + 1\n"));
        }
        answer.push_str("```\nDone.");
        let original: Vec<&str> = answer.lines().collect();
        let parts = chunks(&answer, MarkdownDialect::Markdown, 2000, LengthUnit::Chars);
        assert!(parts.len() >= 6, "{}", parts.len());
        let mut received = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let body = part.strip_suffix(&format!("({}/{})", i + 1, parts.len())).unwrap().trim_end();
            let mut lines: Vec<&str> = body.lines().collect();
            if i > 0 {
                assert_eq!(lines.remove(0), "```python", "part {i} reopens the fence");
            }
            if i + 1 < parts.len() {
                assert_eq!(lines.pop(), Some("```"), "part {i} closes the fence");
            }
            received.extend(lines);
        }
        assert_eq!(received, original, "every line arrives byte-identical and in order");
    }

    #[test]
    fn utf16_units_are_counted_for_telegram() {
        let text = "😀".repeat(3000); // 6000 UTF-16 units, 3000 chars
        let parts = chunks(&text, MarkdownDialect::TelegramHtml, 4096, LengthUnit::Utf16);
        assert_eq!(parts.len(), 2);
        for c in &parts {
            assert!(c.encode_utf16().count() <= 4096);
        }
    }

    #[test]
    fn inline_code_is_not_split() {
        let text = format!("{} `some inline code here` {}", "a".repeat(30), "b".repeat(40));
        for c in chunks(&text, MarkdownDialect::Markdown, 50, LengthUnit::Chars) {
            assert_eq!(c.matches('`').count() % 2, 0, "split inline code: {c:?}");
        }
    }

    #[test]
    fn telegram_parts_close_and_reopen_their_tags() {
        let text = format!("**{}**", "bold words here ".repeat(40).trim_end());
        let parts = chunks(&text, MarkdownDialect::TelegramHtml, 200, LengthUnit::Utf16);
        assert!(parts.len() > 2);
        for c in &parts {
            assert!(c.starts_with("<b>") && c.contains("</b>"), "{c}");
        }
    }

    #[test]
    fn a_grapheme_longer_than_a_part_is_cut_between_characters() {
        let zalgo = format!("Z{}", "\u{0301}".repeat(100));
        let parts = chunks(&zalgo, MarkdownDialect::Plain, 40, LengthUnit::Chars);
        assert!(parts.len() >= 3);
        assert!(parts.iter().all(|p| p.chars().count() <= 40));
    }

    #[test]
    fn streaming_parts_resume_from_a_visible_offset() {
        let doc = document("first line of text\nsecond line of text\nthird line", MarkdownDialect::Plain);
        let parts = split_parts(&doc, 19, 100, LengthUnit::Chars);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].text, "second line of text\nthird line");
        assert_eq!(parts[0].visible, 19..doc.visible_text().len());
    }
}
