//! The symbols a cut must not split: grapheme clusters (an emoji with its skin tone or ZWJ
//! partners, a flag, a letter with its combining marks, CR LF), and in raw markdown a
//! backslash escape or an entity reference, which a cut would turn into other characters.

use std::ops::Range;
use unicode_segmentation::{GraphemeIndices, UnicodeSegmentation};

/// Byte ranges of the atoms of `text`, in order; they tile it.
pub fn atoms(text: &str, raw_markdown: bool) -> Atoms<'_> {
    Atoms { text, graphemes: text.grapheme_indices(true), raw_markdown, pending: None }
}

pub struct Atoms<'a> {
    text: &'a str,
    graphemes: GraphemeIndices<'a>,
    raw_markdown: bool,
    pending: Option<Range<usize>>,
}

impl Iterator for Atoms<'_> {
    type Item = Range<usize>;

    fn next(&mut self) -> Option<Range<usize>> {
        let mut atom = match self.pending.take() {
            Some(range) => range,
            None => self.graphemes.next().map(|(i, g)| i..i + g.len())?,
        };
        if !self.raw_markdown {
            return Some(atom);
        }
        let rest = &self.text[atom.start..];
        let extent = if let Some(escaped) = rest.strip_prefix('\\') {
            escaped.chars().next().filter(char::is_ascii_punctuation).map(|c| 1 + c.len_utf8())
        } else if rest.starts_with('&') {
            entity_len(rest)
        } else {
            None
        };
        if let Some(len) = extent {
            // Swallow the graphemes the escape or entity covers.
            let end = atom.start + len;
            while atom.end < end {
                match self.graphemes.next() {
                    Some((i, g)) if i + g.len() <= end => atom.end = i + g.len(),
                    Some((i, g)) => {
                        self.pending = Some(i..i + g.len());
                        break;
                    }
                    None => break,
                }
            }
        }
        Some(atom)
    }
}

/// Length of an HTML entity reference (`&amp;`, `&#123;`, `&#x1F600;`) at the start of `text`.
fn entity_len(text: &str) -> Option<usize> {
    let body = text.get(1..)?;
    let end = body.find(';').filter(|&n| (1..=32).contains(&n))?;
    let name = &body[..end];
    let valid = if let Some(hex) = name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
        (1..=6).contains(&hex.len()) && hex.bytes().all(|b| b.is_ascii_hexdigit())
    } else if let Some(dec) = name.strip_prefix('#') {
        (1..=7).contains(&dec.len()) && dec.bytes().all(|b| b.is_ascii_digit())
    } else {
        name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic()) && name.bytes().all(|b| b.is_ascii_alphanumeric())
    };
    valid.then_some(end + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str, raw: bool) -> Vec<&str> {
        atoms(text, raw).map(|r| &text[r]).collect()
    }

    #[test]
    fn graphemes_stay_whole() {
        assert_eq!(split("a👍🏽👨‍👩‍👧🇩🇪é\r\n", false), vec!["a", "👍🏽", "👨‍👩‍👧", "🇩🇪", "é", "\r\n"]);
    }

    #[test]
    fn markdown_escapes_and_entities_are_one_atom() {
        assert_eq!(
            split(r"a\*b&amp;c&#x1F600;&nope d\q", true),
            vec!["a", r"\*", "b", "&amp;", "c", "&#x1F600;", "&", "n", "o", "p", "e", " ", "d", "\\", "q"]
        );
        assert_eq!(split(r"\*&amp;", false), vec!["\\", "*", "&", "a", "m", "p", ";"]);
    }
}
