//! What the fake remembers about each model request, plus helpers to read
//! the conversation back out of it in either wire format (OpenAI Chat
//! Completions or Anthropic Messages).

use base64::Engine;
use serde_json::Value;

/// One `POST /v1/chat/completions` or `POST /v1/messages`, as received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The request path (`/v1/chat/completions` or `/v1/messages`).
    pub path: String,
    /// The parsed JSON body; `Null` if the body was not valid JSON.
    pub body: Value,
    /// The `Authorization` header verbatim (e.g. `"Bearer sk-…"`).
    pub authorization: Option<String>,
    /// Whether the body asked for `"stream": true`.
    pub stream: bool,
    /// All request headers, lowercase names, in arrival order.
    pub headers: Vec<(String, String)>,
}

impl RecordedRequest {
    /// Which wire format the request used: `"anthropic"` for `/v1/messages`,
    /// `"openai"` otherwise.
    pub fn wire(&self) -> &str {
        if self.path.ends_with("/messages") { "anthropic" } else { "openai" }
    }

    /// `(role, content text)` for every entry of the conversation, in OpenAI
    /// roles whatever the wire format. Content given as an array of parts
    /// contributes its text parts joined by `\n`; `null` content (assistant
    /// tool-call turns) becomes `""`.
    ///
    /// For Anthropic bodies the top-level `system` comes first as a `system`
    /// entry, each `tool_result` block becomes a `tool` entry (its content
    /// flattened), and the text blocks between them a `user` entry, so tests
    /// read both formats the same way.
    pub fn messages(&self) -> Vec<(String, String)> {
        let Some(messages) = self.body.get("messages").and_then(Value::as_array) else {
            return Vec::new();
        };
        if self.wire() == "anthropic" {
            return anthropic_messages(self.system_text(), messages);
        }
        messages
            .iter()
            .map(|m| {
                let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
                (role.to_owned(), content_text(m.get("content")))
            })
            .collect()
    }

    /// The system prompt: the first `system` message (OpenAI) or the
    /// top-level `system` text blocks joined by `\n` (Anthropic).
    pub fn system_text(&self) -> Option<String> {
        if self.wire() == "anthropic" {
            return self.body.get("system").map(|s| content_text(Some(s)));
        }
        let messages = self.body.get("messages").and_then(Value::as_array)?;
        messages.iter().find(|m| m.get("role").and_then(Value::as_str) == Some("system")).map(|m| content_text(m.get("content")))
    }

    /// Content text of the last `user` message, if any.
    pub fn last_user_text(&self) -> Option<String> {
        self.messages().into_iter().rev().find(|(role, _)| role == "user").map(|(_, text)| text)
    }

    /// Every image the request carries, in order, as `(media type, decoded
    /// bytes)`: OpenAI `image_url` parts whose URL is a base64 `data:` URL,
    /// and Anthropic `image` blocks with a `base64` source. Images given by
    /// a plain URL, and data that is not valid base64, are left out (a test
    /// then sees fewer images than it expected).
    pub fn images(&self) -> Vec<(String, Vec<u8>)> {
        let Some(messages) = self.body.get("messages").and_then(Value::as_array) else {
            return Vec::new();
        };
        let parts = messages.iter().filter_map(|m| m.get("content").and_then(Value::as_array)).flatten();
        parts.filter_map(|part| if self.wire() == "anthropic" { anthropic_image(part) } else { openai_image(part) }).collect()
    }

    /// The `model` field of the request, if present.
    pub fn model(&self) -> Option<&str> {
        self.body.get("model").and_then(Value::as_str)
    }

    /// Case-insensitive header lookup (first value).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Whether the client asked for a final usage chunk in a stream.
    pub(crate) fn include_usage(&self) -> bool {
        self.body.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false)
    }
}

/// Splits Anthropic turns into OpenAI-style entries (see
/// [`RecordedRequest::messages`]).
fn anthropic_messages(system: Option<String>, messages: &[Value]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = system.map(|s| ("system".to_owned(), s)).into_iter().collect();
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        let Some(blocks) = m.get("content").and_then(Value::as_array) else {
            out.push((role.to_owned(), content_text(m.get("content"))));
            continue;
        };
        // Text gathered since the last tool result; tool_use blocks add none.
        let mut text: Option<Vec<&str>> = None;
        for block in blocks {
            if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                if let Some(parts) = text.take() {
                    out.push((role.to_owned(), parts.join("\n")));
                }
                out.push(("tool".to_owned(), content_text(block.get("content"))));
            } else {
                let parts = text.get_or_insert_with(Vec::new);
                if let Some(t) = block.get("text").and_then(Value::as_str) {
                    parts.push(t);
                }
            }
        }
        if let Some(parts) = text {
            out.push((role.to_owned(), parts.join("\n")));
        } else if blocks.is_empty() {
            out.push((role.to_owned(), String::new()));
        }
    }
    out
}

