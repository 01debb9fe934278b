//! The text variants a command is judged in, and the limits checked before parsing.
//!
//! The first variant is the command exactly as bash will read it. The second undoes the
//! disguises the reference policy normalises (behaviour reference §6.1 step 2): ANSI escape
//! sequences, NUL bytes, Unicode compatibility forms (NFKC: fullwidth `ｒｍ`), and
//! backslash-newline continuations. Judging both and keeping the worse answer matters because
//! a normalisation is not always what bash does: stripping `ESC[;r` from `echo ESC[;reboot`
//! would hide the `;` that makes bash run `reboot`, so the de-obfuscated copy alone could look
//! safer than the real command.

use unicode_normalization::UnicodeNormalization;

/// Longer commands are refused outright (fail closed): nothing legitimate is this long, and
/// every step after this one is at least linear in the length.
pub(crate) const MAX_COMMAND_BYTES: usize = 100_000;

/// The command as bash reads it, then (when different) its de-obfuscated copy.
pub(crate) fn variants(command: &str) -> Vec<String> {
    let normalized = join_continuations(&command.replace('\0', "").chars().filter_map(ansi_stripper()).nfkc().collect::<String>());
    if normalized == command { vec![command.to_owned()] } else { vec![command.to_owned(), normalized] }
}

/// How deeply the text nests (brackets, backticks and compound-command keywords), overestimated
/// rather than under: the parser and the walk recurse once per level, and a thread's stack is
/// small (2 MiB for tokio workers).
pub(crate) fn nesting_depth(text: &str) -> usize {
    let mut depth: usize = 0;
    let mut deepest = 0;
    let mut in_backtick = false;
    let mut word = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphabetic() {
            word.push(c);
            continue;
        }
        match word.as_str() {
            "if" | "case" | "while" | "until" | "for" | "select" | "function" => depth += 1,
            "fi" | "esac" | "done" => depth = depth.saturating_sub(1),
            _ => {}
        }
        word.clear();
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            '`' => {
                in_backtick = !in_backtick;
                if in_backtick {
                    depth += 1;
                } else {
                    depth = depth.saturating_sub(1);
                }
            }
            _ => {}
        }
        deepest = deepest.max(depth);
    }
    deepest
}

/// `(` left unclosed that the parser is given: brush-parser's arithmetic-command grammar
/// backtracks over each one, so the time doubles with every unclosed `(` after a `((`.
pub(crate) const MAX_UNCLOSED_PARENS: usize = 12;

/// How many `(` in `text` no `)` closes (quotes are not considered: over-counting only refuses
/// more).
pub(crate) fn unclosed_parens(text: &str) -> usize {
    text.chars().fold(0usize, |open, c| match c {
        '(' => open + 1,
        ')' => open.saturating_sub(1),
        _ => open,
    })
}

/// A stateful filter dropping ANSI escape sequences: CSI (`ESC [` … final byte, or the
/// one-character CSI U+009B), OSC and the other string sequences (`ESC ]` … BEL or `ESC \`), and
/// two-character escapes. Hand-written because the crates that do this (strip-ansi-escapes)
/// also drop tabs and carriage returns, which bash treats as word separators: `rm\t-rf\t/`
/// would become the harmless-looking word `rm-rf/`.
fn ansi_stripper() -> impl FnMut(char) -> Option<char> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Text,
        Escape,
        Csi,
        StringSequence,
        StringEscape,
    }
    let mut state = State::Text;
    move |c| {
        let (next, keep) = match (state, c) {
            (State::Text, '\u{1b}') => (State::Escape, false),
            (State::Text, '\u{9b}') => (State::Csi, false),
            (State::Text, _) => (State::Text, true),
            (State::Escape, '[') => (State::Csi, false),
            (State::Escape, ']' | 'P' | 'X' | '^' | '_') => (State::StringSequence, false),
            (State::Escape, _) => (State::Text, false),
            (State::Csi, '\u{40}'..='\u{7e}') => (State::Text, false),
            (State::Csi, '\u{20}'..='\u{3f}') => (State::Csi, false),
            // Anything else ends a malformed CSI; the character itself is text again.
            (State::Csi, _) => (State::Text, true),
            (State::StringSequence, '\u{7}') => (State::Text, false),
            (State::StringSequence, '\u{1b}') => (State::StringEscape, false),
            (State::StringSequence, _) => (State::StringSequence, false),
            (State::StringEscape, '\\') => (State::Text, false),
            (State::StringEscape, _) => (State::StringSequence, false),
        };
        state = next;
        keep.then_some(c)
    }
}

/// Removes backslash-newline pairs where the backslash is not itself escaped (an odd run of
/// backslashes before the newline), as bash does outside single quotes.
fn join_continuations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut backslashes = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let newline_follows = chars.peek() == Some(&'\n') || (chars.peek() == Some(&'\r') && text_has_lf_after_cr(&chars));
        if c == '\\' && backslashes.is_multiple_of(2) && newline_follows {
            if chars.next() == Some('\r') {
                chars.next();
            }
            backslashes = 0;
            continue;
        }
        backslashes = if c == '\\' { backslashes + 1 } else { 0 };
        out.push(c);
    }
    out
}

fn text_has_lf_after_cr(chars: &std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    let mut ahead = chars.clone();
    ahead.next() == Some('\r') && ahead.next() == Some('\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deobfuscated_variant_undoes_each_disguise() {
        assert_eq!(variants("rm\u{1b}[0m -rf /")[1], "rm -rf /");
        assert_eq!(variants("r\0m -rf /")[1], "rm -rf /");
        assert_eq!(variants("ｒｍ -rf /")[1], "rm -rf /");
        assert_eq!(variants("rm -rf \\\n/")[1], "rm -rf /");
        assert_eq!(variants("echo \u{1b}]0;title\u{7}hi")[1], "echo hi");
        // An escaped backslash before the newline is a backslash, not a continuation.
        assert_eq!(variants("echo a\\\\\nrm x").len(), 1);
        assert_eq!(variants("ls -la"), vec!["ls -la".to_owned()]);
    }

    #[test]
    fn unclosed_parentheses_are_counted() {
        assert_eq!(unclosed_parens("echo $((1 + (2)))"), 0);
        assert_eq!(unclosed_parens("( ( (x"), 3);
        assert_eq!(unclosed_parens("a((b)((c"), 3);
    }

    #[test]
    fn tabs_survive_ansi_stripping() {
        assert_eq!(variants("rm\t-rf\t/\u{1b}[0m")[1], "rm\t-rf\t/");
    }

    #[test]
    fn nesting_counts_brackets_backticks_and_keywords() {
        assert_eq!(nesting_depth("ls -la"), 0);
        assert_eq!(nesting_depth("echo $(ls $(pwd))"), 2);
        assert_eq!(nesting_depth("if true; then if x; then :; fi; fi"), 2);
        assert_eq!(nesting_depth("echo `pwd`"), 1);
    }
}
