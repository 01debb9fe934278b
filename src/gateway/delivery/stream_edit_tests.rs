//! The stream editor against an in-process chat adapter that records what it was sent and how
//! each message was edited, and can refuse edits the way a platform under flood control does.

use crate::config::Config;
use crate::gateway::delivery::stream_edit::{StreamEditor, StreamSettings};
use crate::gateway::wiring::Wiring;
use async_trait::async_trait;
use hermes_adapter::render::oracle;
use hermes_adapter::{
    AdapterContext, AdapterError, Capabilities, ChatTarget, LengthUnit, MarkdownDialect, OutboundMessage, Platform, PlatformAdapter,
    SendError, SendReceipt, StreamStyle,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
struct ChatLog {
    /// Message id → its text after every send and edit.
    messages: Vec<(String, Vec<String>)>,
}

struct EditingChat {
    platform: Platform,
    caps: Capabilities,
    log: Mutex<ChatLog>,
    refuse_edits: bool,
}

impl EditingChat {
    fn new(max_len: usize, refuse_edits: bool) -> Arc<Self> {
        Self::speaking(MarkdownDialect::Markdown, LengthUnit::Chars, max_len, refuse_edits)
    }

    fn speaking(dialect: MarkdownDialect, length_unit: LengthUnit, max_len: usize, refuse_edits: bool) -> Arc<Self> {
        let caps = Capabilities {
            max_message_len: max_len,
            length_unit,
            dialect,
            streaming: StreamStyle::EditInPlace,
            supports_edit: true,
            supports_buttons: false,
            supports_typing: false,
            supports_threads: false,
            supports_async_delivery: true,
            splits_long_messages: true,
            supports_files: false,
            read_live: true,
            people_reply: true,
            voice_notes: false,
        };
        Arc::new(Self { platform: Platform::new("chat"), caps, log: Mutex::new(ChatLog::default()), refuse_edits })
    }

    /// The final text of every message, in order.
    fn finals(&self) -> Vec<String> {
        self.log.lock().unwrap().messages.iter().map(|(_, v)| v.last().cloned().unwrap_or_default()).collect()
    }

    fn edits(&self) -> usize {
        self.log.lock().unwrap().messages.iter().map(|(_, v)| v.len() - 1).sum()
    }
}

#[async_trait]
impl PlatformAdapter for EditingChat {
    fn platform(&self) -> &Platform {
        &self.platform
    }
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    async fn run(&self, _ctx: AdapterContext) -> Result<(), AdapterError> {
        Ok(())
    }
    async fn send(&self, msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        let mut log = self.log.lock().unwrap();
        let id = format!("m{}", log.messages.len() + 1);
        log.messages.push((id.clone(), vec![msg.text.clone()]));
        Ok(SendReceipt { message_id: Some(id) })
    }
    async fn edit(&self, _target: &ChatTarget, message_id: &str, text: &str) -> Result<(), SendError> {
        if self.refuse_edits {
            return Err(SendError::RateLimited { retry_after: Duration::from_secs(5) });
        }
        let mut log = self.log.lock().unwrap();
        let Some((_, versions)) = log.messages.iter_mut().find(|(id, _)| id == message_id) else {
            return Err(SendError::NotFound(message_id.into()));
        };
        versions.push(text.to_string());
        Ok(())
    }
}

async fn gateway(chat: Arc<EditingChat>) -> (tempfile::TempDir, Wiring) {
    let mut config = Config::default();
    config.streaming.enabled = true;
    config.streaming.edit_interval = 0.0;
    config.streaming.buffer_threshold = 1;
    let provider = crate::agent::providers::openai::OpenAiCompatible::new(Duration::from_secs(1));
    crate::gateway::tests::support::gateway(config, chat, Arc::new(provider)).await
}

fn editor(gateway: &Wiring, chat: &Arc<EditingChat>, event_id: &str) -> StreamEditor {
    let target = ChatTarget { platform: Platform::new("chat"), chat_id: "c1".into(), thread_id: None };
    let turns = gateway.turns();
    let settings: &StreamSettings = &turns.stream;
    StreamEditor::new(turns.deliverer.clone(), settings, chat.clone(), target, None, event_id.into())
}

const DELTAS: [&str; 5] = ["Hello there, ", "this is ", "a streamed ", "answer that ", "grows."];

#[tokio::test]
async fn the_chat_sees_one_message_edited_in_place_and_no_duplicate_final() {
    let chat = EditingChat::new(4096, false);
    let (_dir, gateway) = gateway(chat.clone()).await;
    let mut ed = editor(&gateway, &chat, "turn1");
    for d in DELTAS {
        ed.on_delta(d).await;
    }
    let final_text = DELTAS.concat();
    assert!(ed.finish(&final_text).await, "the stream delivered the answer");
    assert_eq!(chat.finals(), std::slice::from_ref(&final_text), "one message, ending with the whole answer and no cursor");
    assert!(chat.edits() >= 3, "it was edited as the text grew ({} edits)", chat.edits());
    let versions = chat.log.lock().unwrap().messages[0].1.clone();
    assert!(versions[..versions.len() - 1].iter().all(|v| v.ends_with(" ▉")), "a cursor while streaming: {versions:?}");
}

#[tokio::test]
async fn with_edits_refused_the_unsent_tail_arrives_once() {
    let chat = EditingChat::new(4096, true);
    let (_dir, gateway) = gateway(chat.clone()).await;
    let mut ed = editor(&gateway, &chat, "turn2");
    for d in DELTAS {
        ed.on_delta(d).await;
    }
    let final_text = DELTAS.concat();
    assert!(ed.finish(&final_text).await);
    let finals = chat.finals();
    assert_eq!(finals.len(), 2, "the first message and one tail: {finals:?}");
    let first = finals[0].trim_end_matches(" ▉");
    assert_eq!(format!("{first}{}", finals[1]), final_text, "together they are the answer, nothing doubled: {finals:?}");
}

#[tokio::test]
async fn a_long_answer_continues_in_a_new_message_before_the_limit() {
    let chat = EditingChat::new(600, false);
    let (_dir, gateway) = gateway(chat.clone()).await;
    let mut ed = editor(&gateway, &chat, "turn3");
    let words: Vec<String> = (0..300).map(|i| format!("word{i} ")).collect();
    for w in &words {
        ed.on_delta(w).await;
    }
    let final_text = words.concat();
    assert!(ed.finish(&final_text).await);
    let finals = chat.finals();
    assert!(finals.len() >= 3, "{} messages", finals.len());
    assert!(finals.iter().all(|m| m.chars().count() <= 600), "each within the platform limit");
    let words: Vec<&str> = finals.iter().flat_map(|m| m.split_whitespace()).collect();
    assert_eq!(words, final_text.split_whitespace().collect::<Vec<_>>(), "nothing lost or doubled across messages");
    oracle::check_streamed(&final_text, MarkdownDialect::Markdown, 600, LengthUnit::Chars, &finals).unwrap();
}

/// An answer with what a splitter can break: indented code (spaces and tabs), a table, a nested
/// list, emoji and markup characters, several times the platform's limit.
fn rich_answer() -> String {
    let mut answer = String::from("Here is the **plan** & the <code>:\n\n");
    for round in 0..6 {
        answer.push_str(&format!("## Step {round} 👨‍👩‍👧\n\n- first *thing* to do\n    - nested detail with `x < y`\n- second\n\n"));
        answer.push_str("| name | value |\n|---|---|\n| a | 1 |\n| b | 2 |\n\n```python\ndef main():\n");
        for i in 0..12 {
            answer.push_str(&format!("    code_line = {i} * 2\n        nested = code_line + 1\n\tif nested:\n\t\treturn nested\n"));
        }
        answer.push_str("```\n\n");
    }
    answer.push_str("Done 🎉");
    answer
}

/// Streamed with edit-in-place, an answer ends up shown exactly as it is without streaming, on
/// every dialect a platform that edits speaks.
#[tokio::test]
async fn a_streamed_answer_ends_up_as_the_answer_sent_without_streaming() {
    let answer = rich_answer();
    for (dialect, unit, max_len) in [
        (MarkdownDialect::Markdown, LengthUnit::Chars, 2000),
        (MarkdownDialect::TelegramHtml, LengthUnit::Utf16, 4096),
        (MarkdownDialect::Plain, LengthUnit::Chars, 1500),
    ] {
        let chat = EditingChat::speaking(dialect, unit, max_len, false);
        let (_dir, gateway) = gateway(chat.clone()).await;
        let mut ed = editor(&gateway, &chat, "turn5");
        let chars: Vec<char> = answer.chars().collect();
        for delta in chars.chunks(37) {
            ed.on_delta(&delta.iter().collect::<String>()).await;
        }
        assert!(ed.finish(&answer).await);
        let streamed = chat.finals();
        assert!(streamed.len() >= 2, "{dialect:?}: {} messages", streamed.len());
        oracle::check_streamed(&answer, dialect, max_len, unit, &streamed).unwrap_or_else(|e| panic!("{dialect:?} streamed: {e}"));
        let unstreamed = crate::gateway::delivery::plan::render_for(&chat.caps, &answer);
        let whole = hermes_adapter::render::render(&answer, dialect);
        oracle::check_parts(&answer, &whole, dialect, max_len, unit, &unstreamed).unwrap_or_else(|e| panic!("{dialect:?} sent: {e}"));
    }
}

#[tokio::test]
async fn tool_progress_lines_and_text_after_tools_start_new_messages() {
    let chat = EditingChat::new(4096, false);
    let (_dir, gateway) = gateway(chat.clone()).await;
    let mut ed = editor(&gateway, &chat, "turn4");
    ed.on_delta("Let me look that up for you.").await;
    ed.on_tool_call("search_files", r#"{"pattern":"TODO"}"#).await;
    ed.on_tool_call("read_file", r#"{"path":"notes.md"}"#).await;
    ed.on_delta("Found three TODO items in notes.md.").await;
    assert!(ed.finish("Found three TODO items in notes.md.").await);
    let finals = chat.finals();
    assert_eq!(finals.len(), 3, "{finals:?}");
    assert_eq!(finals[0], "Let me look that up for you.");
    assert_eq!(finals[1], "🔧 search_files: `TODO`\n🔧 read_file: `notes.md`", "one progress message, edited per tool");
    assert_eq!(finals[2], "Found three TODO items in notes.md.");
}
