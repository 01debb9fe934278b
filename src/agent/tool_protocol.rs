//! The Hermes text tool-call protocol, for models served without native function calling: the
//! tool schemas go into the system prompt, the model writes
//! `<tool_call>{"name": …, "arguments": {…}}</tool_call>` in its text, and results come back as
//! `<tool_response>` blocks in a user message. Malformed or unfinished blocks are reported back
//! to the model as tool errors instead of being dropped.

use super::message::{ChatMessage, Role, ToolCallRequest};
use super::tools::ToolSchema;
pub(crate) use crate::config::ToolProtocol;
use serde_json::{Value, json};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// One `<tool_call>` block found in a response.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ParsedCall {
    Call(ToolCallRequest),
    /// The block could not be understood; the string says why (sent back as a tool error).
    Malformed {
        id: String,
        raw: String,
        problem: String,
    },
}

/// The text with the blocks removed, and the blocks in order. `id_prefix` keeps ids unique within
/// a turn.
pub(crate) fn parse(text: &str, id_prefix: &str) -> (String, Vec<ParsedCall>) {
    let mut visible = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        visible.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let id = format!("{id_prefix}{}", calls.len());
        let (raw, next) = match after.find(CLOSE) {
            Some(end) => (&after[..end], &after[end + CLOSE.len()..]),
            None => {
                calls.push(ParsedCall::Malformed {
                    id,
                    raw: after.trim().to_string(),
                    problem: "the <tool_call> block is not closed with </tool_call>".into(),
                });
                rest = "";
                break;
            }
        };
        calls.push(parse_block(raw.trim(), id));
        rest = next;
    }
    visible.push_str(rest);
    (visible.trim().to_string(), calls)
}

fn parse_block(raw: &str, id: String) -> ParsedCall {
    let malformed = |problem: String| ParsedCall::Malformed { id: id.clone(), raw: raw.to_string(), problem };
    let value: Value = match serde_json::from_str(raw) {
        Ok(v) => v,
        Err(e) => return malformed(format!("the <tool_call> block is not valid JSON ({e})")),
    };
    let Some(name) = value.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
        return malformed("the <tool_call> block has no \"name\" string".into());
    };
    let arguments = match value.get("arguments").or_else(|| value.get("parameters")) {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(v @ Value::Object(_)) => v.to_string(),
        Some(_) => return malformed("\"arguments\" must be a JSON object".into()),
    };
    ParsedCall::Call(ToolCallRequest { id, name: name.to_string(), arguments })
}

/// The system-prompt section that teaches the protocol.
pub(crate) fn tools_prompt(tools: &[std::sync::Arc<ToolSchema>]) -> String {
    let mut out = String::from(
        "# Tools\n\nYou may call one or more functions to assist with the user query. The function signatures are inside <tools></tools>:\n<tools>\n",
    );
    for t in tools {
        out.push_str(
            &json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}})
                .to_string(),
        );
        out.push('\n');
    }
    out.push_str(
        "</tools>\n\nTo call a function, write a JSON object with the function name and arguments inside <tool_call></tool_call> tags:\n\
         <tool_call>\n{\"name\": \"<function-name>\", \"arguments\": {<arguments>}}\n</tool_call>\n\
         The results arrive in <tool_response></tool_response> blocks. When you have what you need, answer normally without tags.",
    );
    out
}

/// The conversation rewritten for a model without native tools: calls become text blocks in the
/// assistant's message, results become `<tool_response>` blocks in user messages.
pub(crate) fn to_text_messages(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len());
    for m in messages {
        match m.role {
            Role::Assistant if !m.tool_calls.is_empty() => {
                let mut text = m.content.clone();
                // The text of a Hermes-protocol answer still contains its blocks; native calls
                // are rendered.
                if !text.contains(OPEN) {
                    for c in &m.tool_calls {
                        let args: Value = serde_json::from_str(&c.arguments).unwrap_or(Value::String(c.arguments.clone()));
                        text.push_str(&format!("\n{OPEN}\n{}\n{CLOSE}", json!({"name": c.name, "arguments": args})));
                    }
                }
                out.push(ChatMessage::assistant(text.trim().to_string()));
            }
            Role::Tool => {
                let block = format!(
                    "<tool_response>\n{}\n</tool_response>",
                    json!({"name": m.tool_name.clone().unwrap_or_default(), "content": m.content})
                );
                match out.last_mut() {
                    // Results of one round go into one user message.
                    Some(last) if last.role == Role::User && last.content.starts_with("<tool_response>") => {
                        last.content.push('\n');
                        last.content.push_str(&block);
                    }
                    _ => out.push(ChatMessage::user(block)),
                }
            }
            _ => out.push(m.clone()),
        }
    }
    out
}

