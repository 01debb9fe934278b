//! The key a delivery is deduplicated on, derived from its signed body.
//!
//! A sender's delivery id (`X-GitHub-Delivery`, `X-Request-ID`) travels outside the signature:
//! anyone who captured one signed delivery could replay it with a fresh id and have it run
//! again. The body is covered by every signature scheme and cannot change without breaking it,
//! so the key is a hash of the body (and of the route, since two routes may share a secret).
//!
//! The V2 timestamp is deliberately left out: a sender that retries re-signs with a new
//! timestamp, and its retry must still be recognised. So an identical body on one route is one
//! delivery (for as long as the inbox remembers it, at least a day); a sender whose bodies can
//! repeat should put an id or a time in the body. The delivery id is kept for logs only.

use sha2::{Digest, Sha256};

/// Hex characters of the key: 128 bits, collision-free in practice and short in chat ids.
const KEY_HEX_CHARS: usize = 32;

/// The dedupe key of a delivery on `route` with the signed `body`.
pub fn content_key(route: &str, body: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(route.as_bytes());
    // Route names have no NUL, so the route and the body cannot run into each other.
    hash.update([0u8]);
    hash.update(body);
    let mut key = hex::encode(hash.finalize());
    key.truncate(KEY_HEX_CHARS);
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_short_hex_and_stable() {
        let key = content_key("gh", b"{\"a\":1}");
        assert_eq!(key, content_key("gh", b"{\"a\":1}"));
        assert_eq!(key.len(), KEY_HEX_CHARS);
        assert!(key.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn route_and_body_change_the_key() {
        let key = content_key("gh", b"{\"a\":1}");
        assert_ne!(key, content_key("gl", b"{\"a\":1}"));
        assert_ne!(key, content_key("gh", b"{\"a\":2}"));
        assert_ne!(content_key("a", b"bc"), content_key("ab", b"c"));
    }
}
