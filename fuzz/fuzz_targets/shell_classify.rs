//! Any input, classified as a command line, must not panic, and disguising it must never make
//! it look less dangerous (the metamorphic oracle): `sh -c '<cmd>'`, `eval '<cmd>'`, and for a
//! command starting with a plain command word `env <cmd>` and `command <cmd>`, are at least as
//! severe as `<cmd>`, with at least its keys; so is `<cmd>` with `''` spliced into one of its
//! plain unquoted words (`rm` → `r''m`).
//!
//! Input: byte 0 picks the word and the position of the `''` splice, the rest is the command
//! (UTF-8, lossily).

#![no_main]

use hermes_guard::{ClassifyContext, Verdict, classify};
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

static CONTEXT: LazyLock<ClassifyContext> =
    LazyLock::new(|| ClassifyContext::new("/home/u/project", "/home/u").with_writable_dir("/tmp/hermes-private"));

/// Words whose meaning a prefix or a splice would change (`if` → `env if`), so the oracle does
/// not apply to them.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for", "in", "function", "select", "time",
    "coproc", "{", "}", "!", "[[", "]]",
];

fuzz_target!(|data: &[u8]| {
    let [selector, rest @ ..] = data else { return };
    let command = String::from_utf8_lossy(rest);
    let verdict = classify(&command, &CONTEXT);
    let quoted = format!("'{}'", command.replace('\'', r"'\''"));
    let mut disguises = vec![format!("sh -c {quoted}"), format!("eval {quoted}")];
    if starts_with_plain_command_word(&command) {
        disguises.push(format!("env {command}"));
        disguises.push(format!("command {command}"));
    }
    disguises.extend(splice_empty_quotes(&command, *selector));
    for disguise in disguises {
        let disguised = classify(&disguise, &CONTEXT);
        check_not_lower(&command, &verdict, &disguise, &disguised);
    }
});

fn check_not_lower(command: &str, verdict: &Verdict, disguise: &str, disguised: &Verdict) {
    assert!(
        disguised.severity() >= verdict.severity(),
        "{disguise:?} is {disguised:?}\nbut {command:?} is {verdict:?}"
    );
    if let (Verdict::Flagged(_), Verdict::Flagged(_)) = (verdict, disguised) {
        let keys = disguised.keys();
        let missing: Vec<&str> = verdict.keys().into_iter().filter(|key| !keys.contains(key)).collect();
        assert!(missing.is_empty(), "{disguise:?} lost {missing:?}: {disguised:?}\n{command:?} is {verdict:?}");
    }
}

fn is_plain(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "_./,:+@%-".contains(c))
}

fn starts_with_plain_command_word(command: &str) -> bool {
    let end = command.find(|c: char| !(c.is_ascii_alphanumeric() || "_./,:+@%-".contains(c))).unwrap_or(command.len());
    let (word, after) = command.split_at(end);
    is_plain(word) && !word.starts_with('-') && !RESERVED.contains(&word) && (after.is_empty() || after.starts_with([' ', '\t']))
}

/// `command` with `''` spliced inside one plain unquoted word, chosen by `selector`.
fn splice_empty_quotes(command: &str, selector: u8) -> Option<String> {
    // The tokenizer loops forever on these (hermes-guard refuses them before parsing).
    if command.contains("<<") && command.contains(['\r', '\u{c}']) {
        return None;
    }
    let tokens = brush_parser::tokenize_str(command).ok()?;
    let mut candidates = Vec::new();
    let mut previous = "";
    for token in &tokens {
        let text = token.to_str();
        if let brush_parser::Token::Word(word, location) = token {
            // Not a heredoc delimiter, a loop or function name, or a function being defined.
            let start = byte_offset(command, location.start.index)?;
            let end = start + word.len();
            let followed_by_paren = command.get(end..).is_some_and(|after| after.trim_start().starts_with('('));
            let names_something = matches!(previous, "<<" | "<<-" | "for" | "select" | "function");
            if word.len() > 1 && is_plain(word) && !RESERVED.contains(&word.as_str()) && !followed_by_paren && !names_something && command.get(start..end) == Some(word) {
                candidates.push((start, word.len()));
            }
        }
        previous = text;
    }
    let (start, len) = *candidates.get(usize::from(selector) % candidates.len().max(1))?;
    let at = start + 1 + usize::from(selector) / 16 % (len - 1);
    Some(format!("{}''{}", &command[..at], &command[at..]))
}

fn byte_offset(text: &str, char_index: usize) -> Option<usize> {
    text.char_indices().map(|(at, _)| at).chain(std::iter::once(text.len())).nth(char_index)
}
