//! Buttons as Block Kit: the message's words in `section` blocks, each row of buttons an
//! `actions` block. Slack's limits (3,000 characters a section, 75 a button label, 2,000 a
//! value, 25 elements an actions block, 50 blocks a message) are kept by trimming what does not
//! fit, with a warning, rather than failing the message.

use hermes_adapter::Button;
use serde_json::{Value, json};

const SECTION_LEN: usize = 3000;
const LABEL_LEN: usize = 75;
const VALUE_LEN: usize = 2000;
const ROW_LEN: usize = 25;
const MAX_BLOCKS: usize = 50;

/// The blocks of a message with buttons (the text stays the message's `text` too, which Slack
/// shows in notifications).
pub(crate) fn with_buttons(text: &str, rows: &[Vec<Button>]) -> Vec<Value> {
    let mut blocks: Vec<Value> =
        sections(text).into_iter().map(|part| json!({"type": "section", "text": {"type": "mrkdwn", "text": part}})).collect();
    for (r, row) in rows.iter().enumerate() {
        let elements: Vec<Value> = row
            .iter()
            .enumerate()
            .filter(|(_, b)| {
                let fits = !b.data.is_empty() && b.data.chars().count() <= VALUE_LEN;
                if !fits {
                    tracing::warn!(label = %b.label, "a button's value must be 1-2000 characters for Slack; button left out");
                }
                fits
            })
            .take(ROW_LEN)
            .map(|(i, b)| {
                json!({
                    "type": "button",
                    "action_id": format!("hermes_{r}_{i}"),
                    "text": {"type": "plain_text", "text": b.label.chars().take(LABEL_LEN).collect::<String>(), "emoji": true},
                    "value": b.data,
                })
            })
            .collect();
        if !elements.is_empty() {
            blocks.push(json!({"type": "actions", "block_id": format!("hermes_row_{r}"), "elements": elements}));
        }
    }
    // The buttons matter most: text sections give way first.
    while blocks.len() > MAX_BLOCKS {
        if let Some(first_section) = blocks.iter().position(|b| b["type"] == "section") {
            blocks.remove(first_section);
        } else {
            blocks.truncate(MAX_BLOCKS);
        }
    }
    blocks
}

/// `text` in parts of at most [`SECTION_LEN`] characters, cut at line ends where possible.
fn sections(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    for line in text.split_inclusive('\n') {
        if current.chars().count() + line.chars().count() > SECTION_LEN && !current.is_empty() {
            parts.push(std::mem::take(&mut current));
        }
        if line.chars().count() > SECTION_LEN {
            let chars: Vec<char> = line.chars().collect();
            for piece in chars.chunks(SECTION_LEN) {
                parts.push(piece.iter().collect());
            }
        } else {
            current.push_str(line);
        }
    }
    if !current.trim().is_empty() {
        parts.push(current);
    }
    parts.retain(|p| !p.trim().is_empty());
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buttons_become_actions_under_the_text() {
        let rows =
            vec![vec![Button { label: "Approve".into(), data: "/approve".into() }, Button { label: "Deny".into(), data: "/deny".into() }]];
        let blocks = with_buttons("*Run* `rm -rf build`?", &rows);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0]["text"]["text"], "*Run* `rm -rf build`?");
        assert_eq!(blocks[1]["elements"][1]["value"], "/deny");
        assert_eq!(blocks[1]["elements"][0]["action_id"], "hermes_0_0");
    }

    #[test]
    fn limits_are_kept() {
        let long = "x".repeat(40) + "\n";
        let text = long.repeat(200);
        let parts = sections(&text);
        assert!(parts.iter().all(|p| p.chars().count() <= SECTION_LEN));
        assert_eq!(parts.concat(), text);
        let row: Vec<Button> = (0..30).map(|i| Button { label: "L".repeat(100), data: format!("/x {i}") }).collect();
        let blocks = with_buttons("hi", &[row, vec![Button { label: "bad".into(), data: String::new() }]]);
        assert_eq!(blocks.len(), 2, "the empty-valued row is left out");
        assert_eq!(blocks[1]["elements"].as_array().unwrap().len(), ROW_LEN);
        assert_eq!(blocks[1]["elements"][0]["text"]["text"].as_str().unwrap().chars().count(), LABEL_LEN);
    }
}