/// Holds back streamed text that may be the start of a `<tool_call>` block, so raw blocks never
/// reach the chat.
#[derive(Debug, Default)]
pub(crate) struct StreamFilter {
    pending: String,
    in_call: bool,
}

impl StreamFilter {
    /// The part of `delta` that is safe to show now.
    pub(crate) fn push(&mut self, delta: &str) -> String {
        if self.in_call {
            return String::new();
        }
        self.pending.push_str(delta);
        if let Some(i) = self.pending.find(OPEN) {
            self.in_call = true;
            let shown = self.pending[..i].to_string();
            self.pending.clear();
            return shown;
        }
        // Keep a tail that could still grow into "<tool_call>".
        let keep = (1..OPEN.len())
            .rev()
            .find(|&n| {
                self.pending.len() >= n
                    && self.pending.is_char_boundary(self.pending.len() - n)
                    && OPEN.starts_with(&self.pending[self.pending.len() - n..])
            })
            .unwrap_or(0);
        let cut = self.pending.len() - keep;
        let shown = self.pending[..cut].to_string();
        self.pending.drain(..cut);
        shown
    }

    /// What is left when the response ends.
    pub(crate) fn finish(&mut self) -> String {
        if self.in_call { String::new() } else { std::mem::take(&mut self.pending) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_calls_and_reports_malformed_blocks() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>\n<tool_call>{\"name\": \"x\", \"arguments\": {oops}}</tool_call>";
        let (visible, calls) = parse(text, "t0_");
        assert_eq!(visible, "Let me look.");
        assert_eq!(
            calls[0],
            ParsedCall::Call(ToolCallRequest { id: "t0_0".into(), name: "read_file".into(), arguments: r#"{"path":"a.txt"}"#.into() })
        );
        assert!(matches!(&calls[1], ParsedCall::Malformed { problem, .. } if problem.contains("not valid JSON")));
        let (_, calls) = parse("<tool_call>{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"", "p");
        assert!(matches!(&calls[0], ParsedCall::Malformed { problem, .. } if problem.contains("not closed")));
        let (_, calls) = parse("<tool_call>{\"arguments\": {}}</tool_call>", "p");
        assert!(matches!(&calls[0], ParsedCall::Malformed { problem, .. } if problem.contains("no \"name\"")));
        assert_eq!(parse("plain answer", "p"), ("plain answer".to_string(), vec![]));
    }

    #[test]
    fn stream_filter_never_shows_a_block() {
        let mut f = StreamFilter::default();
        let mut shown = String::new();
        for piece in ["Checking", " now <to", "ol_ca", "ll>{\"name\":", "\"x\"}</tool_call>"] {
            shown.push_str(&f.push(piece));
        }
        shown.push_str(&f.finish());
        assert_eq!(shown, "Checking now ");
        let mut f = StreamFilter::default();
        let out = f.push("a < b and <tag>") + f.finish().as_str();
        assert_eq!(out, "a < b and <tag>");
    }

    #[test]
    fn conversation_is_rewritten_for_text_models() {
        let mut a = ChatMessage::assistant("");
        a.tool_calls = vec![ToolCallRequest { id: "1".into(), name: "terminal".into(), arguments: r#"{"command":"ls"}"#.into() }];
        let mut t = ChatMessage::new(Role::Tool, "a.txt");
        t.tool_name = Some("terminal".into());
        let out = to_text_messages(&[ChatMessage::user("list"), a, t]);
        assert_eq!(out[1].role, Role::Assistant);
        assert!(out[1].content.contains("<tool_call>") && out[1].tool_calls.is_empty());
        assert_eq!(out[2].role, Role::User);
        assert!(out[2].content.contains("<tool_response>") && out[2].content.contains("a.txt"));
    }
}
