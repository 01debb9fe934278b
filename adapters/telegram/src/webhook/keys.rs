//! The webhook keys of `platforms.telegram`, checked: each refusal names its key, so the gateway
//! reports `platforms.telegram.<key>`.

use hermes_adapter::{Secret, SettingError};

/// The local address listened on when `webhook_host` is unset: a reverse proxy on the same host
/// terminates TLS (Telegram only calls HTTPS) and forwards here.
pub const DEFAULT_HOST: &str = "127.0.0.1";
/// Not one of Telegram's webhook ports (443, 80, 88, 8443), which a TLS proxy on the same host
/// may hold, the webhook adapter's 8644 or the MCP server's 8645.
pub const DEFAULT_PORT: u16 = 8646;
/// The ports Telegram calls webhooks on (<https://core.telegram.org/bots/api#setwebhook>).
const TELEGRAM_PORTS: [u16; 4] = [443, 80, 88, 8443];
/// Telegram's bound on `secret_token`; the lower bound is the project's
/// ([`hermes_http_guard::MIN_SECRET_CHARS`]), as a short one is guessed.
const MAX_SECRET_CHARS: usize = 256;

/// `webhook_url`: required, `https://host[:port]/path` on a port Telegram calls.
pub fn url(raw: Option<&str>) -> Result<String, SettingError> {
    let key = "webhook_url";
    let raw = raw
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| SettingError::key(key, "required in webhook mode: the public https:// URL Telegram sends updates to"))?;
    let url = url::Url::parse(raw).map_err(|e| SettingError::key(key, format!("`{raw}` is not a URL: {e}")))?;
    if url.scheme() != "https" || !url.has_host() {
        return Err(SettingError::key(key, format!("`{raw}` must be an https:// URL with a host (Telegram calls only HTTPS)")));
    }
    let port = url.port_or_known_default().unwrap_or(443);
    if !TELEGRAM_PORTS.contains(&port) {
        return Err(SettingError::key(key, format!("port {port}: Telegram calls webhooks only on ports 443, 80, 88 or 8443")));
    }
    Ok(url.to_string())
}

/// `webhook_host`: an IP address to bind (a name could resolve to several).
pub fn host(raw: Option<&str>) -> Result<String, SettingError> {
    let host = raw.map(str::trim).filter(|h| !h.is_empty()).unwrap_or(DEFAULT_HOST);
    host.trim_matches(['[', ']'])
        .parse::<std::net::IpAddr>()
        .map(|ip| ip.to_string())
        .map_err(|_| SettingError::key("webhook_host", format!("`{host}` is not an IP address to listen on (e.g. 127.0.0.1)")))
}

pub fn port(port: u16) -> Result<u16, SettingError> {
    if port == 0 {
        return Err(SettingError::key("webhook_port", "expected a port number 1-65535, found 0"));
    }
    Ok(port)
}

/// `webhook_secret`: required, Telegram's alphabet and length, and not guessable.
pub fn secret(secret: Option<&Secret>) -> Result<Secret, SettingError> {
    let key = "webhook_secret";
    let value = secret.map(|s| s.expose().trim()).filter(|s| !s.is_empty()).ok_or_else(|| {
        SettingError::key(key, "required in webhook mode (or TELEGRAM_WEBHOOK_SECRET); generate one with `openssl rand -hex 32`")
    })?;
    weakness(value).map_err(|why| SettingError::key(key, format!("{why}; generate one with `openssl rand -hex 32`")))?;
    Ok(Secret::new(value))
}

/// Why a secret is refused; never quotes it. Telegram's alphabet and length, then the project's
/// rule for guessable secrets.
fn weakness(secret: &str) -> Result<(), String> {
    if secret.len() > MAX_SECRET_CHARS {
        return Err(format!("it is {} characters long; Telegram allows at most {MAX_SECRET_CHARS}", secret.len()));
    }
    if !secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err("Telegram allows only A-Z, a-z, 0-9, _ and - in it".to_string());
    }
    hermes_http_guard::check_secret(secret).map_err(|why| format!("guessable: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_follow_telegrams_alphabet_and_are_not_guessable() {
        assert!(weakness("0123456789abcdef0123").is_ok());
        assert!(weakness("short-1").is_err());
        assert!(weakness("has spaces in it 0123456").is_err());
        assert!(weakness("Change-Me-0123456789").is_err());
        assert!(weakness("your-secret-here-0123").is_err());
        assert!(weakness("abababababababababab").is_err());
        assert!(weakness(&"a1b2c3".repeat(50)).is_err(), "over 256");
    }

    #[test]
    fn urls_must_be_https_on_a_telegram_port() {
        assert_eq!(url(Some("https://bot.example.org/tg/hook")).ok().as_deref(), Some("https://bot.example.org/tg/hook"));
        assert!(url(Some("https://bot.example.org:8443/x")).is_ok());
        assert!(url(Some("http://bot.example.org/x")).is_err());
        assert!(url(Some("https://bot.example.org:9000/x")).is_err());
        assert!(url(None).is_err());
    }
}
