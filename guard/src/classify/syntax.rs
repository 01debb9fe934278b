//! Parsing a command line into bash's syntax tree with `brush-parser`.
//!
//! Why brush-parser (evaluated in 2026 on Rust 1.95):
//! - `brush-parser` 0.4 (MIT): the parser of the brush shell, which runs bash's own test
//!   suites; actively released; a typed AST for the whole bash grammar (compound commands,
//!   functions, here-documents, process substitution, `[[ ]]`, arithmetic, extglob) plus a word
//!   parser that splits a word into quoted, escaped, parameter, tilde, arithmetic and
//!   command-substitution pieces, which is exactly what de-obfuscation needs. Builds on 1.88+.
//! - `yash-syntax` (POSIX sh only, GPL-3.0, which hermes' MIT licence cannot take; its current
//!   release needs Rust 1.96) and `conch-parser` (last release 2019, unmaintained, no bash
//!   extensions) were rejected.
//! - `tree-sitter-bash` is maintained and error-tolerant, but it is a C parser for editors: it
//!   returns a concrete tree with `ERROR` nodes for anything it does not understand (so
//!   "parsed" does not mean "bash would run this"), node kinds are strings, and words are not
//!   split into quoting pieces.

use brush_parser::ast::Program;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Bash's grammar with its defaults (extglob on, tilde expansion at word starts).
pub(crate) fn options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions::default()
}

/// The program, or why it could not be parsed.
pub(crate) fn parse(text: &str) -> Result<Program, String> {
    if hangs_tokenizer(text) {
        return Err("a here-document delimiter with a carriage return or form feed".to_owned());
    }
    // A panic in third-party parsing code must neither take the agent down nor let the
    // command through: it becomes a parse failure, which is flagged.
    let parsed = catch_unwind(AssertUnwindSafe(|| brush_parser::Parser::new(std::io::Cursor::new(text), &options()).parse_program()));
    match parsed {
        Ok(Ok(program)) => Ok(program),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("the parser failed on this input".to_owned()),
    }
}

/// Whether brush-parser's tokenizer would loop forever (allocating until memory runs out) on
/// `text`: a here-document operator whose delimiter starts with `\r` or a form feed, followed by a
/// blank. Refused broadly (any `<<` with either character), since nothing an agent writes on
/// purpose looks like that.
pub(crate) fn hangs_tokenizer(text: &str) -> bool {
    text.contains("<<") && text.contains(['\r', '\u{c}'])
}

/// Digits in a row from which brush-parser's number rules overflow and panic (`~+N` parses into
/// a `usize`, brace sequence bounds into an `i64`).
const OVERFLOWING_DIGITS: usize = 19;

/// Whether `text` holds a directory-stack tilde (`~N`, `~+N`, `~-N`) too long for the word
/// parser, which would panic on it instead of answering.
pub(crate) fn has_overflowing_tilde(text: &str) -> bool {
    text.match_indices('~').any(|(at, _)| {
        // Only where a tilde can start an expansion: a quoted `'~1…'` is plain text.
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| !(c.is_whitespace() || ":=-+?{".contains(c))) {
            return false;
        }
        let rest = &text[at + 1..];
        let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
        rest.bytes().take_while(u8::is_ascii_digit).count() >= OVERFLOWING_DIGITS
    })
}

/// Whether `text` holds a run of digits too long for brush-parser's brace sequence bounds.
pub(crate) fn has_overflowing_number(text: &str) -> bool {
    text.as_bytes().split(|byte| !byte.is_ascii_digit()).any(|run| run.len() >= OVERFLOWING_DIGITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn here_documents_the_tokenizer_loops_on_are_recognised() {
        assert!(hangs_tokenizer("x<<-\r\t%.\t\t"));
        assert!(hangs_tokenizer("cat <<\u{c} "));
        assert!(!hangs_tokenizer("cat <<EOF\nhi\nEOF"));
        assert!(parse("x<<\r ").is_err());
    }

    #[test]
    fn numbers_the_word_parser_cannot_hold_are_recognised() {
        assert!(has_overflowing_tilde("~11111111111111111111"));
        assert!(has_overflowing_tilde("a:~+99999999999999999999/x"));
        assert!(!has_overflowing_tilde("~/1234567890123456789012"));
        assert!(!has_overflowing_tilde("'~11111111111111111111'"));
        assert!(has_overflowing_number("{1..99999999999999999999}"));
        assert!(!has_overflowing_number("{1..10}"));
    }
}
