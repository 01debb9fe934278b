//! Sender authentication: the four signature schemes, checked over the raw body bytes with
//! constant-time comparisons. Public so that the fuzz target can drive it; it never panics.

use axum::http::HeaderMap;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// How far `X-Webhook-Timestamp` may be from now, either way.
pub const REPLAY_WINDOW_SECS: i64 = 300;

pub const GITHUB_HEADER: &str = "x-hub-signature-256";
pub const V2_HEADER: &str = "x-webhook-signature-v2";
pub const TIMESTAMP_HEADER: &str = "x-webhook-timestamp";
pub const GITLAB_HEADER: &str = "x-gitlab-token";
pub const LEGACY_HEADER: &str = "x-webhook-signature";

/// The scheme a delivery was authenticated with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    GitHub,
    GenericV2,
    GitLab,
    /// Body-only HMAC without a timestamp: replayable, kept for old senders.
    LegacyV1,
}

/// Why a delivery was not authenticated; the text is the 401 response's `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("missing signature: send X-Hub-Signature-256, X-Webhook-Signature-V2 with X-Webhook-Timestamp, or X-Gitlab-Token")]
    Missing,
    #[error("invalid signature in {0}")]
    Invalid(&'static str),
    #[error("X-Webhook-Signature-V2 requires X-Webhook-Timestamp (unix seconds)")]
    MissingTimestamp,
    #[error("X-Webhook-Timestamp is not a unix time in seconds")]
    BadTimestamp,
    #[error("timestamp outside the 300 s window")]
    Stale,
}

/// Verifies a delivery against `secret`. The first scheme whose header is present decides; a
/// sender that sends a bad GitHub signature is not given a second chance with another header.
pub fn verify(headers: &HeaderMap, body: &[u8], secret: &[u8], now_unix: i64) -> Result<Scheme, SignatureError> {
    if let Some(value) = header(headers, GITHUB_HEADER)? {
        let hex_sig = value.strip_prefix("sha256=").ok_or(SignatureError::Invalid("X-Hub-Signature-256"))?;
        return hmac_matches(secret, &[body], hex_sig).then_some(Scheme::GitHub).ok_or(SignatureError::Invalid("X-Hub-Signature-256"));
    }
    if let Some(value) = header(headers, V2_HEADER)? {
        let timestamp = header(headers, TIMESTAMP_HEADER)?.ok_or(SignatureError::MissingTimestamp)?;
        let seconds: i64 = timestamp.parse().map_err(|_| SignatureError::BadTimestamp)?;
        if now_unix.abs_diff(seconds) > REPLAY_WINDOW_SECS.unsigned_abs() {
            return Err(SignatureError::Stale);
        }
        let hex_sig = value.strip_prefix("sha256=").unwrap_or(value);
        // The timestamp is signed as the sender wrote it, so that formatting can never differ.
        return hmac_matches(secret, &[timestamp.as_bytes(), b".", body], hex_sig)
            .then_some(Scheme::GenericV2)
            .ok_or(SignatureError::Invalid("X-Webhook-Signature-V2"));
    }
    if let Some(token) = header(headers, GITLAB_HEADER)? {
        return bool::from(token.as_bytes().ct_eq(secret)).then_some(Scheme::GitLab).ok_or(SignatureError::Invalid("X-Gitlab-Token"));
    }
    if let Some(value) = header(headers, LEGACY_HEADER)? {
        return hmac_matches(secret, &[body], value).then_some(Scheme::LegacyV1).ok_or(SignatureError::Invalid("X-Webhook-Signature"));
    }
    Err(SignatureError::Missing)
}

/// A header's trimmed text; a value that is not visible ASCII cannot be a valid signature.
fn header<'a>(headers: &'a HeaderMap, name: &'static str) -> Result<Option<&'a str>, SignatureError> {
    match headers.get(name) {
        None => Ok(None),
        Some(value) => value.to_str().map(|s| Some(s.trim())).map_err(|_| SignatureError::Invalid(name)),
    }
}

