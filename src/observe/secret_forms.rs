//! Every form a configured secret can take in what a tool returns: as is, reversed (`rev`),
//! base64 in each of its three alignments (standard and URL-safe alphabets), and hex (lower and
//! upper case). A command that encodes the bot token before printing it still shows nothing.
//! The sandbox keeps the secrets' files out of reach; this is the second lock on the door.

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

const MASK: &str = "[REDACTED]";
/// Secrets shorter than this are ignored: masking them would mangle ordinary words.
pub(crate) const MIN_SECRET_LEN: usize = 6;
/// Encoded fragments shorter than this are not masked (too likely to occur by chance).
const MIN_FRAGMENT_LEN: usize = 8;

/// Finds and masks secrets in any of their forms.
#[derive(Debug, Clone, Default)]
pub struct SecretScrubber {
    finder: Option<AhoCorasick>,
}

impl SecretScrubber {
    pub fn new(secrets: &[String]) -> Self {
        let mut needles: Vec<String> = secrets.iter().filter(|s| s.len() >= MIN_SECRET_LEN).flat_map(|s| forms(s)).collect();
        needles.sort();
        needles.dedup();
        // Built from our own strings; a build failure (it has none for plain literals) would
        // leave output unscrubbed, so it is logged loudly rather than ignored.
        let finder = match AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&needles) {
            Ok(finder) => Some(finder),
            Err(e) => {
                tracing::error!(error = %e, "cannot build the secret scrubber; tool output is not scrubbed");
                None
            }
        };
        Self { finder: finder.filter(|_| !needles.is_empty()) }
    }

    /// `text` with every form of every secret masked.
    pub fn scrub(&self, text: &str) -> String {
        match &self.finder {
            Some(finder) => finder.replace_all(text, &vec![MASK; finder.patterns_len()]),
            None => text.to_string(),
        }
    }
}

/// The strings that betray `secret` when they appear in output.
fn forms(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    let mut out = vec![secret.to_string(), secret.chars().rev().collect(), hex::encode(bytes), hex::encode_upper(bytes)];
    for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
        for shift in 0..3usize {
            out.extend(base64_core(&engine, bytes, shift));
        }
    }
    out
}

/// The characters of the base64 encoding of `secret` that do not depend on the bytes around it,
/// when it starts `shift` bytes into a 3-byte group.
fn base64_core(engine: &base64::engine::GeneralPurpose, secret: &[u8], shift: usize) -> Option<String> {
    let mut padded = vec![0u8; shift];
    padded.extend_from_slice(secret);
    let encoded = engine.encode(&padded);
    // Each character carries 6 bits: the first ones mix in the padding, the last one may mix in
    // whatever follows.
    let first = (shift * 8).div_ceil(6);
    let last = (padded.len() * 8) / 6;
    let core = encoded.get(first..last)?;
    (core.len() >= MIN_FRAGMENT_LEN).then(|| core.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "123456:AAH-bot-token-very-secret";

    #[test]
    fn every_form_of_a_secret_is_masked() {
        let scrubber = SecretScrubber::new(&[TOKEN.to_string(), "short".to_string()]);
        let reversed: String = TOKEN.chars().rev().collect();
        for prefix in ["", "x", "xy", "TELEGRAM_BOT_TOKEN="] {
            let line = format!("{prefix}{TOKEN}\n");
            for shown in [
                line.clone(),
                reversed.clone(),
                STANDARD_NO_PAD.encode(line.as_bytes()),
                URL_SAFE_NO_PAD.encode(line.as_bytes()),
                hex::encode(line.as_bytes()),
                hex::encode_upper(line.as_bytes()),
            ] {
                let scrubbed = scrubber.scrub(&shown);
                assert!(scrubbed.contains(MASK), "{shown:?} was not masked: {scrubbed:?}");
                assert!(!scrubbed.contains(TOKEN) && !scrubbed.contains(&reversed), "{scrubbed}");
            }
        }
        assert_eq!(scrubber.scrub("a short word"), "a short word", "values under 6 characters are left alone");
    }

    #[test]
    fn ordinary_text_is_untouched() {
        let scrubber = SecretScrubber::new(&[TOKEN.to_string()]);
        let text = "cargo build finished; 42 tests passed; aGVsbG8gd29ybGQ= is base64 for hello world";
        assert_eq!(scrubber.scrub(text), text);
        assert_eq!(SecretScrubber::new(&[]).scrub(text), text);
    }
}
