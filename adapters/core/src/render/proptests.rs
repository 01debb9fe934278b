//! Property tests: for generated answers full of what breaks naive splitters (fences with and
//! without a language and with tildes, indentation with spaces and tabs, inline code holding
//! backticks, nested lists, tables, links and bare URLs, `<>&"'`, emoji sequences, CJK, RTL,
//! astral characters, words longer than a message, CRLF line ends, text that looks like a
//! ` (i/n)` counter), every dialect's messages pass the round-trip oracle
//! ([`crate::render::oracle`]) at random limits and at the platforms' real ones; Matrix's parts
//! also carry HTML, which an HTML parser must read as the part's own structure and code
//! ([`crate::render::matrix_oracle`]).
//!
//! 10,000 cases per dialect; `HERMES_ROUNDTRIP_CASES` changes that. The inputs come from a fixed
//! seed, so a run that fails fails again for whoever reruns it and CI never goes red for a change
//! that did not cause it; `HERMES_ROUNDTRIP_SEED=<n>` picks another seed and
//! `HERMES_ROUNDTRIP_SEED=random` a fresh one each run (the way to hunt for new breakers, which
//! then join [`known_breakers_round_trip`] with their fix).

use crate::capabilities::{LengthUnit, MarkdownDialect};
use crate::render::{matrix_html, matrix_oracle, oracle};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};

const DEFAULT_CASES: u32 = 10_000;
const DEFAULT_SEED: u64 = 0x4845_524d_4553;

fn cases() -> u32 {
    std::env::var("HERMES_ROUNDTRIP_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CASES)
}

fn seed() -> RngSeed {
    match std::env::var("HERMES_ROUNDTRIP_SEED").ok().as_deref().map(str::trim) {
        Some("random") => RngSeed::Random,
        Some(n) => {
            RngSeed::Fixed(n.parse().unwrap_or_else(|_| panic!("HERMES_ROUNDTRIP_SEED: expected a number or `random`, found {n:?}")))
        }
        None => RngSeed::Fixed(DEFAULT_SEED),
    }
}

const SPECIAL_WORDS: &[&str] = &[
    "你好世界",
    "日本語のテキストです",
    "שלום עולם",
    "مرحبا بالعالم",
    "👨‍👩‍👧‍👦",
    "👍🏽",
    "🏳️‍🌈",
    "🇩🇪🇫🇷🇯🇵",
    "e\u{301}te\u{301}",
    "𝒳𝒴𝒵",
    "😀😀😀",
    "<b>not</b>",
    "a&b",
    "&amp;",
    "&#128512;",
    "\"quoted\"",
    "it's",
    "5<6>4",
    "\\*",
    "\\_",
    "(3/7)",
    "(1/2)",
    "https://example.com/path?a=1&b=2",
    "www.example.org",
    "snake_case_name",
    "a*b*c",
    "~",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        12 => "[a-z]{1,9}",
        2 => "[A-Z][a-z]{0,7}[.,:;!?]?",
        3 => proptest::sample::select(SPECIAL_WORDS).prop_map(str::to_string),
        1 => "[a-z]{40,260}",
    ]
}

fn words(range: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    proptest::collection::vec(word(), range).prop_map(|w| w.join(" "))
}

fn inline() -> impl Strategy<Value = String> {
    prop_oneof![
        10 => word(),
        1 => "[a-z <>&=()]{1,16}".prop_map(|c| format!("`{}`", c.trim())).prop_filter("empty code", |c| c.len() > 2),
        1 => "[a-z]{1,6}`[a-z]{1,6}".prop_map(|c| format!("`` {c} ``")),
        1 => words(1..4).prop_map(|w| format!("**{w}**")),
        1 => words(1..3).prop_map(|w| format!("*{w}*")),
        1 => words(1..3).prop_map(|w| format!("_{w}_")),
        1 => words(1..3).prop_map(|w| format!("~~{w}~~")),
        1 => (words(1..4), "[a-z]{1,8}").prop_map(|(w, p)| format!("[{w}](https://example.com/{p}?q=1&r=2)")),
        1 => "[a-z]{1,10}".prop_map(|p| format!("<https://example.com/{p}>")),
    ]
}

