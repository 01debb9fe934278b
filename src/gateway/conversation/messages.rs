//! Conversions between the agent's chat messages and the store's rows.

use crate::agent::{ChatMessage, Role, ToolCallRequest};
use crate::store::{MessageRow, NewMessage};

/// A message of a client-supplied earlier conversation (OpenAI-style roles; anything but
/// `assistant` counts as the user's).
pub(crate) fn seed_message(m: &hermes_adapter::ContextMessage) -> ChatMessage {
    let role = if m.role == "assistant" { Role::Assistant } else { Role::User };
    ChatMessage::new(role, m.content.clone())
}

pub(crate) fn new_message(session_id: &str, event_id: &str, m: &ChatMessage, finish_reason: Option<&str>) -> NewMessage {
    NewMessage {
        session_id: session_id.to_string(),
        role: m.role.as_str().to_string(),
        content: m.content.clone(),
        tool_call_id: m.tool_call_id.clone(),
        tool_calls: (!m.tool_calls.is_empty()).then(|| serde_json::to_string(&m.tool_calls).unwrap_or_default()),
        tool_name: m.tool_name.clone(),
        event_id: (!event_id.is_empty()).then(|| event_id.to_string()),
        finish_reason: finish_reason.map(str::to_string),
    }
}

pub(crate) fn to_chat_message(row: &MessageRow) -> Option<ChatMessage> {
    let role = Role::parse(&row.role)?;
    let mut m = ChatMessage::new(role, row.content.clone());
    m.tool_call_id = row.tool_call_id.clone();
    m.tool_name = row.tool_name.clone();
    if let Some(calls) = &row.tool_calls {
        m.tool_calls = serde_json::from_str::<Vec<ToolCallRequest>>(calls).unwrap_or_default();
    }
    Some(m)
}
