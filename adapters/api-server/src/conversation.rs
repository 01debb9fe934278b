//! Which conversation a request belongs to, and the one [`SessionSource`] every endpoint builds
//! for it, so that the sessions API and chat completions address the same conversations.

use crate::error::ApiError;
use axum::http::HeaderMap;
use hermes_adapter::{ChatType, Platform, SessionSource};

/// The platform name of this adapter.
pub(crate) const PLATFORM: &str = "api_server";
/// Continues a conversation across stateless requests; echoed on every answer.
pub(crate) const SESSION_HEADER: &str = "x-hermes-session-id";
/// Makes a retried request a duplicate instead of a second turn.
pub(crate) const IDEMPOTENCY_HEADER: &str = "idempotency-key";
/// Who the gateway sees when the client names no user.
const DEFAULT_USER: &str = "api";
/// Longest id accepted from a client (conversation ids, idempotency keys, users); longer ones
/// are almost certainly a mistake and would bloat session keys.
const MAX_ID_LEN: usize = 256;

/// The source of a conversation. `user` is the OpenAI `user` field; it names the sender but
/// does not select the session (API conversations are DMs keyed by their chat id). The client
/// chooses it freely, which is safe only because every API event is authorized by the bearer
/// key (`authorized_upstream`), never by an allowlist.
pub(crate) fn source_for(conversation_id: &str, user: Option<&str>) -> SessionSource {
    SessionSource::new(Platform::new(PLATFORM), conversation_id, ChatType::Dm).with_user(user.unwrap_or(DEFAULT_USER))
}

/// A fresh id for a new conversation or request.
pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The conversation of a chat completion: the session header, else the `user`, else a new
/// conversation for this request alone (stateless use).
pub(crate) fn conversation_id(headers: &HeaderMap, user: Option<&str>) -> Result<String, ApiError> {
    if let Some(id) = header_value(headers, SESSION_HEADER)? {
        return Ok(id);
    }
    Ok(match user {
        Some(user) => format!("user:{user}"),
        None => new_id(),
    })
}

/// The client's idempotency key, if it sent one.
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    header_value(headers, IDEMPOTENCY_HEADER)
}

/// Check an id supplied in a body or a path.
pub(crate) fn validate_id(value: &str, what: &str) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::bad_request(format!("{what} must not be empty"), what));
    }
    if value.len() > MAX_ID_LEN {
        return Err(ApiError::bad_request(format!("{what} is longer than {MAX_ID_LEN} bytes"), what));
    }
    if value.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!("{what} contains control characters"), what));
    }
    Ok(())
}

fn header_value(headers: &HeaderMap, name: &str) -> Result<Option<String>, ApiError> {
    let Some(raw) = headers.get(name) else {
        return Ok(None);
    };
    let value = raw.to_str().map_err(|_| ApiError::bad_request(format!("header {name} must be visible ASCII"), name))?.trim();
    validate_id(value, name)?;
    Ok(Some(value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn header_wins_over_user() {
        let mut headers = HeaderMap::new();
        headers.insert(SESSION_HEADER, HeaderValue::from_static("abc"));
        assert_eq!(conversation_id(&headers, Some("bob")).unwrap(), "abc");
        assert_eq!(conversation_id(&HeaderMap::new(), Some("bob")).unwrap(), "user:bob");
        let a = conversation_id(&HeaderMap::new(), None).unwrap();
        let b = conversation_id(&HeaderMap::new(), None).unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn empty_header_is_rejected_with_its_name() {
        let mut headers = HeaderMap::new();
        headers.insert(SESSION_HEADER, HeaderValue::from_static(" "));
        let err = conversation_id(&headers, None).unwrap_err();
        assert_eq!(err.param.as_deref(), Some(SESSION_HEADER));
    }

    #[test]
    fn source_is_a_dm_keyed_by_the_conversation() {
        let source = source_for("user:bob", Some("bob"));
        assert_eq!(source.platform.as_str(), "api_server");
        assert_eq!(source.chat_id, "user:bob");
        assert_eq!(source.chat_type, ChatType::Dm);
        assert_eq!(source.user_id.as_deref(), Some("bob"));
        assert_eq!(source_for("x", None).user_id.as_deref(), Some("api"));
    }
}