/// An OpenAI `{"type": "image_url", "image_url": {"url": "data:<type>;base64,<data>"}}` part.
fn openai_image(part: &Value) -> Option<(String, Vec<u8>)> {
    if part.get("type").and_then(Value::as_str) != Some("image_url") {
        return None;
    }
    let url = part.pointer("/image_url/url").and_then(Value::as_str)?;
    let (media_type, data) = url.strip_prefix("data:")?.split_once(";base64,")?;
    Some((media_type.to_owned(), base64::engine::general_purpose::STANDARD.decode(data).ok()?))
}

/// An Anthropic `{"type": "image", "source": {"type": "base64", "media_type", "data"}}` block.
fn anthropic_image(block: &Value) -> Option<(String, Vec<u8>)> {
    if block.get("type").and_then(Value::as_str) != Some("image") {
        return None;
    }
    let source = block.get("source")?;
    if source.get("type").and_then(Value::as_str) != Some("base64") {
        return None;
    }
    let media_type = source.get("media_type").and_then(Value::as_str)?;
    let data = source.get("data").and_then(Value::as_str)?;
    Some((media_type.to_owned(), base64::engine::general_purpose::STANDARD.decode(data).ok()?))
}

/// Flattens the OpenAI `content` field (string, array of parts, or null).
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                _ => p.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(body: Value) -> RecordedRequest {
        RecordedRequest { path: "/v1/chat/completions".into(), body, authorization: None, stream: false, headers: Vec::new() }
    }

    fn anthropic(body: Value) -> RecordedRequest {
        RecordedRequest { path: "/v1/messages".into(), ..req(body) }
    }

    #[test]
    fn messages_flatten_all_content_shapes() {
        let r = req(json!({"messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": null, "tool_calls": []},
            {"role": "tool", "content": "result"},
        ]}));
        assert_eq!(
            r.messages(),
            vec![
                ("system".into(), "sys".into()),
                ("user".into(), "a\nb".into()),
                ("assistant".into(), String::new()),
                ("tool".into(), "result".into()),
            ]
        );
        assert_eq!(r.last_user_text().as_deref(), Some("a\nb"));
    }

    #[test]
    fn missing_messages_are_empty() {
        assert!(req(Value::Null).messages().is_empty());
        assert_eq!(req(json!({"messages": []})).last_user_text(), None);
    }

    #[test]
    fn wire_is_told_by_path() {
        assert_eq!(req(Value::Null).wire(), "openai");
        assert_eq!(anthropic(Value::Null).wire(), "anthropic");
    }

    #[test]
    fn system_text_in_both_formats() {
        let openai = req(json!({"messages": [{"role": "user", "content": "u"}, {"role": "system", "content": "sys"}]}));
        assert_eq!(openai.system_text().as_deref(), Some("sys"));
        assert_eq!(req(json!({"messages": []})).system_text(), None);
        let blocks = anthropic(json!({"system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "messages": []}));
        assert_eq!(blocks.system_text().as_deref(), Some("a\nb"));
        assert_eq!(anthropic(json!({"system": "plain", "messages": []})).system_text().as_deref(), Some("plain"));
        assert_eq!(anthropic(json!({"messages": []})).system_text(), None);
    }

    #[test]
    fn images_are_decoded_from_both_wires() {
        let openai = req(json!({"messages": [
            {"role": "user", "content": "no parts"},
            {"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4A=="}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ]},
        ]}));
        assert_eq!(
            openai.images(),
            vec![("image/jpeg".to_owned(), vec![0xff, 0xd8, 0xff, 0xe0]), ("image/png".to_owned(), b"\x89PNG\r\n\x1a\n".to_vec()),]
        );
        let anthropic = anthropic(json!({"messages": [
            {"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4A=="}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
                {"type": "text", "text": "what is this?"},
            ]},
        ]}));
        assert_eq!(anthropic.images(), vec![("image/jpeg".to_owned(), vec![0xff, 0xd8, 0xff, 0xe0])]);
        assert_eq!(anthropic.last_user_text().as_deref(), Some("what is this?"));
        assert!(req(json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,!!"}}]}]})).images().is_empty());
        assert!(req(Value::Null).images().is_empty());
    }

    #[test]
    fn anthropic_messages_read_like_openai_ones() {
        let r = anthropic(json!({
            "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}, {"type": "tool_use", "id": "t2", "name": "x", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "r1"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "r2"}]},
                    {"type": "text", "text": "[System note] hurry"},
                ]},
                {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            ],
        }));
        assert_eq!(
            r.messages(),
            vec![
                ("system".into(), "sys".into()),
                ("user".into(), "hi".into()),
                ("assistant".into(), String::new()),
                ("tool".into(), "r1".into()),
                ("tool".into(), "r2".into()),
                ("user".into(), "[System note] hurry".into()),
                ("assistant".into(), "ok".into()),
                ("user".into(), "a\nb".into()),
            ]
        );
        assert_eq!(r.last_user_text().as_deref(), Some("a\nb"));
    }
}