fn paragraph() -> impl Strategy<Value = String> {
    proptest::collection::vec((inline(), prop_oneof![12 => Just(" "), 1 => Just("\n"), 1 => Just("  \n")]), 1..45).prop_map(|items| {
        let mut out = String::new();
        for (i, (text, sep)) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(sep);
            }
            out.push_str(text);
        }
        out
    })
}

fn code_line() -> impl Strategy<Value = String> {
    let indent = proptest::sample::select(vec!["", "    ", "        ", "            ", "\t", "\t\t", "  ", "\t    "]);
    let body = proptest::sample::select(vec![
        "x = 1",
        "code_line = 3 * 2",
        "return f(a, b)",
        "if a < b && c > d:",
        "print(\"héllo 👋\")",
        "# a comment with  two  spaces",
        "let s = \"<tag attr='v'>&amp;</tag>\";",
        "}",
        "for i in range(10):",
        "```not a fence inside code```",
        "a\tb\tc",
        "",
    ]);
    (indent, body).prop_map(|(i, b)| format!("{i}{b}"))
}

fn code_block() -> impl Strategy<Value = String> {
    let fence = proptest::sample::select(vec!["```", "~~~", "````"]);
    let lang = proptest::sample::select(vec!["", "python", "rust", "sh", "js"]);
    (fence, lang, proptest::collection::vec(code_line(), 1..70), proptest::bool::weighted(0.05)).prop_map(|(fence, lang, lines, open)| {
        let closing = if open { String::new() } else { format!("\n{fence}") };
        format!("{fence}{lang}\n{}{closing}", lines.join("\n"))
    })
}

fn indented_code() -> impl Strategy<Value = String> {
    proptest::collection::vec(code_line(), 1..12).prop_map(|lines| lines.iter().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n"))
}

fn list() -> impl Strategy<Value = String> {
    let item = (0usize..3, proptest::sample::select(vec!["- ", "* ", "1. "]), words(1..14));
    proptest::collection::vec(item, 1..10).prop_map(|items| {
        let mut depth = 0;
        items
            .into_iter()
            .map(|(d, marker, text)| {
                depth = d.min(depth + 1);
                format!("{}{marker}{text}", "    ".repeat(depth))
            })
            .collect::<Vec<_>>()
            .join("\n")
    })
}

fn quote() -> impl Strategy<Value = String> {
    proptest::collection::vec(words(1..12), 1..5).prop_map(|lines| lines.iter().map(|l| format!("> {l}")).collect::<Vec<_>>().join("\n"))
}

fn table() -> impl Strategy<Value = String> {
    let cell = "[a-z0-9 ]{1,8}";
    (2usize..4, proptest::collection::vec(proptest::collection::vec(cell, 3), 1..8)).prop_map(|(columns, rows)| {
        let row = |cells: &[String]| format!("| {} |", cells[..columns].iter().map(|c| c.trim()).collect::<Vec<_>>().join(" | "));
        let mut out = vec![row(&["h1".into(), "h2".into(), "h3".into()]), format!("|{}", "---|".repeat(columns))];
        out.extend(rows.iter().map(|r| row(r)));
        out.join("\n")
    })
}

fn block() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => paragraph(),
        4 => code_block(),
        1 => indented_code(),
        2 => list(),
        1 => quote(),
        1 => table(),
        1 => words(1..6).prop_map(|w| format!("## {w}")),
        1 => Just("---".to_string()),
    ]
}

/// An answer: blocks separated by blank lines, sometimes with CRLF line ends.
fn answer() -> impl Strategy<Value = String> {
    (proptest::collection::vec(block(), 1..16), proptest::bool::weighted(0.1)).prop_map(|(blocks, crlf)| {
        let text = blocks.join("\n\n");
        if crlf { text.replace('\n', "\r\n") } else { text }
    })
}

