//! Which web pages may call a listener: the `Origin` header against a configured list.
//!
//! Browsers put `Origin` on every cross-origin request and on every POST; other clients (curl,
//! SDKs, webhook senders) send none. So a request with an `Origin` that is not listed comes from
//! a page the operator never allowed, and is refused whatever it asks for.

use crate::Refusal;
use http::{HeaderMap, StatusCode, header};

/// The origins allowed to call a listener, normalized as browsers send them
/// (`scheme://host[:port]`, lower case, default ports left out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AllowedOrigins {
    /// Listed origins only; empty refuses every browser request.
    #[default]
    None,
    List(Vec<String>),
    /// `*`: any page. Only safe where every request also needs a key a page cannot know.
    Any,
}

/// A configured origin that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    #[error("{entry:?} is not an origin ({reason}); write it as scheme://host[:port], e.g. http://localhost:3000")]
    Invalid { entry: String, reason: &'static str },
    #[error(
        "\"null\" is the origin of sandboxed frames and local files, which any page can produce; list the http(s) origin of the page instead"
    )]
    Null,
    #[error("`*` already allows every origin; list specific origins or `*` alone")]
    WildcardWithOthers,
}

impl AllowedOrigins {
    /// Parses configured entries (blank ones are skipped). A trailing `/` is dropped, since a
    /// page's address is often copied with one.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, OriginError> {
        let entries: Vec<&str> = entries.iter().map(|e| e.as_ref().trim()).filter(|e| !e.is_empty()).collect();
        if entries.contains(&"*") {
            return if entries.len() == 1 { Ok(Self::Any) } else { Err(OriginError::WildcardWithOthers) };
        }
        let mut origins = Vec::with_capacity(entries.len());
        for entry in entries {
            let origin = normalize(entry)?;
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
        Ok(if origins.is_empty() { Self::None } else { Self::List(origins) })
    }

    /// Whether a page at `origin` (an `Origin` header's text) may call.
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            Self::None => false,
            Self::Any => true,
            Self::List(origins) => origins.iter().any(|o| o.eq_ignore_ascii_case(origin.trim())),
        }
    }

    /// The listed origins (empty for `None` and `Any`).
    pub fn listed(&self) -> &[String] {
        match self {
            Self::List(origins) => origins,
            Self::None | Self::Any => &[],
        }
    }
}

/// Refuses a request whose `Origin` header names a page that is not allowed. No header is fine:
/// the client is not a browser.
pub fn check_origin(headers: &HeaderMap, allowed: &AllowedOrigins) -> Result<(), Refusal> {
    let mut values = headers.get_all(header::ORIGIN).iter();
    let Some(first) = values.next() else {
        return Ok(());
    };
    let origin = first.to_str().ok().filter(|_| values.next().is_none());
    match origin {
        Some(origin) if allowed.allows(origin) => Ok(()),
        Some(origin) => Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            format!(
                "Requests from web pages at {origin} are not allowed. Call this server from a program (which sends no Origin header), \
                 or add the page's origin to the server's allowed CORS origins."
            ),
        )),
        None => Err(Refusal::new(StatusCode::FORBIDDEN, "origin_not_allowed", "The Origin header is malformed.")),
    }
}

