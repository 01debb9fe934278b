//! What of a Markdown answer is read aloud, and in which parts: fenced code is kept apart (sent
//! as text, never spoken), the rest loses its markup (emphasis marks, heading hashes, link
//! targets, table pipes) and is cut at paragraph, then sentence, then word boundaries into parts
//! a speech engine takes in one request.

/// An answer prepared for speech.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpeechPlan {
    /// The parts to speak, in order, each at most `max_chars` characters.
    pub spoken: Vec<String>,
    /// The fenced code blocks, verbatim with their fences, in order.
    pub code: Vec<String>,
}

/// Splits `markdown` into spoken parts of at most `max_chars` characters (a single word longer
/// than that is the only thing ever cut) and the code blocks.
pub fn plan(markdown: &str, max_chars: usize) -> SpeechPlan {
    let (paragraphs, code) = paragraphs_and_code(markdown);
    SpeechPlan { spoken: pack(&paragraphs, max_chars.max(1)), code }
}

/// The spoken paragraphs (plain text) and the fenced code blocks.
fn paragraphs_and_code(markdown: &str) -> (Vec<String>, Vec<String>) {
    let (mut paragraphs, mut code) = (Vec::new(), Vec::new());
    let mut paragraph: Vec<String> = Vec::new();
    let mut fence: Option<(String, Vec<&str>)> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if let Some((marker, block)) = &mut fence {
            block.push(line);
            if trimmed.trim_end().starts_with(marker.as_str()) && trimmed.trim_end().chars().all(|c| marker.starts_with(c)) {
                code.push(block.join("\n"));
                fence = None;
            }
            continue;
        }
        if let Some(marker) = fence_marker(trimmed) {
            flush(&mut paragraph, &mut paragraphs);
            fence = Some((marker, vec![line]));
        } else if trimmed.is_empty() {
            flush(&mut paragraph, &mut paragraphs);
        } else if let Some(spoken) = spoken_line(trimmed) {
            paragraph.push(spoken);
        }
    }
    // An unclosed fence is still code: nothing in it is read aloud.
    if let Some((_, block)) = fence {
        code.push(block.join("\n"));
    }
    flush(&mut paragraph, &mut paragraphs);
    (paragraphs, code)
}

fn flush(paragraph: &mut Vec<String>, paragraphs: &mut Vec<String>) {
    if !paragraph.is_empty() {
        paragraphs.push(paragraph.join(" "));
        paragraph.clear();
    }
}

/// "```" or "~~~" (three or more) opening a fenced block.
fn fence_marker(trimmed: &str) -> Option<String> {
    let fence_char = trimmed.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let run = trimmed.chars().take_while(|&c| c == fence_char).count();
    (run >= 3).then(|| fence_char.to_string().repeat(run))
}

/// One line of prose as it is said, or None when nothing of it is said (a rule, a table's
/// separator row).
fn spoken_line(trimmed: &str) -> Option<String> {
    if is_rule(trimmed) {
        return None;
    }
    if trimmed.starts_with('|') {
        return table_row(trimmed);
    }
    let quote_free = trimmed.trim_start_matches(['>', ' ']);
    let (text, is_item) = match strip_heading(quote_free).or_else(|| strip_list_marker(quote_free)) {
        Some(rest) => (rest, true),
        None => (quote_free, false),
    };
    let plain = inline_plain(text);
    let plain = plain.trim();
    if plain.is_empty() {
        return None;
    }
    // Headings and list items are sentences of their own: a full stop makes the voice pause.
    Some(if is_item { sentence(plain) } else { plain.to_owned() })
}

fn is_rule(trimmed: &str) -> bool {
    let compact: String = trimmed.chars().filter(|c| !c.is_whitespace()).collect();
    compact.len() >= 3 && ['-', '*', '_'].iter().any(|&m| compact.chars().all(|c| c == m))
}

fn strip_heading(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    (1..=6).contains(&hashes).then(|| &line[hashes..]).filter(|rest| rest.is_empty() || rest.starts_with(' '))
}

