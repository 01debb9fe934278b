//! A shell word to the fields bash would pass to the command, as far as they are known before
//! it runs.
//!
//! Quotes and escapes go (`r''m`, `r\m`, `"r"m` and `$'\x72m'` are all `rm`); an unquoted
//! `$IFS` splits the word (`rm${IFS}-rf${IFS}/` is three fields); `~`, `$HOME`, `$PWD` and the
//! variables the command set itself take their values; brace expansion multiplies the word
//! (`{rm,-rf,/}`). What only the running shell knows (other variables, substitutions) marks the
//! field as dynamic, and every command or process substitution met on the way is classified as
//! code of its own.

use super::judge::Judge;
use super::paths::has_glob;
use super::scope::Value;
use super::syntax;
use crate::keys;
use brush_parser::word::{
    self, BraceExpressionMember, BraceExpressionOrText, Parameter, ParameterExpr, TildeExpr, WordPiece, WordPieceWithSource,
};

/// Brace expansion beyond this many words is not followed: the fields become dynamic.
const MAX_BRACE_WORDS: usize = 128;

/// Words with more unquoted `{` than this are not brace-expanded (their fields become dynamic):
/// parsing them costs time exponential in the count.
const MAX_BRACE_OPENS: usize = 8;

/// One argument as the command will receive it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Field {
    /// The value; parts only known at run time keep their source spelling (`$x`, `$(cmd)`).
    pub(crate) text: String,
    /// Some part is only known when the command runs.
    pub(crate) dynamic: bool,
    /// Has an unquoted `*`, `?` or `[`, so bash replaces it with the names that match.
    pub(crate) glob: bool,
    /// Built by a backquoted substitution.
    pub(crate) backtick: bool,
    /// The commands run by the substitutions inside it (`kill $(pgrep x)` has `pgrep`).
    pub(crate) substituted: Vec<String>,
    /// A process substitution (`<(cmd)`): a pipe the command reads or writes by name.
    pub(crate) process: bool,
}

impl Field {
    pub(crate) fn literal(text: impl Into<String>) -> Self {
        Field { text: text.into(), ..Field::default() }
    }

    pub(crate) fn unknown(text: impl Into<String>) -> Self {
        Field { text: text.into(), dynamic: true, ..Field::default() }
    }

    /// Static text, when nothing in it waits for run time.
    pub(crate) fn known(&self) -> Option<&str> {
        (!self.dynamic).then_some(self.text.as_str())
    }
}

/// Fields being assembled from the pieces of one word.
#[derive(Default)]
struct Fields {
    done: Vec<Field>,
    current: Field,
    /// The current field exists even if empty (`''` is an argument).
    started: bool,
}

impl Fields {
    fn push(&mut self, text: &str) {
        self.current.text.push_str(text);
        self.started = true;
    }

    fn push_unknown(&mut self, source: &str) {
        self.push(source);
        self.current.dynamic = true;
    }

    /// A field boundary (unquoted `$IFS`).
    fn split(&mut self) {
        if self.started || !self.current.text.is_empty() {
            self.done.push(std::mem::take(&mut self.current));
        }
        self.started = false;
    }

    fn finish(mut self) -> Vec<Field> {
        self.split();
        self.done
    }
}

/// How a word is expanded: command arguments are brace-expanded and split on `$IFS`;
/// assignment values, redirection targets and here-strings are not.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Splitting {
    Fields,
    Single,
}

