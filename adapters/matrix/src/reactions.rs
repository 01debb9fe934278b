//! Buttons as reactions. Matrix has no buttons, so an approval prompt's choices are written out
//! under its text and each gets a reaction key: the label's leading emoji when no earlier button
//! took it (✅ for the first ✅ button, ❌ for Deny), else the keycap digit of its position
//! (2️⃣, 3️⃣, …). The bot pre-reacts with the keys so a tap is all it takes; a reaction by someone
//! else on a remembered prompt becomes a button press with the button's data.
//!
//! Prompts are remembered in `prompts.json` (event id → keys and their commands), so a restart
//! does not make pending prompts deaf; the oldest are forgotten past [`PROMPTS_REMEMBERED`].

use crate::state::{read_json, write_json};
use hermes_adapter::Button;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::PathBuf;
use std::sync::Mutex;

/// Prompts remembered; an approval older than the last few hundred prompts has long expired.
pub(crate) const PROMPTS_REMEMBERED: usize = 500;

/// One choice of a prompt: the reaction that picks it and what pressing it means.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Choice {
    pub key: String,
    pub label: String,
    pub data: String,
}

/// The keys of `buttons` (flattened, in reading order).
pub(crate) fn choices(buttons: &[Vec<Button>]) -> Vec<Choice> {
    let mut out: Vec<Choice> = Vec::new();
    for (index, button) in buttons.iter().flatten().enumerate() {
        let own = leading_emoji(&button.label).filter(|key| !out.iter().any(|c| &c.key == key));
        let Some(key) = own.or_else(|| keycap(index + 1)).filter(|key| !out.iter().any(|c| &c.key == key)) else {
            // Past 🔟 a choice is answered by its command only.
            continue;
        };
        out.push(Choice { key, label: button.label.clone(), data: button.data.clone() });
    }
    out
}

/// The text written under a prompt: one line per choice, with its reaction and its command.
pub(crate) fn legend(buttons: &[Vec<Button>], choices: &[Choice]) -> String {
    let mut text = String::from("\n\nReact to choose:");
    for choice in choices {
        let label = choice.label.strip_prefix(choice.key.as_str()).unwrap_or(&choice.label).trim();
        text.push_str(&format!("\n{} {} (`{}`)", choice.key, label, choice.data));
    }
    for button in buttons.iter().flatten().filter(|b| !choices.iter().any(|c| c.data == b.data)) {
        text.push_str(&format!("\n{} (`{}`)", button.label, button.data));
    }
    text
}

/// The emoji a label starts with (with its variation selector), if it starts with one.
fn leading_emoji(label: &str) -> Option<String> {
    let mut chars = label.trim_start().chars();
    let first = chars.next()?;
    if first.is_alphanumeric() || first.is_ascii() || first.is_whitespace() {
        return None;
    }
    let mut key = first.to_string();
    if let Some(next) = chars.next().filter(|c| *c == '\u{FE0F}') {
        key.push(next);
    }
    Some(key)
}

/// 1️⃣ … 9️⃣, 🔟.
fn keycap(n: usize) -> Option<String> {
    match n {
        1..=9 => Some(format!("{n}\u{FE0F}\u{20E3}")),
        10 => Some("🔟".to_string()),
        _ => None,
    }
}

/// What a person the gateway does not allow is told when they react to a prompt (the words
/// Telegram and Discord show such a presser).
pub(crate) const NOT_ALLOWED: &str = "⛔ Not allowed: you are not an allowed user of this bot.";

/// The refusal of `presser`'s reaction to `prompt`: a notice (bots do not answer notices) in the
/// prompt's thread, as a reply to the prompt, mentioning the presser only. Matrix has no message
/// that only one person sees; the mention makes clear whom it is for.
pub(crate) fn not_allowed_content(prompt: &Prompt, presser: &str) -> serde_json::Value {
    let mut content = serde_json::json!({
        "msgtype": "m.notice",
        "body": NOT_ALLOWED,
        "m.mentions": {"user_ids": [presser]},
        "m.relates_to": {"m.in_reply_to": {"event_id": prompt.event_id}},
    });
    if let Some(root) = &prompt.thread_id {
        content["m.relates_to"] = serde_json::json!({"rel_type": "m.thread", "event_id": root, "is_falling_back": false, "m.in_reply_to": {"event_id": prompt.event_id}});
    }
    content
}

/// A prompt the bot sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Prompt {
    pub event_id: String,
    pub room_id: String,
    pub thread_id: Option<String>,
    pub choices: Vec<Choice>,
}