/// `scheme://host[:port]` in lower case without a default port, or why `entry` is not one.
fn normalize(entry: &str) -> Result<String, OriginError> {
    let invalid = |reason| OriginError::Invalid { entry: entry.to_string(), reason };
    if entry.eq_ignore_ascii_case("null") {
        return Err(OriginError::Null);
    }
    let lower = entry.to_ascii_lowercase();
    let (scheme, rest) = lower.split_once("://").ok_or_else(|| invalid("no scheme"))?;
    let default_port = match scheme {
        "http" => "80",
        "https" => "443",
        _ => return Err(invalid("only http and https pages can call")),
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() {
        return Err(invalid("no host"));
    }
    if authority.contains(['/', '?', '#']) {
        return Err(invalid("an origin has no path, query or fragment"));
    }
    if authority.contains('@') {
        return Err(invalid("an origin has no user name or password"));
    }
    if !authority.is_ascii() || authority.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(invalid("write international names in their xn-- form"));
    }
    let (host, port) = split_port(authority).ok_or_else(|| invalid("the port is not a number 1-65535"))?;
    if host.is_empty() || host == "[]" {
        return Err(invalid("no host"));
    }
    Ok(match port {
        Some(port) if port != default_port => format!("{scheme}://{host}:{port}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// Splits `host[:port]` (IPv6 hosts in brackets); `None` when the port is not a valid number.
fn split_port(authority: &str) -> Option<(&str, Option<&str>)> {
    let (host, port) = match authority.rfind(':') {
        // A colon inside brackets belongs to an IPv6 address, not to a port.
        Some(i) if !authority[i..].contains(']') => (&authority[..i], Some(&authority[i + 1..])),
        _ => (authority, None),
    };
    match port {
        Some(port) if !port.bytes().all(|b| b.is_ascii_digit()) || !port.parse::<u16>().is_ok_and(|p| p > 0) => None,
        _ => Some((host, port)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn list(entries: &[&str]) -> AllowedOrigins {
        AllowedOrigins::parse(entries).expect("valid origins")
    }

    fn with_origin(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ORIGIN, HeaderValue::from_str(value).expect("header"));
        headers
    }

    #[test]
    fn entries_are_normalized_as_browsers_send_origins() {
        let allowed = list(&["HTTP://LocalHost:3000/", "https://app.example:443", " http://[::1]:8080 ", "", "http://a.example:80"]);
        assert_eq!(allowed.listed(), ["http://localhost:3000", "https://app.example", "http://[::1]:8080", "http://a.example"]);
        assert!(allowed.allows("http://localhost:3000"));
        assert!(allowed.allows("https://app.example"));
        assert!(!allowed.allows("http://localhost:3001"));
        assert!(!allowed.allows("https://localhost:3000"), "the scheme is part of the origin");
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        for (entry, expected) in [
            ("localhost:3000", "no scheme"),
            ("ftp://x.example", "only http and https"),
            ("http://x.example/app", "no path"),
            ("http://user:pw@x.example", "user name"),
            ("http://x.example:http", "port"),
            ("http://x.example:0", "port"),
            ("http://", "no host"),
        ] {
            let message = AllowedOrigins::parse(&[entry]).expect_err(entry).to_string();
            assert!(message.contains(expected) && message.contains("scheme://host[:port]"), "{entry}: {message}");
        }
        assert_eq!(AllowedOrigins::parse(&["null"]), Err(OriginError::Null));
        assert_eq!(AllowedOrigins::parse(&["*", "http://a.example"]), Err(OriginError::WildcardWithOthers));
        assert_eq!(AllowedOrigins::parse(&["*"]), Ok(AllowedOrigins::Any));
        assert_eq!(AllowedOrigins::parse::<&str>(&[]), Ok(AllowedOrigins::None));
    }

    #[test]
    fn requests_without_origin_pass_and_unlisted_origins_are_refused() {
        let allowed = list(&["http://localhost:3000"]);
        assert_eq!(check_origin(&HeaderMap::new(), &allowed), Ok(()));
        assert_eq!(check_origin(&HeaderMap::new(), &AllowedOrigins::None), Ok(()));
        assert_eq!(check_origin(&with_origin("http://localhost:3000"), &allowed), Ok(()));
        let refused = check_origin(&with_origin("https://evil.example"), &allowed).expect_err("refused");
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert!(refused.message.contains("https://evil.example"), "{}", refused.message);
        assert!(check_origin(&with_origin("null"), &allowed).is_err());
        assert!(check_origin(&with_origin("http://localhost:3000"), &AllowedOrigins::None).is_err());
        assert_eq!(check_origin(&with_origin("https://anything.example"), &AllowedOrigins::Any), Ok(()));
    }

    #[test]
    fn two_origin_headers_are_refused() {
        let allowed = list(&["http://localhost:3000"]);
        let mut headers = with_origin("http://localhost:3000");
        headers.append(header::ORIGIN, HeaderValue::from_static("https://evil.example"));
        assert!(check_origin(&headers, &allowed).is_err());
    }
}
