//! Secret redaction for log output: bot tokens, API keys, bearer tokens and tokens inside URLs are
//! masked before a line leaves the process. Every log sink goes through [`RedactingMakeWriter`],
//! so this is the one place that decides what a secret looks like.

use std::io::{self, Write};
use std::sync::Arc;
use tracing_subscriber::fmt::MakeWriter;

const MASK: &str = "[REDACTED]";

/// Masks known secrets and secret-shaped strings.
#[derive(Debug, Clone, Default)]
pub(crate) struct Redactor {
    exact: Arc<Vec<String>>,
}

impl Redactor {
    /// `exact` are configured secrets; values shorter than 6 characters are ignored because
    /// masking them would mangle ordinary words.
    pub(crate) fn new(exact: Vec<String>) -> Self {
        let mut exact: Vec<String> = exact.into_iter().filter(|s| s.len() >= 6).collect();
        // Longest first so a secret that contains another is masked whole.
        exact.sort_by_key(|s| std::cmp::Reverse(s.len()));
        exact.dedup();
        Self { exact: Arc::new(exact) }
    }

    pub(crate) fn redact(&self, line: &str) -> String {
        let mut out = line.to_string();
        for secret in self.exact.iter() {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        redact_patterns(&out)
    }
}

/// Generic patterns, applied to any text.
pub(crate) fn redact_patterns(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if let Some(skip) = masked_span(&chars, i, &mut out) {
            i = skip;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '+' | '/' | '=')
}

fn starts_with_at(chars: &[char], i: usize, pat: &str) -> bool {
    let mut k = i;
    for p in pat.chars() {
        match chars.get(k) {
            Some(c) if c.eq_ignore_ascii_case(&p) => k += 1,
            _ => return false,
        }
    }
    true
}

fn token_end(chars: &[char], from: usize) -> usize {
    token_end_by(chars, from, is_token_char)
}

/// Telegram's secret half is `[A-Za-z0-9_-]`; stopping there keeps the URL path readable.
fn bot_token_end(chars: &[char], from: usize) -> usize {
    token_end_by(chars, from, |c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

fn token_end_by(chars: &[char], from: usize, is_part: impl Fn(char) -> bool) -> usize {
    let mut j = from;
    while j < chars.len() && is_part(chars[j]) {
        j += 1;
    }
    j
}

/// Masks one kind of secret starting at `i`: pushes the masked form to `out` and returns the
/// index after the secret, or leaves `out` untouched and returns `None`.
type Detector = fn(&[char], usize, &mut String) -> Option<usize>;

/// Tried in this order at each position; the first that matches wins.
const DETECTORS: [Detector; 6] = [bearer_token, bot_token_in_path, bare_bot_token, prefixed_key, credential_pair, url_userinfo];

/// If a secret starts at `i`, push its masked form to `out` and return the index after it.
fn masked_span(chars: &[char], i: usize, out: &mut String) -> Option<usize> {
    DETECTORS.iter().find_map(|detect| detect(chars, i, out))
}

/// Token-like secrets only count when they do not continue a longer word.
fn at_word_start(chars: &[char], i: usize) -> bool {
    i == 0 || !chars[i - 1].is_ascii_alphanumeric()
}

/// `Bearer <token>` in headers.
fn bearer_token(chars: &[char], i: usize, out: &mut String) -> Option<usize> {
    if !starts_with_at(chars, i, "bearer ") {
        return None;
    }
    let from = i + 7;
    let end = token_end(chars, from);
    if end - from < 8 {
        return None;
    }
    out.push_str("Bearer ");
    out.push_str(MASK);
    Some(end)
}

/// Telegram bot tokens in URL paths: /bot<digits>:<secret>
fn bot_token_in_path(chars: &[char], i: usize, out: &mut String) -> Option<usize> {
    if !starts_with_at(chars, i, "/bot") {
        return None;
    }
    let digits_end = (i + 4..chars.len()).find(|&k| !chars[k].is_ascii_digit()).unwrap_or(chars.len());
    if digits_end > i + 4 && chars.get(digits_end) == Some(&':') {
        let end = bot_token_end(chars, digits_end + 1);
        if end - digits_end > 20 {
            out.push_str("/bot");
            out.push_str(MASK);
            return Some(end);
        }
    }
    None
}

/// A bare bot token `<8-12 digits>:<30+ chars>`.
fn bare_bot_token(chars: &[char], i: usize, out: &mut String) -> Option<usize> {
    if !(at_word_start(chars, i) && chars[i].is_ascii_digit()) {
        return None;
    }
    let digits_end = (i..chars.len()).find(|&k| !chars[k].is_ascii_digit()).unwrap_or(chars.len());
    if (6..=12).contains(&(digits_end - i)) && chars.get(digits_end) == Some(&':') {
        let end = bot_token_end(chars, digits_end + 1);
        if end - digits_end > 30 {
            out.push_str(MASK);
            return Some(end);
        }
    }
    None
}

/// Well-known key prefixes: OpenAI/Anthropic `sk-`, Slack `xox?-` / `xapp-`, GitHub `ghp_`.
fn prefixed_key(chars: &[char], i: usize, out: &mut String) -> Option<usize> {
    if !at_word_start(chars, i) {
        return None;
    }
    for prefix in ["sk-", "xoxb-", "xoxp-", "xoxa-", "xapp-", "ghp_", "github_pat_", "syt_"] {
        if starts_with_at(chars, i, prefix) {
            let end = token_end(chars, i + prefix.len());
            if end - (i + prefix.len()) >= 10 {
                out.push_str(prefix);
                out.push_str(MASK);
                return Some(end);
            }
        }
    }
    None
}

/// Credentials in URL query strings or `key=value` pairs; the key stays readable.
fn credential_pair(chars: &[char], i: usize, out: &mut String) -> Option<usize> {
    if !at_word_start(chars, i) {
        return None;
    }
    for key in ["token=", "access_token=", "api_key=", "apikey=", "key=", "secret=", "password=", "sig="] {
        if starts_with_at(chars, i, key) {
            let from = i + key.len();
            let end = token_end(chars, from);
            if end > from {
                out.extend(&chars[i..from]);
                out.push_str(MASK);
                return Some(end);
            }
        }
    }
    None
}

/// userinfo in URLs: scheme://user:password@host
fn url_userinfo(chars: &[char], i: usize, out: &mut String) -> Option<usize> {
    if !starts_with_at(chars, i, "://") {
        return None;
    }
    let from = i + 3;
    let mut j = from;
    while j < chars.len() && !matches!(chars[j], '/' | '@' | ' ' | '"' | '\'') {
        j += 1;
    }
    if chars.get(j) == Some(&'@') && chars[from..j].contains(&':') {
        out.push_str("://");
        out.push_str(MASK);
        out.push('@');
        return Some(j + 1);
    }
    None
}

/// A `MakeWriter` that redacts each formatted record before it reaches the inner writer.
pub(crate) struct RedactingMakeWriter<M> {
    inner: M,
    redactor: Redactor,
}

impl<M> RedactingMakeWriter<M> {
    pub(crate) fn new(inner: M, redactor: Redactor) -> Self {
        Self { inner, redactor }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for RedactingMakeWriter<M> {
    type Writer = RedactingWriter<M::Writer>;
    fn make_writer(&'a self) -> Self::Writer {
        RedactingWriter { inner: self.inner.make_writer(), redactor: self.redactor.clone(), buf: Vec::new() }
    }
    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        RedactingWriter { inner: self.inner.make_writer_for(meta), redactor: self.redactor.clone(), buf: Vec::new() }
    }
}

/// Buffers one record and writes it redacted when dropped (the fmt layer makes one writer per
/// record), so a secret split across `write` calls is still seen whole.
pub(crate) struct RedactingWriter<W: Write> {
    inner: W,
    redactor: Redactor,
    buf: Vec<u8>,
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.buf);
        let clean = self.redactor.redact(&text);
        // A logger has nowhere to report its own write failure.
        let _ = self.inner.write_all(clean.as_bytes());
        let _ = self.inner.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_telegram_token_in_url() {
        let line = "GET https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getUpdates failed";
        let out = redact_patterns(line);
        assert!(!out.contains("AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"), "{out}");
        assert!(out.contains("/bot[REDACTED]/getUpdates"));
    }

    #[test]
    fn masks_bare_bot_token_and_api_keys() {
        let out = redact_patterns("token 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw and sk-proj-abcdefghijklmnop");
        assert!(!out.contains("AAHdqTcv"), "{out}");
        assert!(!out.contains("abcdefghijklmnop"), "{out}");
    }

    #[test]
    fn masks_bearer_query_and_userinfo() {
        let out = redact_patterns("Authorization: Bearer abcdefgh12345678 url=https://u:pw123@host/x?token=zzz&a=1");
        assert!(!out.contains("abcdefgh12345678"));
        assert!(!out.contains("pw123"));
        assert!(!out.contains("zzz"));
        assert!(out.contains("a=1"));
    }

    #[test]
    fn masks_configured_exact_secrets_and_leaves_normal_text() {
        let r = Redactor::new(vec!["hunter2-very-secret".into(), "abc".into()]);
        assert_eq!(r.redact("key is hunter2-very-secret!"), "key is [REDACTED]!");
        assert_eq!(r.redact("abc def 12:30 session 20260101_120000_ab12cd34"), "abc def 12:30 session 20260101_120000_ab12cd34");
    }

    #[test]
    fn writer_redacts_whole_record() {
        let sink = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
        struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, d: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(d);
                Ok(d.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        {
            let mut w =
                RedactingWriter { inner: Shared(sink.clone()), redactor: Redactor::new(vec!["s3cr3t-value".into()]), buf: Vec::new() };
            w.write_all(b"start s3cr3").unwrap();
            w.write_all(b"t-value end\n").unwrap();
        }
        let text = String::from_utf8(sink.lock().unwrap().clone()).unwrap();
        assert_eq!(text, "start [REDACTED] end\n");
    }
}