/// The remembered prompts, persisted on every change.
pub(crate) struct Prompts {
    path: PathBuf,
    prompts: Mutex<Vec<Prompt>>,
}

impl Prompts {
    /// The prompts saved at `path` (none when the file is missing or unreadable: a corrupt file
    /// must not stop the bot; its prompts can still be answered with the text commands).
    pub(crate) fn load(path: PathBuf) -> Self {
        let prompts = match read_json::<Vec<Prompt>>(&path) {
            Ok(saved) => saved.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(path = %path.display(), "the saved approval prompts could not be read ({e}); reactions on older prompts are ignored");
                Vec::new()
            }
        };
        Self { path, prompts: Mutex::new(prompts) }
    }

    pub(crate) fn remember(&self, prompt: Prompt) -> io::Result<()> {
        let Ok(mut prompts) = self.prompts.lock() else { return Ok(()) };
        prompts.retain(|p| p.event_id != prompt.event_id);
        prompts.push(prompt);
        let excess = prompts.len().saturating_sub(PROMPTS_REMEMBERED);
        prompts.drain(..excess);
        write_json(&self.path, &*prompts)
    }

    /// The prompt `event_id` and the choice `key` picks on it.
    pub(crate) fn pick(&self, event_id: &str, key: &str) -> Option<(Prompt, Choice)> {
        let prompts = self.prompts.lock().ok()?;
        let prompt = prompts.iter().find(|p| p.event_id == event_id)?;
        // Clients differ on the variation selector; compare without it.
        let bare = |k: &str| k.replace('\u{FE0F}', "");
        let choice = prompt.choices.iter().find(|c| bare(&c.key) == bare(key))?;
        Some((prompt.clone(), choice.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval_buttons() -> Vec<Vec<Button>> {
        let b = |label: &str, data: &str| Button { label: label.into(), data: data.into() };
        vec![
            vec![b("✅ Approve once", "/approve a1"), b("✅ This session", "/approve session a1")],
            vec![b("✅ Always", "/approve always a1"), b("❌ Deny", "/deny a1")],
        ]
    }

    #[test]
    fn the_first_check_mark_approves_and_the_cross_denies() {
        let keys: Vec<(String, String)> = choices(&approval_buttons()).into_iter().map(|c| (c.key, c.data)).collect();
        assert_eq!(
            keys,
            vec![
                ("✅".to_string(), "/approve a1".to_string()),
                ("2\u{FE0F}\u{20E3}".to_string(), "/approve session a1".to_string()),
                ("3\u{FE0F}\u{20E3}".to_string(), "/approve always a1".to_string()),
                ("❌".to_string(), "/deny a1".to_string()),
            ]
        );
        let legend = legend(&approval_buttons(), &choices(&approval_buttons()));
        assert!(legend.contains("✅ Approve once (`/approve a1`)") && legend.contains("❌ Deny (`/deny a1`)"), "{legend}");
    }

    #[test]
    fn a_refusal_answers_the_prompt_in_its_thread_and_mentions_only_the_presser() {
        let prompt = Prompt { event_id: "$p".into(), room_id: "!r:x".into(), thread_id: Some("$root".into()), choices: vec![] };
        let content = not_allowed_content(&prompt, "@mallory:x");
        assert_eq!(content["body"], NOT_ALLOWED);
        assert_eq!(content["msgtype"], "m.notice");
        assert_eq!(content["m.mentions"]["user_ids"], serde_json::json!(["@mallory:x"]));
        assert_eq!(content["m.relates_to"]["rel_type"], "m.thread");
        assert_eq!(content["m.relates_to"]["event_id"], "$root");
        assert_eq!(content["m.relates_to"]["m.in_reply_to"]["event_id"], "$p");
        let unthreaded = not_allowed_content(&Prompt { thread_id: None, ..prompt }, "@mallory:x");
        assert_eq!(unthreaded["m.relates_to"], serde_json::json!({"m.in_reply_to": {"event_id": "$p"}}));
    }

    #[test]
    fn prompts_survive_a_restart_and_only_their_keys_pick() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prompts.json");
        let prompts = Prompts::load(path.clone());
        let choices = choices(&approval_buttons());
        prompts.remember(Prompt { event_id: "$p".into(), room_id: "!r:x".into(), thread_id: None, choices }).unwrap();
        let again = Prompts::load(path);
        assert_eq!(again.pick("$p", "✅").unwrap().1.data, "/approve a1");
        assert_eq!(again.pick("$p", "\u{274C}\u{FE0F}").unwrap().1.data, "/deny a1");
        assert!(again.pick("$p", "👍").is_none());
        assert!(again.pick("$other", "✅").is_none());
    }
}
