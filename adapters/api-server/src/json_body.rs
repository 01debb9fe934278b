//! Reading request bodies: size-limit and JSON failures become 4xx answers that name the
//! offending field, instead of axum's plain-text rejections.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::error::Category;

/// Largest accepted request body.
pub(crate) const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// A body that could not be read (too large, connection broken).
pub(crate) fn body_rejection(rejection: BytesRejection) -> ApiError {
    let status = rejection.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(status, format!("Request body is larger than {MAX_BODY_BYTES} bytes")).with_code("request_too_large");
    }
    ApiError::new(status, rejection.body_text())
}

/// Parse `body` as `T`; errors name the field at fault (`messages[0].role`).
pub(crate) fn parse_json<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(path_error)?;
    // Trailing garbage after the object is a malformed body too.
    de.end().map_err(|e| ApiError::bad_request(format!("Malformed JSON body: {e}"), "body"))?;
    Ok(value)
}

fn path_error(err: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let inner = err.inner();
    if matches!(inner.classify(), Category::Syntax | Category::Eof | Category::Io) {
        return ApiError::bad_request(format!("Malformed JSON body: {inner}"), "body");
    }
    let path = err.path().to_string();
    let detail = inner.to_string();
    // serde reports a missing field at its parent's path; point at the field itself.
    let missing = detail.strip_prefix("missing field `").and_then(|rest| rest.split('`').next());
    let param = match (missing, path.as_str()) {
        (Some(field), ".") => field.to_string(),
        (Some(field), parent) => format!("{parent}.{field}"),
        (None, ".") => "body".to_string(),
        (None, field) => field.to_string(),
    };
    let message = match missing {
        Some(_) => format!("Missing required field '{param}'"),
        None => format!("Invalid value for '{param}': {detail}"),
    };
    ApiError::bad_request(message, param)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        items: Vec<Inner>,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        role: String,
    }

    fn err(body: &str) -> ApiError {
        parse_json::<Outer>(&Bytes::from(body.to_string())).unwrap_err()
    }

    #[test]
    fn missing_fields_are_named_with_their_path() {
        let e = err("{}");
        assert_eq!(e.param.as_deref(), Some("items"));
        assert!(e.message.contains("'items'"), "{}", e.message);
        assert_eq!(err(r#"{"items":[{}]}"#).param.as_deref(), Some("items[0].role"));
    }

    #[test]
    fn wrong_types_and_syntax_are_reported() {
        assert_eq!(err(r#"{"items":[{"role":1}]}"#).param.as_deref(), Some("items[0].role"));
        let e = err("{nope");
        assert!(e.message.starts_with("Malformed JSON"), "{}", e.message);
        assert_eq!(err(r#"{"items":[]} x"#).param.as_deref(), Some("body"));
    }
}
