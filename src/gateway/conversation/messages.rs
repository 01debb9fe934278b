//! Conversions between the agent's chat messages and the store's rows. A message's pictures are
//! stored as references (the prepared file, its type and size) and read back without their
//! bytes: `media::history_images` attaches the newest ones to each request.

use crate::agent::{ChatMessage, ImagePart, Role, ToolCallRequest};
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
        // `ImagePart::data` is never serialized: the row keeps where the picture is, not its bytes.
        images: (!m.images.is_empty()).then(|| serde_json::to_string(&m.images).unwrap_or_default()),
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
    if let Some(images) = &row.images {
        m.images = serde_json::from_str::<Vec<ImagePart>>(images).unwrap_or_default();
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_users_pictures_are_stored_as_references_and_read_back_without_data() {
        let image = ImagePart {
            media_type: "image/jpeg".into(),
            path: "/home/h/cache/images/photo.prepared.jpg".into(),
            width: 1568,
            height: 1176,
            data: Some(Arc::from("QUJD")),
        };
        let said = ChatMessage { images: vec![image.clone()], ..ChatMessage::user("what is this?") };
        let stored = new_message("s1", "ev-1", &said, None);
        let json = stored.images.clone().unwrap();
        assert!(json.contains("photo.prepared.jpg") && !json.contains("QUJD"), "a reference, never the bytes: {json}");
        let row = MessageRow {
            id: 1,
            session_id: stored.session_id,
            role: stored.role,
            content: stored.content,
            tool_call_id: None,
            tool_calls: None,
            tool_name: None,
            event_id: stored.event_id,
            finish_reason: None,
            images: stored.images,
            timestamp: Default::default(),
        };
        let back = to_chat_message(&row).unwrap();
        assert_eq!(back.images, vec![ImagePart { data: None, ..image }]);
        assert_eq!(new_message("s1", "", &ChatMessage::user("text only"), None).images, None, "no pictures, no column value");
    }
}
