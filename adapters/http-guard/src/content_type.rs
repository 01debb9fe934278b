//! JSON bodies must say they are JSON.
//!
//! A page can send `text/plain`, form-encoded and multipart bodies (or a body with no type at
//! all) to any address without a CORS preflight. `application/json` needs one, and a preflight
//! for an origin that is not allowed fails, so requiring it keeps pages from sending JSON bodies
//! in disguise.

use crate::Refusal;
use http::{HeaderMap, StatusCode, header};

/// Requires `Content-Type: application/json` (optionally `; charset=utf-8`).
pub fn require_json(headers: &HeaderMap) -> Result<(), Refusal> {
    match headers.get(header::CONTENT_TYPE) {
        None => Err(unsupported("no Content-Type")),
        Some(value) => match value.to_str() {
            Ok(text) if is_json(text) => Ok(()),
            Ok(text) => Err(unsupported(&format!("Content-Type {:?}", text.trim()))),
            Err(_) => Err(unsupported("a Content-Type that is not text")),
        },
    }
}

/// Like [`require_json`], but a request without a body (no `Content-Type`, no length or a zero
/// `Content-Length`, no `Transfer-Encoding`) may omit the type: `POST /api/sessions` takes none.
pub fn require_json_if_body(headers: &HeaderMap) -> Result<(), Refusal> {
    if headers.contains_key(header::CONTENT_TYPE) || has_body(headers) { require_json(headers) } else { Ok(()) }
}

fn has_body(headers: &HeaderMap) -> bool {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return true;
    }
    // An unparsable length is treated as a body, so that it gets the strict check.
    headers.get(header::CONTENT_LENGTH).is_some_and(|v| v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()) != Some(0))
}

/// `application/json`, case-insensitive, with no parameter but a UTF-8 charset (JSON is UTF-8).
fn is_json(content_type: &str) -> bool {
    let mut parts = content_type.split(';');
    let essence = parts.next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
        && parts.all(|param| match param.split_once('=') {
            Some((name, value)) => {
                let value = value.trim().trim_matches('"');
                name.trim().eq_ignore_ascii_case("charset") && (value.eq_ignore_ascii_case("utf-8") || value.eq_ignore_ascii_case("utf8"))
            }
            // `application/json;` with nothing after the semicolon.
            None => param.trim().is_empty(),
        })
}

fn unsupported(found: &str) -> Refusal {
    Refusal::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!("Expected a JSON body with Content-Type: application/json, found {found}. Send the body as JSON with that header."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), HeaderValue::from_str(value).expect("header"));
        }
        map
    }

    #[test]
    fn json_with_or_without_utf8_charset_is_accepted() {
        for value in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            "application/json;charset=\"UTF-8\"",
            "application/json;",
        ] {
            assert_eq!(require_json(&headers(&[(header::CONTENT_TYPE, value)])), Ok(()), "{value}");
        }
    }

    #[test]
    fn what_a_page_can_send_without_preflight_is_refused_naming_the_type() {
        for value in [
            "text/plain",
            "text/plain;charset=UTF-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json; charset=latin1",
            "application/jsonp",
            "application/json, text/plain",
        ] {
            let refused = require_json(&headers(&[(header::CONTENT_TYPE, value)])).expect_err(value);
            assert_eq!(refused.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
            assert!(refused.message.contains("application/json"), "{}", refused.message);
            assert!(refused.message.contains(value.trim()), "names what was sent: {}", refused.message);
        }
        let missing = require_json(&HeaderMap::new()).expect_err("missing");
        assert!(missing.message.contains("no Content-Type"), "{}", missing.message);
    }

    #[test]
    fn a_request_without_body_may_omit_the_type() {
        assert_eq!(require_json_if_body(&HeaderMap::new()), Ok(()));
        assert_eq!(require_json_if_body(&headers(&[(header::CONTENT_LENGTH, "0")])), Ok(()));
        assert!(require_json_if_body(&headers(&[(header::CONTENT_LENGTH, "12")])).is_err(), "a body without a type");
        assert!(require_json_if_body(&headers(&[(header::TRANSFER_ENCODING, "chunked")])).is_err());
        assert!(require_json_if_body(&headers(&[(header::CONTENT_TYPE, "text/plain"), (header::CONTENT_LENGTH, "0")])).is_err());
        assert_eq!(require_json_if_body(&headers(&[(header::CONTENT_TYPE, "application/json"), (header::CONTENT_LENGTH, "2")])), Ok(()));
    }
}
