//! The webhook listener's pure half on any input: signature verification, body parsing, the
//! event type, the prompt template and the dedupe key must never panic, and an oracle holds:
//!
//! - a body signed with the route secret always verifies, under every scheme (GitHub, V2 with
//!   its timestamp, legacy V1, and the GitLab token when the secret can be a header value);
//! - flipping any bit pattern of any byte of the body, of the signature or of the V2 timestamp
//!   never verifies (the GitLab token signs no body, so only a changed token is checked there),
//!   and a changed body never gets the original's dedupe key;
//! - a template without `{` renders to itself.
//!
//! The HMACs here come from the `hmac` crate directly, not from the code under test.
//!
//! Input: byte 0 chooses which byte to flip and with what (bytes 1–2), byte 3 the secret's
//! length (0–47), then the secret, then the body. When byte 0 is odd, the body's first line is
//! also sent as the value of one of the signature headers, to exercise malformed headers.

#![no_main]

use hermes_webhook::payload::{event_type, parse_payload};
use hermes_webhook::signature::{GITHUB_HEADER, GITLAB_HEADER, LEGACY_HEADER, Scheme, TIMESTAMP_HEADER, V2_HEADER, verify};
use hermes_webhook::{content_key, render_prompt};
use hmac::{Hmac, Mac};
use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use sha2::Sha256;

const NOW: i64 = 1_700_000_000;
const ROUTE: &str = "fuzz";

fn hmac_hex(secret: &[u8], parts: &[&[u8]]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    for part in parts {
        mac.update(part);
    }
    hex::encode(mac.finalize().into_bytes())
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).expect("hex and digits are valid header values"));
    }
    map
}

/// `hex_sig` with byte `at` (of the decoded signature) XORed with `mask`, re-encoded.
fn flip_signature(hex_sig: &str, at: usize, mask: u8) -> String {
    let mut bytes = hex::decode(hex_sig).expect("our own hex");
    let i = at % bytes.len();
    bytes[i] ^= mask;
    hex::encode(bytes)
}

fuzz_target!(|data: &[u8]| {
    let [selector, at, mask, secret_len, rest @ ..] = data else { return };
    let at = usize::from(*at);
    // Never zero: a zero mask would flip nothing.
    let mask = (*mask).max(1);
    let secret_len = usize::from(*secret_len % 48).min(rest.len());
    let (secret, body) = rest.split_at(secret_len);

    // Malformed header values: anything may come back, but nothing may panic.
    if selector % 2 == 1 {
        let line = body.split(|b| *b == b'\n').next().unwrap_or_default();
        if let Ok(value) = HeaderValue::from_bytes(line) {
            let names = [GITHUB_HEADER, V2_HEADER, GITLAB_HEADER, LEGACY_HEADER, TIMESTAMP_HEADER];
            let mut map = HeaderMap::new();
            map.insert(names[usize::from(*selector / 2) % names.len()], value.clone());
            if selector / 2 % 3 == 0 {
                map.insert(TIMESTAMP_HEADER, value);
            }
            let _ = verify(&map, body, secret, NOW);
        }
    }

    // Signed with the route secret: always verifies, and covers exactly the body.
    let github = format!("sha256={}", hmac_hex(secret, &[body]));
    assert_eq!(verify(&headers(&[(GITHUB_HEADER, &github)]), body, secret, NOW), Ok(Scheme::GitHub), "a GitHub-signed body must verify");
    let key = content_key(ROUTE, body);
    assert!(key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");

    let timestamp = NOW.to_string();
    let v2 = hmac_hex(secret, &[timestamp.as_bytes(), b".", body]);
    let v2_headers = headers(&[(V2_HEADER, &v2), (TIMESTAMP_HEADER, &timestamp)]);
    assert_eq!(verify(&v2_headers, body, secret, NOW), Ok(Scheme::GenericV2), "a V2-signed body must verify");

    let v1 = hmac_hex(secret, &[body]);
    assert_eq!(verify(&headers(&[(LEGACY_HEADER, &v1)]), body, secret, NOW), Ok(Scheme::LegacyV1));

    // A token survives as a header value only if it is visible ASCII (values are trimmed).
    let token_ok = !secret.is_empty() && secret.iter().all(|b| b.is_ascii_graphic());
    if let Ok(token) = std::str::from_utf8(secret)
        && token_ok
    {
        assert_eq!(verify(&headers(&[(GITLAB_HEADER, token)]), body, secret, NOW), Ok(Scheme::GitLab));
        let mut flipped = secret.to_vec();
        let i = at % flipped.len();
        flipped[i] ^= mask;
        if let Ok(value) = HeaderValue::from_bytes(&flipped) {
            let mut map = HeaderMap::new();
            map.insert(GITLAB_HEADER, value);
            assert!(verify(&map, body, secret, NOW).is_err(), "a changed token must not verify");
        }
    }

    // Any changed byte of the body: no scheme that signs the body verifies, and the key changes.
    if !body.is_empty() {
        let mut tampered = body.to_vec();
        let i = at % tampered.len();
        tampered[i] ^= mask;
        assert!(verify(&headers(&[(GITHUB_HEADER, &github)]), &tampered, secret, NOW).is_err(), "tampered body verified (GitHub)");
        assert!(verify(&v2_headers, &tampered, secret, NOW).is_err(), "tampered body verified (V2)");
        assert!(verify(&headers(&[(LEGACY_HEADER, &v1)]), &tampered, secret, NOW).is_err(), "tampered body verified (V1)");
        assert_ne!(content_key(ROUTE, &tampered), key, "a different body must be a different delivery");
    }

    // Any changed byte of a signature, or of the signed timestamp: never verifies.
    let bad_github = format!("sha256={}", flip_signature(&github["sha256=".len()..], at, mask));
    assert!(verify(&headers(&[(GITHUB_HEADER, &bad_github)]), body, secret, NOW).is_err(), "flipped GitHub signature verified");
    let bad_v2 = flip_signature(&v2, at, mask);
    assert!(verify(&headers(&[(V2_HEADER, &bad_v2), (TIMESTAMP_HEADER, &timestamp)]), body, secret, NOW).is_err());
    let bad_v1 = flip_signature(&v1, at, mask);
    assert!(verify(&headers(&[(LEGACY_HEADER, &bad_v1)]), body, secret, NOW).is_err(), "flipped V1 signature verified");
    let mut moved = timestamp.clone().into_bytes();
    let i = at % moved.len();
    moved[i] ^= mask;
    if let Ok(value) = HeaderValue::from_bytes(&moved) {
        let mut map = headers(&[(V2_HEADER, &v2)]);
        map.insert(TIMESTAMP_HEADER, value);
        assert!(verify(&map, body, secret, NOW).is_err(), "a changed timestamp verified");
    }

    // Parsing and rendering: any body, and the body as a template.
    let template = String::from_utf8_lossy(body);
    match parse_payload(body) {
        Ok((text, payload)) => {
            let _ = event_type(&headers(&[]), &payload);
            let _ = render_prompt(&template, ROUTE, &payload, text);
        }
        Err(_) => {
            let _ = render_prompt(&template, ROUTE, &Value::Null, &template);
        }
    }
    if !template.contains('{') {
        assert_eq!(render_prompt(&template, ROUTE, &Value::Null, ""), template, "text without placeholders is left alone");
    }
});
