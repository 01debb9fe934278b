//! Any input at all, rendered for each dialect and split at any limit, must pass the round-trip
//! oracle (`hermes_adapter::render::oracle`) at its structural strictness: every part fits, the
//! parts put back together are the whole rendering, nothing is cut inside a grapheme, escape,
//! entity or tag, every HTML part is well formed, and every code line arrives whole. (The
//! property suites also hold realistic answers to spans staying whole and formatting kept.)
//!
//! Input: byte 0 picks the dialect, bytes 1–2 the limit (400..=4495: from below the smallest
//! platform limit, IRC's 450, up past Telegram's 4096), the rest is the Markdown.

#![no_main]

use hermes_adapter::render::oracle;
use hermes_adapter::{LengthUnit, MarkdownDialect};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [selector, high, low, rest @ ..] = data else { return };
    let (dialect, unit) = match selector % 3 {
        0 => (MarkdownDialect::Markdown, LengthUnit::Chars),
        1 => (MarkdownDialect::TelegramHtml, LengthUnit::Utf16),
        _ => (MarkdownDialect::Plain, LengthUnit::Chars),
    };
    let limit = 400 + (usize::from(*high) << 8 | usize::from(*low)) % 4096;
    let Ok(markdown) = std::str::from_utf8(rest) else { return };
    if let Err(e) = oracle::check_with(markdown, dialect, limit, unit, oracle::Strictness::Structure) {
        panic!("{dialect:?} at limit {limit}: {e}\n--- markdown ---\n{markdown:?}");
    }
});