/// HMAC-SHA256 of the concatenated `parts` compared in constant time with a hex signature.
fn hmac_matches(secret: &[u8], parts: &[&[u8]], hex_sig: &str) -> bool {
    let Ok(expected) = hex::decode(hex_sig) else {
        return false;
    };
    // HMAC takes keys of any length, so this never fails; treating a failure as "no match" keeps
    // the function total without a panic path.
    let Ok(mut mac) = HmacSha256::new_from_slice(secret) else {
        return false;
    };
    for part in parts {
        mac.update(part);
    }
    mac.verify_slice(&expected).is_ok()
}

/// Hex HMAC-SHA256 of `parts` (what a sender computes), for tests and the docs' examples.
#[cfg(test)]
pub(crate) fn sign(secret: &[u8], parts: &[&[u8]]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts any key length");
    for part in parts {
        mac.update(part);
    }
    hex::encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const SECRET: &[u8] = b"s3cret";
    const BODY: &[u8] = br#"{"a":1}"#;
    const NOW: i64 = 1_700_000_000;

    fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("test header"));
        }
        map
    }

    #[test]
    fn github() {
        let good = format!("sha256={}", sign(SECRET, &[BODY]));
        assert_eq!(verify(&headers(&[(GITHUB_HEADER, good.clone())]), BODY, SECRET, NOW), Ok(Scheme::GitHub));
        let bare = sign(SECRET, &[BODY]);
        assert!(verify(&headers(&[(GITHUB_HEADER, bare)]), BODY, SECRET, NOW).is_err());
        assert!(verify(&headers(&[(GITHUB_HEADER, good)]), b"{\"a\":2}", SECRET, NOW).is_err());
    }

    #[test]
    fn generic_v2_with_and_without_prefix() {
        let ts = NOW.to_string();
        let sig = sign(SECRET, &[ts.as_bytes(), b".", BODY]);
        for value in [sig.clone(), format!("sha256={sig}"), sig.to_uppercase()] {
            let h = headers(&[(V2_HEADER, value), (TIMESTAMP_HEADER, ts.clone())]);
            assert_eq!(verify(&h, BODY, SECRET, NOW + 299), Ok(Scheme::GenericV2));
        }
    }

    #[test]
    fn generic_v2_replay_window() {
        let old = (NOW - 301).to_string();
        let sig = sign(SECRET, &[old.as_bytes(), b".", BODY]);
        let h = headers(&[(V2_HEADER, sig.clone()), (TIMESTAMP_HEADER, old)]);
        assert_eq!(verify(&h, BODY, SECRET, NOW), Err(SignatureError::Stale));
        assert_eq!(verify(&headers(&[(V2_HEADER, sig.clone())]), BODY, SECRET, NOW), Err(SignatureError::MissingTimestamp));
        let h = headers(&[(V2_HEADER, sig), (TIMESTAMP_HEADER, "soon".into())]);
        assert_eq!(verify(&h, BODY, SECRET, NOW), Err(SignatureError::BadTimestamp));
    }

    #[test]
    fn generic_v2_signs_the_timestamp() {
        let ts = NOW.to_string();
        let body_only = sign(SECRET, &[BODY]);
        let h = headers(&[(V2_HEADER, body_only), (TIMESTAMP_HEADER, ts)]);
        assert_eq!(verify(&h, BODY, SECRET, NOW), Err(SignatureError::Invalid("X-Webhook-Signature-V2")));
    }

    #[test]
    fn gitlab_token() {
        assert_eq!(verify(&headers(&[(GITLAB_HEADER, "s3cret".into())]), BODY, SECRET, NOW), Ok(Scheme::GitLab));
        assert!(verify(&headers(&[(GITLAB_HEADER, "s3cre".into())]), BODY, SECRET, NOW).is_err());
    }

    #[test]
    fn legacy_v1() {
        let h = headers(&[(LEGACY_HEADER, sign(SECRET, &[BODY]))]);
        assert_eq!(verify(&h, BODY, SECRET, NOW), Ok(Scheme::LegacyV1));
    }

    #[test]
    fn missing_and_garbage() {
        assert_eq!(verify(&HeaderMap::new(), BODY, SECRET, NOW), Err(SignatureError::Missing));
        assert!(verify(&headers(&[(GITHUB_HEADER, "sha256=zz".into())]), BODY, SECRET, NOW).is_err());
    }
}