impl Judge<'_> {
    /// The fields a command argument word becomes.
    pub(crate) fn fields(&mut self, raw: &str) -> Vec<Field> {
        match brace_alternatives(raw) {
            Some(alternatives) => alternatives.iter().flat_map(|alternative| self.expand(alternative, Splitting::Fields)).collect(),
            None => {
                let mut fields = self.expand(raw, Splitting::Fields);
                fields.iter_mut().for_each(|field| field.dynamic = true);
                fields
            }
        }
    }

    /// A word that stays one field (assignment value, redirection target, here-string).
    pub(crate) fn single(&mut self, raw: &str) -> Field {
        let mut fields = self.expand(raw, Splitting::Single).into_iter();
        let mut field = fields.next().unwrap_or_default();
        for more in fields {
            field.text.push(' ');
            field.text.push_str(&more.text);
            field.dynamic |= more.dynamic;
        }
        field
    }

    /// The text of an unquoted here-document after expansion (quotes are literal there).
    pub(crate) fn heredoc(&mut self, raw: &str) -> Field {
        if self.overflows(raw) {
            return Field::unknown(raw);
        }
        match word::parse_heredoc(raw, &syntax::options()) {
            Ok(pieces) => {
                let mut fields = Fields::default();
                self.pieces(&pieces, raw, true, Splitting::Single, &mut fields);
                fields.finish().into_iter().next().unwrap_or_default()
            }
            Err(error) => {
                self.flag(keys::UNPARSEABLE, format!("here-document: {error}"));
                Field::unknown(raw)
            }
        }
    }

    /// Classifies the substitutions inside text that is otherwise not a word of its own
    /// (arithmetic, the operands of `${x:-…}`), which bash still runs.
    pub(crate) fn substitutions_in(&mut self, text: &str) {
        if !text.contains(['$', '`']) || self.overflows(text) {
            return;
        }
        match word::parse_heredoc(text, &syntax::options()) {
            Ok(pieces) => {
                let mut fields = Fields::default();
                self.pieces(&pieces, text, true, Splitting::Single, &mut fields);
            }
            Err(error) => self.flag(keys::UNPARSEABLE, format!("{text}: {error}")),
        }
    }

    /// Text the word parser would panic on (see [`syntax::has_overflowing_tilde`]): flagged as
    /// unparseable instead of parsed.
    fn overflows(&mut self, text: &str) -> bool {
        let overflows = syntax::has_overflowing_tilde(text);
        if overflows {
            self.flag(keys::UNPARSEABLE, "a directory-stack number too long to judge");
        }
        overflows
    }

    fn expand(&mut self, raw: &str, splitting: Splitting) -> Vec<Field> {
        if self.overflows(raw) {
            return vec![Field::unknown(raw)];
        }
        match word::parse(raw, &syntax::options()) {
            Ok(pieces) => {
                let mut fields = Fields::default();
                self.pieces(&pieces, raw, false, splitting, &mut fields);
                fields.finish()
            }
            Err(error) => {
                self.flag(keys::UNPARSEABLE, format!("{raw}: {error}"));
                vec![Field::unknown(raw)]
            }
        }
    }

    fn pieces(&mut self, pieces: &[WordPieceWithSource], source: &str, quoted: bool, splitting: Splitting, fields: &mut Fields) {
        for piece in pieces {
            let spelling = source.get(piece.start_index..piece.end_index).unwrap_or("");
            match &piece.piece {
                WordPiece::Text(text) => {
                    fields.current.glob |= !quoted && has_glob(text);
                    fields.push(text);
                }
                WordPiece::SingleQuotedText(text) => fields.push(text),
                WordPiece::AnsiCQuotedText(text) => fields.push(&decode_ansi_c(text)),
                WordPiece::DoubleQuotedSequence(inner) | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    fields.started = true;
                    self.pieces(inner, source, true, splitting, fields);
                }
                WordPiece::TildeExpansion(tilde) => self.tilde(tilde, spelling, fields),
                WordPiece::ParameterExpansion(expression) => self.parameter(expression, spelling, quoted, splitting, fields),
                WordPiece::CommandSubstitution(code) => {
                    let names = self.code_in_subshell(code);
                    fields.current.substituted.extend(names);
                    fields.push_unknown(spelling);
                }
                WordPiece::BackquotedCommandSubstitution(code) => {
                    let names = self.code_in_subshell(&unescape_backquoted(code));
                    fields.current.substituted.extend(names);
                    fields.current.backtick = true;
                    fields.push_unknown(spelling);
                }
                WordPiece::EscapeSequence(escaped) => {
                    let literal: String = escaped.chars().skip(1).collect();
                    if literal != "\n" {
                        fields.push(&literal);
                    }
                }
                WordPiece::ArithmeticExpression(expression) => {
                    self.substitutions_in(&expression.value);
                    fields.push_unknown(spelling);
                }
            }
        }
    }

    fn tilde(&mut self, tilde: &TildeExpr, spelling: &str, fields: &mut Fields) {
        let known = match tilde {
            TildeExpr::Home => Some(self.context.home().to_string_lossy().into_owned()),
            TildeExpr::WorkingDir => self.scope.cwd.as_ref().map(|cwd| cwd.to_string_lossy().into_owned()),
            _ => None,
        };
        match known {
            Some(path) => fields.push(&path),
            None => fields.push_unknown(spelling),
        }
    }

    fn parameter(&mut self, expression: &ParameterExpr, spelling: &str, quoted: bool, splitting: Splitting, fields: &mut Fields) {
        let splits = !quoted && splitting == Splitting::Fields;
        if parameter_name(spelling) == Some("IFS") {
            // IFS is whitespace unless the command changed it, and then it is judged unknown.
            match self.scope.assigned("IFS") {
                None if splits => fields.split(),
                None => fields.push(" "),
                Some(_) => fields.push_unknown(spelling),
            }
            return;
        }
        let value = match expression {
            ParameterExpr::Parameter { parameter: Parameter::Named(name), indirect: false } => self.variable(name),
            _ => {
                // Operands such as `${x:-$(cmd)}` run code of their own.
                let inner = spelling.strip_prefix("${").and_then(|rest| rest.strip_suffix('}')).unwrap_or("");
                self.substitutions_in(inner);
                Value::Unknown
            }
        };
        match value {
            Value::Known(text) if splits => {
                fields.current.glob |= has_glob(&text);
                let mut words = text.split([' ', '\t', '\n']).peekable();
                while let Some(word) = words.next() {
                    fields.push(word);
                    if words.peek().is_some() {
                        fields.split();
                    }
                }
            }
            Value::Known(text) => fields.push(&text),
            Value::Unknown => fields.push_unknown(spelling),
        }
    }

    fn variable(&self, name: &str) -> Value {
        if let Some(value) = self.scope.assigned(name) {
            return value;
        }
        match name {
            "HOME" => Value::Known(self.context.home().to_string_lossy().into_owned()),
            "HERMES_HOME" => Value::Known(self.context.hermes_home().to_string_lossy().into_owned()),
            "PWD" => self.scope.cwd.as_ref().map_or(Value::Unknown, |cwd| Value::Known(cwd.to_string_lossy().into_owned())),
            _ => Value::Unknown,
        }
    }
}

