//! Where a route's answer goes: the `deliver` setting, parsed once at start-up.

use hermes_adapter::ChatTarget;
#[cfg(test)]
use hermes_adapter::Platform;
use reqwest::Url;

/// A parsed `deliver` setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Deliver {
    /// Write the answer to the log (the default).
    Log,
    /// POST the answer as JSON to this URL.
    Url(Url),
    /// Hand the answer to another platform's chat; the gateway routes it there, so the answer
    /// never comes back through this adapter.
    Chat(ChatTarget),
}

impl Deliver {
    /// Parses `log`, an `http(s)://` URL or `platform:chat_id[:thread_id]`; the error says what is
    /// wrong with the value (the caller adds the config key).
    pub(crate) fn parse(spec: &str) -> Result<Self, String> {
        let spec = spec.trim();
        if spec.is_empty() || spec.eq_ignore_ascii_case("log") {
            return Ok(Deliver::Log);
        }
        let (platform, rest) = match spec.split_once(':') {
            Some(parts) => parts,
            None => return Err("it is neither `log`, a URL nor `platform:chat_id`".to_string()),
        };
        // `https:…` is a URL attempt, not a chat on a platform called "https"; parse it as one so
        // that a typo gets a URL error instead of being delivered nowhere.
        if platform.eq_ignore_ascii_case("http") || platform.eq_ignore_ascii_case("https") {
            let url = Url::parse(spec).map_err(|e| format!("not a valid URL ({e})"))?;
            if url.host_str().is_none_or(str::is_empty) {
                return Err("the URL has no host".to_string());
            }
            return Ok(Deliver::Url(url));
        }
        if rest.starts_with("//") {
            return Err(format!("`{platform}://` URLs are not supported; only http and https are"));
        }
        if platform.eq_ignore_ascii_case("webhook") {
            return Err("a webhook route cannot deliver to the webhook platform itself".to_string());
        }
        // The caller reports the value's problem as text next to the config key.
        ChatTarget::parse(spec).map(Deliver::Chat).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_is_the_default() {
        assert_eq!(Deliver::parse("log"), Ok(Deliver::Log));
        assert_eq!(Deliver::parse(""), Ok(Deliver::Log));
    }

    #[test]
    fn urls() {
        match Deliver::parse("https://example.com/hook?x=1") {
            Ok(Deliver::Url(url)) => assert_eq!(url.as_str(), "https://example.com/hook?x=1"),
            other => panic!("unexpected {other:?}"),
        }
        assert!(Deliver::parse("http://").is_err());
        assert!(Deliver::parse("https:").is_err());
    }

    #[test]
    fn chats_with_and_without_thread() {
        assert_eq!(
            Deliver::parse("telegram:123:7"),
            Ok(Deliver::Chat(ChatTarget { platform: Platform::new("telegram"), chat_id: "123".into(), thread_id: Some("7".into()) }))
        );
        assert_eq!(
            Deliver::parse("Discord:42"),
            Ok(Deliver::Chat(ChatTarget { platform: Platform::new("discord"), chat_id: "42".into(), thread_id: None }))
        );
    }

    #[test]
    fn bad_specs() {
        for spec in [
            "telegram",
            "telegram:",
            ":123",
            "tele gram:1",
            "telegram:1:",
            "telegram:1:2:3",
            "webhook:x",
            "github_comment",
            "ftp://example.com/x",
        ] {
            assert!(Deliver::parse(spec).is_err(), "{spec} should be rejected");
        }
    }
}
