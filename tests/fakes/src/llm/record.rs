//! What the fake remembers about each chat-completions request, plus helpers
//! to read the OpenAI message shapes back out of it.

use serde_json::Value;

/// One `POST /v1/chat/completions`, as received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
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
    /// `(role, content text)` for every entry of `messages`. Content given as
    /// an array of parts contributes its text parts joined by `\n`; `null`
    /// content (assistant tool-call turns) becomes `""`.
    pub fn messages(&self) -> Vec<(String, String)> {
        let Some(messages) = self.body.get("messages").and_then(Value::as_array) else {
            return Vec::new();
        };
        messages
            .iter()
            .map(|m| {
                let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
                (role.to_owned(), content_text(m.get("content")))
            })
            .collect()
    }

    /// Content text of the last `user` message, if any.
    pub fn last_user_text(&self) -> Option<String> {
        self.messages().into_iter().rev().find(|(role, _)| role == "user").map(|(_, text)| text)
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
        RecordedRequest { body, authorization: None, stream: false, headers: Vec::new() }
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
}
