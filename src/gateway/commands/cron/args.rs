//! Reading `/cron add` and `/cron edit` arguments as people type them on a phone: the schedule
//! first (quoted, or recognised by its shape: `every 1m`, five cron fields, a timestamp, a
//! delay), then the prompt, with `--name N`, `--deliver T`, `--repeat N`, `--skill S`
//! (`--add-skill`, `--remove-skill`, `--clear-skills`, `--schedule`, `--prompt`, `--model`
//! for edits) anywhere. A quoted value keeps its spaces; a lone apostrophe is just text.

use crate::cron::schedule::{self, ScheduleError, Zone};
use chrono::Utc;

/// What is wrong with `/cron add` or `/cron edit` arguments, as the user is told.
#[derive(Debug, thiserror::Error)]
pub(super) enum ArgsError {
    #[error("`{flag}` needs a value")]
    MissingValue { flag: String },
    #[error("unknown option `{given}`; the options are {known}", known = VALUE_FLAGS.join(", "))]
    UnknownOption { given: String },
    #[error("give a schedule and a prompt, e.g. `/cron add every 1h check the build`. Schedules: {forms}", forms = schedule::ACCEPTED_FORMS)]
    NoSchedule,
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("cannot read a schedule from `{guess}`")]
    Unreadable { guess: String },
}

/// A word of the arguments, and where it sits in them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    text: String,
    start: usize,
    end: usize,
    quoted: bool,
    /// Its place among all tokens, flags included.
    index: usize,
}

/// Split on whitespace; `"…"` or `'…'` (closed) is one token without its quotes.
fn tokenize(input: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut rest = input.char_indices().peekable();
    while let Some((start, c)) = rest.next() {
        if c.is_whitespace() {
            continue;
        }
        if (c == '"' || c == '\'')
            && let Some(close) = input[start + 1..].find(c)
        {
            let end = start + 1 + close + 1;
            tokens.push(Token { text: input[start + 1..end - 1].to_string(), start, end, quoted: true, index: tokens.len() });
            while rest.peek().is_some_and(|(i, _)| *i < end) {
                rest.next();
            }
            continue;
        }
        let end = input[start..].find(char::is_whitespace).map(|i| start + i).unwrap_or(input.len());
        tokens.push(Token { text: input[start..end].to_string(), start, end, quoted: false, index: tokens.len() });
        while rest.peek().is_some_and(|(i, _)| *i < end) {
            rest.next();
        }
    }
    tokens
}

/// Flags that take a value, and those that do not.
const VALUE_FLAGS: &[&str] =
    &["--name", "--deliver", "--repeat", "--skill", "--add-skill", "--remove-skill", "--schedule", "--prompt", "--model"];
const BARE_FLAGS: &[&str] = &["--clear-skills", "--all"];

/// The arguments, sorted into flags and the free text between them.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Parsed {
    pub(super) flags: Vec<(String, String)>,
    pub(super) switches: Vec<String>,
    /// The free text's tokens.
    words: Vec<Token>,
    input: String,
}

impl Parsed {
    pub(super) fn values(&self, flag: &str) -> Vec<String> {
        self.flags.iter().filter(|(f, _)| f == flag).map(|(_, v)| v.clone()).collect()
    }

    pub(super) fn value(&self, flag: &str) -> Option<String> {
        self.values(flag).pop()
    }

    pub(super) fn has(&self, switch: &str) -> bool {
        self.switches.iter().any(|s| s == switch)
    }

    /// The free text from word `from` on, as typed (spacing and quotes kept within each run of
    /// words; runs separated by flags are joined by a space). A lone quoted word loses its quotes.
    pub(super) fn text_from(&self, from: usize) -> String {
        let words = &self.words[from.min(self.words.len())..];
        if let [only] = words
            && only.quoted
        {
            return only.text.clone();
        }
        let mut runs: Vec<&str> = Vec::new();
        let mut run_start: Option<&Token> = None;
        for (i, word) in words.iter().enumerate() {
            let start = *run_start.get_or_insert(word);
            let run_ends = words.get(i + 1).is_none_or(|next| next.index != word.index + 1);
            if run_ends {
                runs.push(&self.input[start.start..word.end]);
                run_start = None;
            }
        }
        runs.join(" ")
    }

    pub(super) fn word_count(&self) -> usize {
        self.words.len()
    }

    /// Words `from..to` joined by a space.
    fn joined(&self, from: usize, to: usize) -> String {
        self.words[from..to.min(self.words.len())].iter().map(|t| t.text.as_str()).collect::<Vec<_>>().join(" ")
    }
}

