//! A delivery's body and event type, read without trusting either: the body must be UTF-8 JSON,
//! and the event type comes from the sender's headers or the body.

use axum::http::HeaderMap;
use serde_json::Value;

/// A body that is not a JSON document; the text is the 400 response's `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("the body must be JSON (UTF-8)")]
    NotUtf8,
    #[error("the body must be JSON: {0}")]
    NotJson(String),
}

/// The body as text and as JSON.
pub fn parse_payload(raw: &[u8]) -> Result<(&str, Value), PayloadError> {
    let text = std::str::from_utf8(raw).map_err(|_| PayloadError::NotUtf8)?;
    let value = serde_json::from_str(text).map_err(|e| PayloadError::NotJson(e.to_string()))?;
    Ok((text, value))
}

/// The event type: GitHub's and GitLab's headers, a generic header, then the body's `event` or
/// `type`.
pub fn event_type<'a>(headers: &'a HeaderMap, payload: &'a Value) -> Option<&'a str> {
    ["x-github-event", "x-gitlab-event", "x-event-type"]
        .iter()
        .find_map(|name| headers.get(*name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty()))
        .or_else(|| ["event", "type"].iter().find_map(|key| payload.get(*key).and_then(Value::as_str)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use serde_json::json;

    #[test]
    fn event_type_precedence() {
        let payload = json!({"event": "from-body", "type": "other"});
        let mut headers = HeaderMap::new();
        assert_eq!(event_type(&headers, &payload), Some("from-body"));
        assert_eq!(event_type(&headers, &json!({"type": "t"})), Some("t"));
        headers.insert("x-event-type", HeaderValue::from_static("generic"));
        assert_eq!(event_type(&headers, &payload), Some("generic"));
        headers.insert("x-github-event", HeaderValue::from_static("push"));
        assert_eq!(event_type(&headers, &payload), Some("push"));
    }

    #[test]
    fn bodies_must_be_utf8_json() {
        assert_eq!(parse_payload(br#"{"a":1}"#).map(|(_, v)| v), Ok(json!({"a": 1})));
        assert_eq!(parse_payload(b"\xff"), Err(PayloadError::NotUtf8));
        assert!(matches!(parse_payload(b"not json"), Err(PayloadError::NotJson(_))));
    }
}
