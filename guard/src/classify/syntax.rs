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
    // A panic in third-party parsing code must neither take the agent down nor let the
    // command through: it becomes a parse failure, which is flagged.
    let parsed = catch_unwind(AssertUnwindSafe(|| brush_parser::Parser::new(std::io::Cursor::new(text), &options()).parse_program()));
    match parsed {
        Ok(Ok(program)) => Ok(program),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("the parser failed on this input".to_owned()),
    }
}