fn run(dialect: MarkdownDialect, unit: LengthUnit, real_limit: usize) {
    let limit = prop_oneof![4 => 80usize..600, 1 => Just(real_limit)];
    let mut runner = TestRunner::new(Config { cases: cases(), failure_persistence: None, rng_seed: seed(), ..Config::default() });
    let result = runner.run(&(answer(), limit), |(markdown, limit)| {
        oracle::check(&markdown, dialect, limit, unit).map(|_| ()).map_err(|e| TestCaseError::fail(format!("limit {limit}: {e}")))
    });
    if let Err(e) = result {
        panic!("{dialect:?}: {e}");
    }
}

#[test]
fn discord_markdown_round_trips() {
    run(MarkdownDialect::Markdown, LengthUnit::Chars, 2000);
}

/// Inputs the property tests once found wrong, kept as fixed cases.
#[test]
fn known_breakers_round_trip() {
    // A cut right after a `~~~` run: the strike's closing `~~` merged with it into `~~~~~`.
    let struck = format!("~~a ~~~ ~~~ {}~~", "a".repeat(101));
    for dialect in [MarkdownDialect::Markdown, MarkdownDialect::SlackMrkdwn] {
        for limit in 60..=120 {
            if let Err(e) = oracle::check(&struck, dialect, limit, LengthUnit::Chars) {
                panic!("{dialect:?} limit {limit}: {e}");
            }
        }
    }
    // A cut right after a strike nested in a strike (found as `~~a ~~~ … ~~b~~ … ~~`: the `~~~`
    // closes nothing, so the first `~~` pairs with the last): the inner `~~` and the outer one
    // the part closes after it made `~~~~`, which closes neither, and the part lost its strike.
    let nested = format!("~~a ~~b~~ {}~~", "c".repeat(101));
    for dialect in [MarkdownDialect::Markdown, MarkdownDialect::SlackMrkdwn] {
        for limit in 60..=120 {
            if let Err(e) = oracle::check(&nested, dialect, limit, LengthUnit::Chars) {
                panic!("{dialect:?} limit {limit}: {e}");
            }
        }
    }
    // Slack: literal `~` on the second line of a text that spans two; whether they could pair
    // was judged on the first line, so they were left as typed and Slack would strike `abc`.
    for limit in [20, 40, 80] {
        if let Err(e) = oracle::check("a\na ~~a*b*c ~~~ a", MarkdownDialect::SlackMrkdwn, limit, LengthUnit::Chars) {
            panic!("SlackMrkdwn limit {limit}: {e}");
        }
    }
}

#[test]
fn telegram_html_round_trips() {
    run(MarkdownDialect::TelegramHtml, LengthUnit::Utf16, 4096);
}

#[test]
fn slack_mrkdwn_round_trips() {
    run(MarkdownDialect::SlackMrkdwn, LengthUnit::Chars, 39_000);
}

#[test]
fn plain_text_round_trips() {
    run(MarkdownDialect::Plain, LengthUnit::Chars, 2000);
}

/// Email's plain text at its real limit (hermes-email's `MAX_MESSAGE_LEN`, 50,000 characters a
/// mail), besides the random limits every dialect gets.
#[test]
fn email_plain_text_round_trips() {
    run(MarkdownDialect::Plain, LengthUnit::Chars, 50_000);
}

/// Matrix sends Markdown parts (cut like Discord's, at its 4,000-character limit) each with its
/// HTML rendering; a reader's HTML parser must find in every part's HTML the structure, the code
/// and the words of that part's Markdown.
#[test]
fn matrix_html_round_trips() {
    let limit = prop_oneof![4 => 80usize..600, 1 => Just(4000usize)];
    let mut runner = TestRunner::new(Config { cases: cases(), failure_persistence: None, rng_seed: seed(), ..Config::default() });
    let result = runner.run(&(answer(), limit), |(markdown, limit)| {
        let parts = oracle::check(&markdown, MarkdownDialect::Markdown, limit, LengthUnit::Chars)
            .map_err(|e| TestCaseError::fail(format!("limit {limit}: {e}")))?;
        for part in &parts {
            matrix_oracle::check(part, &matrix_html::to_html(part))
                .map_err(|e| TestCaseError::fail(format!("limit {limit}, part {part:?}: {e}")))?;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("Matrix HTML: {e}");
    }
}
