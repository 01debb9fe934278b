//! Splitting a long answer into messages that fit a platform's limit.
//!
//! The rules follow Hermes: a text that fits is one message; otherwise each chunk reserves room
//! for a ` (i/n)` counter, cuts at the last newline when it lies in the second half of the window
//! (else at the last space), never inside an inline code span, and a fenced code block cut in two
//! is closed at the end of one chunk and reopened with the same language at the start of the next.

use crate::capabilities::LengthUnit;

/// Room kept for the ` (i/n)` counter.
const COUNTER_RESERVE: usize = 10;
const FENCE: &str = "```";

/// Split `text` into chunks of at most `max_len` units each (as measured by `unit`).
pub fn chunk_text(text: &str, max_len: usize, unit: LengthUnit) -> Vec<String> {
    if unit.measure(text) <= max_len {
        return vec![text.to_string()];
    }
    // A window this small cannot hold fences and counters; fall back to hard cuts.
    let window = max_len.saturating_sub(COUNTER_RESERVE).max(16);
    let mut bodies = Vec::new();
    let mut rest = text;
    let mut open_fence: Option<String> = None;
    while !rest.is_empty() {
        let reopen = open_fence.as_ref().map(|lang| format!("{FENCE}{lang}\n")).unwrap_or_default();
        // Always keep room for a closing fence: whether one is needed depends on the cut.
        let close_room = FENCE.len() + 1;
        let budget = window.saturating_sub(unit.measure(&reopen) + close_room).max(8);
        let cut = choose_cut(rest, budget, unit);
        let (body, tail) = rest.split_at(cut);
        let fence_after = fence_state_after(body, open_fence.clone());
        let mut chunk = reopen;
        chunk.push_str(body);
        if fence_after.is_some() && !tail.is_empty() {
            if !chunk.ends_with('\n') {
                chunk.push('\n');
            }
            chunk.push_str(FENCE);
        }
        bodies.push(chunk);
        open_fence = fence_after;
        rest = tail;
        // A cut at a newline leaves it in the chunk; a cut at a space drops that space.
        if let Some(stripped) = rest.strip_prefix(' ') {
            rest = stripped;
        }
    }
    let total = bodies.len();
    if total == 1 {
        return bodies;
    }
    bodies.into_iter().enumerate().map(|(i, body)| format!("{} ({}/{})", body.trim_end_matches('\n'), i + 1, total)).collect()
}

/// Byte index at which to cut `text` so that the head measures at most `budget` units.
fn choose_cut(text: &str, budget: usize, unit: LengthUnit) -> usize {
    let mut used = 0;
    let mut limit = text.len();
    for (idx, ch) in text.char_indices() {
        let w = unit.of_char(ch);
        if used + w > budget {
            limit = idx;
            break;
        }
        used += w;
    }
    if limit == text.len() {
        return limit;
    }
    let window = &text[..limit];
    let half = unit.measure(window) / 2;
    let mut cut = match window.rfind('\n') {
        Some(nl) if unit.measure(&window[..nl]) >= half => nl + 1,
        _ => match window.rfind(' ') {
            Some(sp) if sp > 0 => sp,
            _ => limit,
        },
    };
    // Never cut inside an inline code span: step back to before its opening backtick.
    if let Some(open) = open_inline_code_start(&text[..cut])
        && open > 0
    {
        cut = open;
    }
    if cut == 0 { limit.max(first_char_len(text)) } else { cut }
}

fn first_char_len(text: &str) -> usize {
    text.chars().next().map(char::len_utf8).unwrap_or(0)
}

/// If the last line of `head` (outside fenced blocks) has an unclosed single backtick, its byte
/// index.
fn open_inline_code_start(head: &str) -> Option<usize> {
    let line_start = head.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line = &head[line_start..];
    if line.trim_start().starts_with(FENCE) {
        return None;
    }
    let mut open = None;
    for (i, ch) in line.char_indices() {
        if ch == '`' {
            open = match open {
                Some(_) => None,
                None => Some(line_start + i),
            };
        }
    }
    open
}

/// The fence language still open after `body`, given the one open before it.
fn fence_state_after(body: &str, mut open: Option<String>) -> Option<String> {
    for line in body.lines() {
        let trimmed = line.trim_start();
        if let Some(after) = trimmed.strip_prefix(FENCE) {
            open = match open {
                Some(_) => None,
                None => Some(after.trim().to_string()),
            };
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_one_chunk() {
        assert_eq!(chunk_text("hello", 100, LengthUnit::Chars), vec!["hello"]);
    }

    #[test]
    fn every_chunk_fits_and_is_numbered() {
        let text = "word ".repeat(3000);
        let chunks = chunk_text(&text, 2000, LengthUnit::Chars);
        assert!(chunks.len() >= 8);
        for (i, c) in chunks.iter().enumerate() {
            assert!(c.chars().count() <= 2000, "chunk {i} too long");
            assert!(c.ends_with(&format!("({}/{})", i + 1, chunks.len())));
        }
        let rejoined: String =
            chunks.iter().map(|c| c.rsplit_once(" (").map(|(b, _)| b).unwrap_or(c).to_string()).collect::<Vec<_>>().join(" ");
        assert_eq!(rejoined.split_whitespace().count(), 3000);
    }

    #[test]
    fn code_fences_are_closed_and_reopened_with_language() {
        let code: String = (0..400).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("Intro\n```rust\n{code}```\nOutro");
        let chunks = chunk_text(&text, 1000, LengthUnit::Chars);
        assert!(chunks.len() > 2);
        for c in &chunks {
            let fences = c.lines().filter(|l| l.trim_start().starts_with("```")).count();
            assert_eq!(fences % 2, 0, "unbalanced fences in chunk: {c}");
        }
        assert!(chunks[1].starts_with("```rust\n"));
    }

    #[test]
    fn utf16_units_are_counted_for_telegram() {
        let text = "😀".repeat(3000); // 6000 UTF-16 units, 3000 chars
        let chunks = chunk_text(&text, 4096, LengthUnit::Utf16);
        assert_eq!(chunks.len(), 2);
        for c in &chunks {
            assert!(c.encode_utf16().count() <= 4096);
        }
    }

    #[test]
    fn inline_code_is_not_split() {
        let text = format!("{} `some inline code here` {}", "a".repeat(30), "b".repeat(40));
        let chunks = chunk_text(&text, 50, LengthUnit::Chars);
        for c in &chunks {
            assert_eq!(c.matches('`').count() % 2, 0, "split inline code: {c:?}");
        }
    }
}