/// Sort `input` into flags and free text; a flag missing its value is an error naming it.
pub(super) fn parse(input: &str) -> Result<Parsed, ArgsError> {
    let tokens = tokenize(input);
    let mut parsed = Parsed { input: input.to_string(), ..Parsed::default() };
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        let lower = token.text.to_ascii_lowercase();
        if !token.quoted && VALUE_FLAGS.contains(&lower.as_str()) {
            let value = tokens.get(i + 1).ok_or_else(|| ArgsError::MissingValue { flag: lower.clone() })?;
            parsed.flags.push((lower, value.text.clone()));
            i += 2;
            continue;
        }
        if !token.quoted && BARE_FLAGS.contains(&lower.as_str()) {
            parsed.switches.push(lower);
        } else if !token.quoted && lower.starts_with("--") {
            return Err(ArgsError::UnknownOption { given: token.text.clone() });
        } else {
            parsed.words.push(token.clone());
        }
        i += 1;
    }
    Ok(parsed)
}

/// The schedule at the start of the free text, and how many words it took: a quoted word, or
/// the longest shape the schedule grammar accepts (`every 30 m`, five cron fields, six, a date
/// and a time, a delay).
pub(super) fn leading_schedule(parsed: &Parsed, zone: Zone) -> Result<(String, usize), ArgsError> {
    let Some(first) = parsed.words.first() else {
        return Err(ArgsError::NoSchedule);
    };
    if first.quoted {
        return Ok((first.text.clone(), 1));
    }
    let now = Utc::now();
    let candidates: &[usize] = if first.text.eq_ignore_ascii_case("every") { &[3, 2] } else { &[5, 6, 2, 1] };
    for &n in candidates {
        if n > parsed.word_count() {
            continue;
        }
        let text = parsed.joined(0, n);
        if schedule::parse(&text, now, zone).is_ok() {
            return Ok((text, n));
        }
    }
    // Report the error of the most likely reading.
    let guess = if first.text.eq_ignore_ascii_case("every") { parsed.joined(0, 2) } else { first.text.clone() };
    match schedule::parse(&guess, now, zone) {
        Err(e) => Err(e.into()),
        // Not expected (the guess is one of the candidates tried), but the user still gets an answer.
        Ok(_) => Err(ArgsError::Unreadable { guess }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(input: &str) -> (String, String, Parsed) {
        let parsed = parse(input).unwrap();
        let (schedule, used) = leading_schedule(&parsed, Zone::Local).unwrap();
        let prompt = parsed.text_from(used);
        (schedule, prompt, parsed)
    }

    #[test]
    fn schedules_are_recognised_by_shape_or_quotes() {
        let cases = [
            ("every 1m say hi --name ping", "every 1m", "say hi"),
            ("every 2 hours   check  the build", "every 2 hours", "check  the build"),
            ("0 9 * * mon-fri summarize my GitHub notifications", "0 9 * * mon-fri", "summarize my GitHub notifications"),
            ("\"0 9 * * *\" morning digest", "0 9 * * *", "morning digest"),
            ("30m remind me to stretch", "30m", "remind me to stretch"),
            ("30 min remind me", "30 min", "remind me"),
            ("'every 5m' what's new?", "every 5m", "what's new?"),
            ("2h what's the weather", "2h", "what's the weather"),
        ];
        for (input, schedule, prompt) in cases {
            let (s, p, _) = split(input);
            assert_eq!((s.as_str(), p.as_str()), (schedule, prompt), "{input}");
        }
    }

    #[test]
    fn flags_are_taken_out_wherever_they_are() {
        let (_, prompt, parsed) =
            split("every 1h --deliver telegram,discord check \"the\" build --repeat 3 --skill a --skill b --name 'nightly build'");
        assert_eq!(prompt, "check \"the\" build");
        assert_eq!(parsed.value("--deliver").as_deref(), Some("telegram,discord"));
        assert_eq!(parsed.value("--repeat").as_deref(), Some("3"));
        assert_eq!(parsed.values("--skill"), ["a", "b"]);
        assert_eq!(parsed.value("--name").as_deref(), Some("nightly build"));
        let (_, prompt, _) = split("every 1h check --name x the  build");
        assert_eq!(prompt, "check the  build", "text around a flag is joined, not the flag");
        assert_eq!(parse("x --name").unwrap_err().to_string(), "`--name` needs a value");
        assert!(parse("x --nmae y").unwrap_err().to_string().contains("unknown option `--nmae`"));
    }

    #[test]
    fn a_missing_or_bad_schedule_says_what_is_accepted() {
        let e = leading_schedule(&parse("").unwrap(), Zone::Local).unwrap_err().to_string();
        assert!(e.contains("every 30m"), "{e}");
        let e = leading_schedule(&parse("every fortnight do it").unwrap(), Zone::Local).unwrap_err().to_string();
        assert!(e.contains("Invalid schedule 'every fortnight'"), "{e}");
        let e = leading_schedule(&parse("tomorrow do it").unwrap(), Zone::Local).unwrap_err().to_string();
        assert!(e.contains("Invalid schedule 'tomorrow'"), "{e}");
    }
}
