//! `Authorization: Bearer <key>`, compared in constant time so a key cannot be guessed byte by
//! byte from response timings.

use http::HeaderMap;
use http::header::AUTHORIZATION;
use subtle::ConstantTimeEq;

/// Whether the request carries `Authorization: Bearer <key>` (the scheme in any case).
pub fn bearer_matches(headers: &HeaderMap, key: &str) -> bool {
    let Some(value) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let Some((scheme, token)) = value.trim().split_once(' ') else {
        return false;
    };
    scheme.eq_ignore_ascii_case("bearer") && bool::from(token.trim().as_bytes().ct_eq(key.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(auth: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_str(auth).unwrap());
        headers
    }

    #[test]
    fn the_bearer_key_is_checked_exactly() {
        assert!(bearer_matches(&headers("Bearer k3y"), "k3y"));
        assert!(bearer_matches(&headers("bearer k3y"), "k3y"));
        assert!(!bearer_matches(&headers("Bearer k3"), "k3y"));
        assert!(!bearer_matches(&headers("Bearer k3yy"), "k3y"));
        assert!(!bearer_matches(&headers("Basic k3y"), "k3y"));
        assert!(!bearer_matches(&headers("k3y"), "k3y"));
        assert!(!bearer_matches(&HeaderMap::new(), "k3y"));
    }
}
