//! The parts a [`Reply`] becomes on one platform, worked out without I/O: the body rendered in
//! the platform's dialect and split to its limit, its files after the text, every part keyed
//! under the reply's [`ReplyKey`]. [`Deliverer::send`](crate::gateway::delivery::deliverer::Deliverer::send)
//! queues and sends what [`plan`] returns.

use crate::gateway::delivery::reply::{Body, Reply, ReplyKey};
use hermes_adapter::{Capabilities, OutboundFile, OutboundMessage, chunk, render};

/// The messages `reply` is sent as, in order: its text parts (`{key}:{i}`, each replying to
/// `reply_to`), then its files (`{key}:file:{i}`). The last part carries the finish and, where
/// the platform has buttons, the buttons. A reply of files only sends no empty text.
pub(crate) fn plan(reply: &Reply, caps: &Capabilities, key: &ReplyKey) -> Vec<OutboundMessage> {
    let mut chunks = match &reply.body {
        Body::Rendered(text) => vec![text.clone()],
        Body::Markdown(markdown_text) => render_for(caps, markdown_text),
    };
    if !reply.files.is_empty() && chunks.iter().all(|c| c.trim().is_empty()) {
        chunks.clear();
    }
    let part = |idempotency_key: String, text: String, reply_to: Option<&String>, file: Option<OutboundFile>| OutboundMessage {
        target: reply.target.clone(),
        text,
        reply_to: reply_to.cloned(),
        idempotency_key,
        is_final: false,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file,
    };
    let texts = chunks.into_iter().enumerate().map(|(i, chunk)| part(key.part(i), chunk, reply.reply_to.as_ref(), None));
    let files = reply.files.iter().enumerate().map(|(i, file)| part(key.file_part(i), String::new(), None, Some(file.clone())));
    let mut messages: Vec<OutboundMessage> = texts.chain(files).collect();
    if let Some(last) = messages.last_mut() {
        last.is_final = reply.finish.is_some();
        last.usage = reply.finish.as_ref().map(|f| f.usage);
        last.finish_reason = reply.finish.as_ref().map(|f| f.finish_reason.clone());
        if caps.supports_buttons {
            last.buttons = reply.buttons.clone();
        }
    }
    messages
}

/// The agent's Markdown as the messages a platform receives: rendered in its dialect (the
/// whole answer at once, so lists and quotes render as one), then split to its limit without
/// losing or changing a character.
pub(crate) fn render_for(caps: &Capabilities, markdown_text: &str) -> Vec<String> {
    let doc = render::document(markdown_text, caps.dialect);
    if caps.splits_long_messages { chunk::split(&doc, caps.max_message_len, caps.length_unit) } else { vec![doc.to_text()] }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
