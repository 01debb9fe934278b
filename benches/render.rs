//! Rendering and splitting benchmark: what an answer costs between the model and the platform —
//! Markdown rendered whole into each dialect and split to the platform's limit — for a typical
//! long answer (≈10,000 characters: prose, a table, a nested list, indented code) and a short one.
//!
//! Run with `cargo bench --bench render`. It prints numbers; it asserts nothing.

use hermes_adapter::{LengthUnit, MarkdownDialect, chunk, render};
use std::time::Instant;

fn long_answer() -> String {
    let mut text =
        String::from("Here is the **plan** 🛠️ with `code` & <markup>:\n\n| step | what |\n|---|---|\n| 1 | parse |\n| 2 | report |\n\n");
    text.push_str("1. Read the data\n    - check `x < y`\n    - keep *every* row\n2. Print the summary\n\n```python\n");
    let mut n = 0;
    while text.len() < 10_000 {
        n += 1;
        text.push_str(&format!(
            "def step_{n}(rows):\n    total = 0\n    for row in rows:\n        total += row  # {n}\n\treturn total\n\n"
        ));
    }
    text.push_str("```\n\nThat's all 🎉");
    text
}

fn main() {
    let long = long_answer();
    let short = "Sure — `ls -la` lists **everything**, hidden files included.".to_string();
    for (name, dialect, unit, limit) in [
        ("discord markdown", MarkdownDialect::Markdown, LengthUnit::Chars, 2000),
        ("telegram html", MarkdownDialect::TelegramHtml, LengthUnit::Utf16, 4096),
        ("plain text", MarkdownDialect::Plain, LengthUnit::Chars, 2000),
    ] {
        for (label, answer, rounds) in [("10k answer", &long, 300), ("short answer", &short, 20_000)] {
            let mut parts = 0;
            let started = Instant::now();
            for _ in 0..rounds {
                let doc = render::document(answer, dialect);
                parts = chunk::split(&doc, limit, unit).len();
            }
            let each = started.elapsed() / rounds;
            println!("{name:>16}, {label:<12}: {:>8.1} µs per answer ({parts} messages)", each.as_secs_f64() * 1e6);
        }
    }
}