/// The name in `$NAME`, `${NAME}`, `${NAME:-…}`, `${#NAME}` or `${!NAME}`.
fn parameter_name(spelling: &str) -> Option<&str> {
    let rest = spelling.strip_prefix('$')?;
    let rest = rest.strip_prefix('{').map_or(rest, |inner| inner.trim_start_matches(['#', '!']));
    let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Inside backquotes, `\$`, `` \` `` and `\\` stand for the character itself.
fn unescape_backquoted(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some('$' | '`' | '\\')) {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

/// The words brace expansion makes of `raw`; `None` when there would be too many to follow.
fn brace_alternatives(raw: &str) -> Option<Vec<String>> {
    let braces = unquoted_braces(raw);
    if braces.opens == 0 || !braces.separator {
        // Nothing to expand: bash needs a `,` or `..` inside unquoted braces.
        return Some(vec![raw.to_owned()]);
    }
    if braces.opens > MAX_BRACE_OPENS || syntax::has_overflowing_number(raw) {
        // brush-parser's brace grammar backtracks exponentially in the number of `{`, and
        // panics on sequence bounds beyond `i64`.
        return None;
    }
    match word::parse_brace_expansions(raw, &syntax::options()) {
        Ok(Some(parts)) => expand_braces(&parts),
        _ => Some(vec![raw.to_owned()]),
    }
}

/// What brace expansion could see in a word: its unquoted `{` (not `${`) and whether an
/// unquoted `,` or `..` could separate alternatives.
struct BraceStats {
    opens: usize,
    separator: bool,
}

fn unquoted_braces(raw: &str) -> BraceStats {
    let mut stats = BraceStats { opens: 0, separator: false };
    let (mut single, mut double, mut escaped, mut previous) = (false, false, false, ' ');
    for c in raw.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '{' if !single && !double && previous != '$' => stats.opens += 1,
            ',' if !single && !double => stats.separator = true,
            '.' if !single && !double && previous == '.' => stats.separator = true,
            _ => {}
        }
        previous = c;
    }
    stats
}

fn expand_braces(parts: &[BraceExpressionOrText]) -> Option<Vec<String>> {
    let mut words = vec![String::new()];
    for part in parts {
        let choices = match part {
            BraceExpressionOrText::Text(text) => vec![text.clone()],
            BraceExpressionOrText::Expr(members) => {
                let mut choices = Vec::new();
                for member in members {
                    choices.extend(brace_member(member)?);
                    if choices.len() > MAX_BRACE_WORDS {
                        return None;
                    }
                }
                choices
            }
        };
        if words.len() * choices.len() > MAX_BRACE_WORDS {
            return None;
        }
        words = words.iter().flat_map(|word| choices.iter().map(move |choice| format!("{word}{choice}"))).collect();
    }
    Some(words)
}

