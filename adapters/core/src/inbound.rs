//! The normalized inbound event an adapter hands to the gateway.

use crate::attachment::Attachment;
use crate::outbound::ChatTarget;
use crate::source::SessionSource;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What kind of message arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MessageKind {
    /// Plain text (also the kind of anything with no better fit).
    #[default]
    Text,
    /// An image; the file is in `attachments`, any caption in `text`.
    Photo,
    /// A file sent as a document; the file is in `attachments`.
    Document,
    /// A music or audio file.
    Audio,
    /// A voice note recorded in the chat app.
    Voice,
    /// A video or video note.
    Video,
    /// A shared location, described in `text`.
    Location,
    /// A sticker, described in `text`.
    Sticker,
    /// A button under one of the bot's messages was pressed; the text is the button's data.
    ButtonPress,
}

/// A prior message supplied by the client with the event (the `messages` of a stateless OpenAI
/// request). Used to seed a conversation that has no stored history yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextMessage {
    /// The OpenAI role it had in the request (`user`, `assistant`, ...).
    pub role: String,
    /// Its text.
    pub content: String,
}

/// One inbound message, durable as JSON in the inbox before the platform is acknowledged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboundEvent {
    /// Platform-unique, stable across redeliveries (e.g. `telegram:<bot id>:<update_id>`). The
    /// inbox deduplicates on it.
    pub event_id: String,
    /// Where it came from: which platform, chat, thread and sender; picks the session.
    pub source: SessionSource,
    /// The platform's id of this message, used to route a reply to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// What the user wrote (or the caption, or a description of a non-text message).
    pub text: String,
    /// What kind of message it was.
    #[serde(default)]
    pub kind: MessageKind,
    /// The files that came with it: saved in the [`crate::MediaCache`], or refused and why.
    /// (Events stored before attachments had a shape listed saved paths as `media_paths`.)
    #[serde(default, alias = "media_paths", skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// When the adapter received it.
    pub received_at: DateTime<Utc>,
    /// Earlier conversation supplied by the client, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<ContextMessage>,
    /// Extra system instructions bound to this message (a client-supplied system message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_prompt: Option<String>,
    /// Where the answer goes when not back to the origin (a webhook route's `platform:chat_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_target: Option<ChatTarget>,
    /// The adapter authenticated this event itself (bearer key, HMAC signature); allowlists do not
    /// apply.
    #[serde(default)]
    pub authorized_upstream: bool,
    /// The session ends after this one turn (a webhook delivery).
    #[serde(default)]
    pub one_shot: bool,
    /// The toolsets this event may use, when its source restricts them (a webhook route gets
    /// none unless its configuration lists them); `None`: the platform's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolsets: Option<Vec<String>>,
}

impl InboundEvent {
    /// Where the answer to this event goes: its `reply_target` when the sender named another
    /// chat, else the chat (and thread) it came from.
    pub fn answer_target(&self) -> ChatTarget {
        self.reply_target.clone().unwrap_or_else(|| ChatTarget {
            platform: self.source.platform.clone(),
            chat_id: self.source.chat_id.clone(),
            thread_id: self.source.thread_id.clone(),
        })
    }

    /// The message an answer should reply to: none when the answer goes to another chat.
    pub fn answer_reply_to(&self) -> Option<&str> {
        if self.reply_target.is_some() { None } else { self.message_id.as_deref() }
    }

    /// A plain text message received now, with every optional field empty.
    pub fn text(event_id: impl Into<String>, source: SessionSource, text: impl Into<String>) -> Self {
        Self {
            event_id: event_id.into(),
            source,
            message_id: None,
            text: text.into(),
            kind: MessageKind::Text,
            attachments: Vec::new(),
            received_at: Utc::now(),
            context: Vec::new(),
            channel_prompt: None,
            reply_target: None,
            authorized_upstream: false,
            one_shot: false,
            toolsets: None,
        }
    }
}

/// What the inbox did with an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptOutcome {
    /// Stored durably for the first time; the adapter may acknowledge the platform.
    Accepted,
    /// Seen before (a redelivery); acknowledge the platform and do nothing else.
    Duplicate,
}
