//! What Telegram does to a message's text after parsing its markup and before keeping it
//! (TDLib's `fix_formatted_text`): control characters, tabs included, become spaces; CR and the
//! Unicode line/paragraph separators and embedding controls (U+2028–U+202E) are removed; trailing
//! spaces and line breaks are cut; leading ones are cut up to the first formatting entity (so
//! a `pre` block at the very start keeps its indentation); entities left with only spaces are
//! dropped. The limits are checked on the result.

use super::html::Parsed;
use serde_json::Value;

pub(super) fn clean(parsed: Parsed) -> Parsed {
    // Old UTF-16 offset → new one, for every offset (one more entry: the end).
    let mut map = Vec::with_capacity(parsed.text.len() + 1);
    let mut text = String::with_capacity(parsed.text.len());
    let mut new_offset = 0usize;
    for c in parsed.text.chars() {
        let kept = match c {
            '\r' | '\u{2028}'..='\u{202E}' => None,
            '\n' => Some('\n'),
            c if (c as u32) < 0x20 => Some(' '),
            c => Some(c),
        };
        for _ in 0..c.len_utf16() {
            map.push(new_offset);
        }
        if let Some(k) = kept {
            text.push(k);
            new_offset += k.len_utf16();
        }
    }
    map.push(new_offset);
    let remap = |old: u64| map.get(old as usize).copied().unwrap_or(new_offset);
    let mut spans: Vec<(usize, usize, Value)> = parsed
        .entities
        .into_iter()
        .filter_map(|e| {
            let offset = e["offset"].as_u64()?;
            let end = offset + e["length"].as_u64()?;
            Some((remap(offset), remap(end), e))
        })
        .collect();

    // Trailing spaces and line breaks go, also from the entities that reach them.
    let kept_len = text.trim_end_matches([' ', '\n']).len();
    text.truncate(kept_len);
    let end = utf16_len(&text);
    for span in &mut spans {
        span.1 = span.1.min(end);
    }
    // Leading ones go up to the first entity.
    let first_entity = spans.iter().map(|s| s.0).min().unwrap_or(end);
    let leading = text.len() - text.trim_start_matches([' ', '\n']).len();
    let cut = utf16_len(&text[..leading]).min(first_entity);
    let cut_bytes = text.char_indices().map(|(i, _)| i).chain([text.len()]).find(|&i| utf16_len(&text[..i]) >= cut).unwrap_or(0);
    text.drain(..cut_bytes);
    let entities = spans
        .into_iter()
        .filter_map(|(start, end, mut e)| {
            let (start, end) = (start.saturating_sub(cut), end.saturating_sub(cut));
            let covered = utf16_slice(&text, start, end);
            if end <= start || covered.trim_matches([' ', '\n']).is_empty() {
                return None;
            }
            e["offset"] = Value::from(start);
            e["length"] = Value::from(end - start);
            Some(e)
        })
        .collect();
    Parsed { text, entities }
}

fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

fn utf16_slice(s: &str, start: usize, end: usize) -> String {
    let units: Vec<u16> = s.encode_utf16().collect();
    String::from_utf16_lossy(units.get(start..end.min(units.len())).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tabs_and_controls_become_spaces_and_cr_goes() {
        let parsed = clean(Parsed { text: "a\tb\r\nc\u{7}d".into(), entities: vec![] });
        assert_eq!(parsed.text, "a b\nc d");
    }

    #[test]
    fn leading_space_is_cut_only_before_the_first_entity() {
        let pre = clean(Parsed { text: "    indented\n".into(), entities: vec![json!({"type": "pre", "offset": 0, "length": 13})] });
        assert_eq!(pre.text, "    indented");
        assert_eq!(pre.entities[0]["length"], 12);
        let plain = clean(Parsed { text: "\n  hello  \n".into(), entities: vec![] });
        assert_eq!(plain.text, "hello");
        let bold_later = clean(Parsed { text: "  a b".into(), entities: vec![json!({"type": "bold", "offset": 4, "length": 1})] });
        assert_eq!(bold_later.text, "a b");
        assert_eq!(bold_later.entities[0]["offset"], 2);
    }

    #[test]
    fn entities_of_only_spaces_are_dropped() {
        let parsed = clean(Parsed { text: "x   y".into(), entities: vec![json!({"type": "bold", "offset": 1, "length": 3})] });
        assert!(parsed.entities.is_empty());
    }
}