fn strip_list_marker(line: &str) -> Option<&str> {
    if let Some(rest) = line.strip_prefix(['-', '*', '+']).filter(|r| r.starts_with(' ')) {
        return Some(rest);
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    let rest = &line[digits..];
    (digits > 0).then(|| rest.strip_prefix(['.', ')']).filter(|r| r.starts_with(' '))).flatten()
}

/// A table row as a sentence of its cells; the `|---|` separator row says nothing.
fn table_row(trimmed: &str) -> Option<String> {
    let cells: Vec<String> =
        trimmed.trim_matches('|').split('|').map(|cell| inline_plain(cell).trim().to_owned()).filter(|c| !c.is_empty()).collect();
    let separator = cells.iter().all(|c| c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')));
    (!separator).then(|| sentence(&cells.join(", ")))
}

fn sentence(text: &str) -> String {
    if text.ends_with(['.', '!', '?', ':', ';']) { text.to_owned() } else { format!("{text}.") }
}

/// Inline Markdown to plain words: links and images become their text, code spans their
/// content, emphasis marks go, bare URLs become "a link" (nobody wants one read out).
fn inline_plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some((label, after)) = link(rest) {
            out.push_str(&inline_plain(label));
            rest = after;
            continue;
        }
        if rest.starts_with("http://") || rest.starts_with("https://") {
            out.push_str("a link");
            let end = rest.find(|c: char| c.is_whitespace() || c == ')').unwrap_or(rest.len());
            // A full stop or comma after a URL belongs to the sentence.
            let url = rest[..end].trim_end_matches(['.', ',', ';', ':', '!', '?']);
            rest = &rest[url.len()..];
            continue;
        }
        if let Some(after) = rest.strip_prefix("~~") {
            rest = after;
            continue;
        }
        let previous = out.chars().last();
        let next = rest[c.len_utf8()..].chars().next();
        let within_word = previous.is_some_and(char::is_alphanumeric) && next.is_some_and(char::is_alphanumeric);
        match c {
            '*' | '`' => {}
            // snake_case stays; `_emphasis_` loses its marks.
            '_' if !within_word => {}
            _ => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `[label](target)` or `![alt](target)` at the start of `text`: the label and what follows.
fn link(text: &str) -> Option<(&str, &str)> {
    let body = text.strip_prefix("![").or_else(|| text.strip_prefix('['))?;
    let close = body.find("](")?;
    let label = &body[..close];
    let target_end = body[close + 2..].find(')')?;
    (!label.contains('[')).then(|| (label, &body[close + 2 + target_end + 1..]))
}

/// Packs paragraphs into parts of at most `max` characters, cutting a paragraph that does not
/// fit at sentence ends, and a sentence that does not fit between words.
fn pack(paragraphs: &[String], max: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    for paragraph in paragraphs {
        for piece in fitting_pieces(paragraph, max) {
            let separator = if current.is_empty() {
                ""
            } else if piece.starts_paragraph {
                "\n\n"
            } else {
                " "
            };
            if chars(&current) + chars(separator) + chars(&piece.text) > max {
                parts.push(std::mem::take(&mut current));
                current = piece.text;
            } else {
                current.push_str(separator);
                current.push_str(&piece.text);
            }
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

struct Piece {
    text: String,
    starts_paragraph: bool,
}

/// A paragraph as pieces of at most `max` characters: whole when it fits, else its sentences,
/// else an overlong sentence wrapped between words (a word longer than `max` is cut, the only
/// cut), so a part never ends mid-sentence when a sentence end was in reach.
fn fitting_pieces(paragraph: &str, max: usize) -> Vec<Piece> {
    let pieces: Vec<String> = if chars(paragraph) <= max {
        vec![paragraph.to_owned()]
    } else {
        sentences(paragraph).into_iter().flat_map(|s| if chars(s) <= max { vec![s.to_owned()] } else { wrap(s, max) }).collect()
    };
    pieces.into_iter().enumerate().map(|(i, text)| Piece { text, starts_paragraph: i == 0 }).collect()
}

/// Greedy word wrap into lines of at most `max` characters.
fn wrap(sentence: &str, max: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in sentence.split_whitespace().flat_map(|w| cut_word(w, max)) {
        match lines.last_mut() {
            Some(line) if chars(line) + 1 + chars(&word) <= max => {
                line.push(' ');
                line.push_str(&word);
            }
            _ => lines.push(word),
        }
    }
    lines
}

/// Sentences end at `.`, `!` or `?` followed by whitespace.
fn sentences(paragraph: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut start = 0;
    let mut iter = paragraph.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        if matches!(c, '.' | '!' | '?') && iter.peek().is_some_and(|(_, next)| next.is_whitespace()) {
            found.push(paragraph[start..=i].trim());
            start = i + 1;
        }
    }
    found.push(paragraph[start..].trim());
    found.retain(|s| !s.is_empty());
    found
}

fn cut_word(word: &str, max: usize) -> Vec<String> {
    let letters: Vec<char> = word.chars().collect();
    letters.chunks(max).map(|chunk| chunk.iter().collect()).collect()
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_kept_apart_verbatim_and_never_spoken() {
        let answer = "Run this:\n\n```sh\ncargo test --lib media::\necho **done**\n```\n\nThen check the output.\n~~~\nunclosed\n";
        let plan = plan(answer, 4000);
        assert_eq!(plan.code, vec!["```sh\ncargo test --lib media::\necho **done**\n```".to_owned(), "~~~\nunclosed".to_owned()]);
        assert_eq!(plan.spoken, vec!["Run this:\n\nThen check the output.".to_owned()]);
    }

    #[test]
    fn markup_is_not_read_aloud() {
        let answer = "# Weather in **Paris**\n\n\
            It will be _sunny_ on ~~Friday~~ Saturday, see [the forecast](https://example.com/paris?x=1) \
            or https://meteo.example/paris. Use `snake_case` names.\n\n\
            - take an umbrella\n1. pack light\n\n---\n\n> quoted *advice*";
        let spoken = plan(answer, 4000).spoken.join("\n");
        assert_eq!(
            spoken,
            "Weather in Paris.\n\nIt will be sunny on Friday Saturday, see the forecast or a link. Use snake_case names.\n\n\
             take an umbrella. pack light.\n\nquoted advice"
        );
        for mark in ["**", "#", "](", "`", "https", "~~", "---", ">"] {
            assert!(!spoken.contains(mark), "{mark:?} is read aloud in {spoken:?}");
        }
    }

    #[test]
    fn a_table_is_read_row_by_row() {
        let answer = "| City | Saturday |\n|---|:---:|\n| Paris | 21 °C |\n| Lyon | **24 °C** |";
        assert_eq!(plan(answer, 4000).spoken, vec!["City, Saturday. Paris, 21 °C. Lyon, 24 °C.".to_owned()]);
    }

    #[test]
    fn long_answers_are_cut_at_paragraphs_then_sentences_never_inside_a_word() {
        let first = "The train to Lisbon leaves at seven. It arrives before noon.";
        let second = "Porto is three hours further north, and the tickets are cheaper on weekdays. Book early!";
        let answer = format!("{first}\n\n{second}");
        let parts = plan(&answer, 70).spoken;
        assert_eq!(
            parts,
            vec![
                first.to_owned(),
                "Porto is three hours further north, and the tickets are cheaper on".to_owned(),
                "weekdays. Book early!".to_owned()
            ]
        );
        assert!(parts.iter().all(|p| p.chars().count() <= 70));

        let both = plan(&answer, 200).spoken;
        assert_eq!(both, vec![format!("{first}\n\n{second}")], "what fits is spoken in one part");
    }

    #[test]
    fn every_word_survives_the_cutting_in_order() {
        let answer = "Ünïcödé words and ordinary ones. ".repeat(40);
        for max in [1, 7, 25, 100] {
            let parts = plan(&answer, max).spoken;
            assert!(parts.iter().all(|p| p.chars().count() <= max), "max {max}");
            let rejoined: String = parts.concat().split_whitespace().collect();
            let original: String = answer.split_whitespace().collect();
            assert_eq!(rejoined, original, "max {max}");
            if max >= 8 {
                let words: Vec<&str> = parts.iter().flat_map(|p| p.split_whitespace()).collect();
                assert_eq!(words, answer.split_whitespace().collect::<Vec<_>>(), "no word is cut at max {max}");
            }
        }
    }
}