fn brace_member(member: &BraceExpressionMember) -> Option<Vec<String>> {
    match member {
        BraceExpressionMember::Child(parts) => expand_braces(parts),
        BraceExpressionMember::NumberSequence { start, end, increment } => {
            let step = increment.unsigned_abs().max(1);
            if start.abs_diff(*end) / step >= MAX_BRACE_WORDS as u64 {
                return None;
            }
            let count = start.abs_diff(*end) / step + 1;
            let sign: i128 = if end >= start { 1 } else { -1 };
            Some((0..count).map(|i| (i128::from(*start) + sign * i128::from(i) * i128::from(step)).to_string()).collect())
        }
        BraceExpressionMember::CharSequence { start, end, increment } => {
            let (low, high) = if start <= end { (*start, *end) } else { (*end, *start) };
            let step = usize::try_from(increment.unsigned_abs().max(1)).unwrap_or(usize::MAX);
            let chars: Vec<String> = (low..=high).step_by(step).map(String::from).take(MAX_BRACE_WORDS + 1).collect();
            (chars.len() <= MAX_BRACE_WORDS).then_some(chars)
        }
    }
}

/// The text of `$'…'` with its backslash escapes decoded, as bash does.
pub(crate) fn decode_ansi_c(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(kind) = chars.next() else {
            out.push('\\');
            break;
        };
        let simple = match kind {
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'e' | 'E' => Some('\u{1b}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\u{b}'),
            '\\' | '\'' | '"' | '?' => Some(kind),
            _ => None,
        };
        if let Some(simple) = simple {
            out.push(simple);
            continue;
        }
        let (radix, max_digits, first) = match kind {
            '0'..='7' => (8, 3, Some(kind)),
            'x' => (16, 2, None),
            'u' => (16, 4, None),
            'U' => (16, 8, None),
            'c' => {
                // Control character: `\cA` is 0x01.
                if let Some(letter) = chars.next() {
                    out.extend(char::from_u32(u32::from(letter) & 0x1f));
                }
                continue;
            }
            _ => {
                out.push('\\');
                out.push(kind);
                continue;
            }
        };
        let mut digits: String = first.into_iter().collect();
        while digits.len() < max_digits && chars.peek().is_some_and(|d| d.is_digit(radix)) {
            digits.extend(chars.next());
        }
        match u32::from_str_radix(&digits, radix).ok().and_then(char::from_u32) {
            Some(decoded) => out.push(decoded),
            None => {
                out.push('\\');
                out.push(kind);
                out.push_str(&digits);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c_quotes_decode_like_bash() {
        assert_eq!(decode_ansi_c(r"\x72\x6d"), "rm");
        assert_eq!(decode_ansi_c(r"\162\155"), "rm");
        assert_eq!(decode_ansi_c(r"\u0072m\t"), "rm\t");
        assert_eq!(decode_ansi_c(r"a\'b\\"), "a'b\\");
        assert_eq!(decode_ansi_c(r"\cA"), "\u{1}");
    }

    #[test]
    fn braces_multiply_words() {
        assert_eq!(brace_alternatives("{rm,-rf,/}"), Some(vec!["rm".to_owned(), "-rf".to_owned(), "/".to_owned()]));
        assert_eq!(brace_alternatives("a{1..3}"), Some(vec!["a1".to_owned(), "a2".to_owned(), "a3".to_owned()]));
        assert_eq!(brace_alternatives("{1..100000}"), None);
        assert_eq!(brace_alternatives("ca{{{{{{{{{{{{{{{{{{{{rgo"), Some(vec!["ca{{{{{{{{{{{{{{{{{{{{rgo".to_owned()]));
        assert_eq!(brace_alternatives("{{{{{{{{{{{{{{{{{{{{a,b"), None);
        assert_eq!(brace_alternatives("'{a,b}'"), Some(vec!["'{a,b}'".to_owned()]));
    }

    #[test]
    fn parameter_names_are_read_from_any_spelling() {
        assert_eq!(parameter_name("$IFS"), Some("IFS"));
        assert_eq!(parameter_name("${IFS:0:1}"), Some("IFS"));
        assert_eq!(parameter_name("${#HOME}"), Some("HOME"));
        assert_eq!(parameter_name("$1"), Some("1"));
    }
}
