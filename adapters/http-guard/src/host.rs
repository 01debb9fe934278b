//! DNS rebinding: which names a listener answers to.
//!
//! A page at `http://evil.example:8642` can make its own name resolve to `127.0.0.1`; the browser
//! then treats the loopback listener as that page's own origin, and no CORS rule applies. The
//! browser still sends `Host: evil.example:8642`, though, so a listener that needs no key answers
//! only when the Host names this machine.

use crate::Refusal;
use http::{HeaderMap, StatusCode, Uri, header};
use std::net::IpAddr;

/// Which `Host` headers a listener accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPolicy {
    /// Any name: the listener needs a key, which a rebinding page does not have.
    Any,
    /// Loopback addresses (`127.0.0.1`, `[::1]`, …), `localhost`, or the exact host the listener
    /// was configured to bind; any port.
    Loopback { bound_host: String },
}

impl HostPolicy {
    /// Loopback names plus `bound_host` (as configured, brackets optional).
    pub fn loopback(bound_host: &str) -> Self {
        Self::Loopback { bound_host: strip_brackets(bound_host.trim()).to_ascii_lowercase() }
    }

    /// Refuses a request whose `Host` (or, in HTTP/2, `:authority`) names another machine, with
    /// 421 Misdirected Request.
    pub fn check(&self, headers: &HeaderMap, uri: &Uri) -> Result<(), Refusal> {
        let Self::Loopback { bound_host } = self else {
            return Ok(());
        };
        let authority = match headers.get(header::HOST) {
            Some(value) => value.to_str().ok(),
            None => uri.authority().map(|a| a.as_str()),
        };
        let Some(authority) = authority else {
            return Err(misdirected("The request names no host (send a Host header such as 127.0.0.1)."));
        };
        let host = host_of(authority);
        if is_loopback_name(host) || (!bound_host.is_empty() && strip_brackets(host).eq_ignore_ascii_case(bound_host)) {
            return Ok(());
        }
        Err(misdirected(format!(
            "This server runs without a key and answers only to loopback names, not to {host:?}: connect to 127.0.0.1, [::1] or \
             localhost, or configure a key to serve other names."
        )))
    }
}

fn misdirected(message: impl Into<String>) -> Refusal {
    Refusal::new(StatusCode::MISDIRECTED_REQUEST, "misdirected_request", message)
}

/// The host part of `host[:port]` (IPv6 in brackets, which are kept).
fn host_of(authority: &str) -> &str {
    let authority = authority.trim();
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        };
    }
    match authority.split_once(':') {
        Some((host, _port)) => host,
        None => authority,
    }
}

fn strip_brackets(host: &str) -> &str {
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host)
}

/// `localhost` or a loopback IP literal. An IP literal cannot be rebound, but `0.0.0.0` (which
/// some browsers let pages reach) is not loopback and is refused.
fn is_loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || strip_brackets(host).parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn check(policy: &HostPolicy, host: Option<&str>) -> Result<(), Refusal> {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_str(host).expect("header"));
        }
        policy.check(&headers, &Uri::from_static("/v1/models"))
    }

    #[test]
    fn loopback_names_with_or_without_port_are_accepted() {
        let policy = HostPolicy::loopback("127.0.0.1");
        for host in ["127.0.0.1", "127.0.0.1:8642", "[::1]", "[::1]:8642", "localhost", "LOCALHOST:8642", "127.0.0.2:1"] {
            assert_eq!(check(&policy, Some(host)), Ok(()), "{host}");
        }
    }

    #[test]
    fn other_names_are_misdirected() {
        let policy = HostPolicy::loopback("127.0.0.1");
        for host in ["evil.example", "evil.example:8642", "localhost.evil.example", "0.0.0.0:8642", "192.168.1.2", "[::]:8642"] {
            let refused = check(&policy, Some(host)).expect_err(host);
            assert_eq!(refused.status, StatusCode::MISDIRECTED_REQUEST, "{host}");
            assert!(refused.message.contains("loopback"), "{}", refused.message);
        }
        assert!(check(&policy, None).is_err(), "a request naming no host is refused too");
    }

    #[test]
    fn the_exact_bound_host_is_accepted() {
        let policy = HostPolicy::loopback("[::1]");
        assert_eq!(check(&policy, Some("[::1]:9000")), Ok(()));
        let named = HostPolicy::loopback("hermes.localhost");
        assert_eq!(check(&named, Some("Hermes.Localhost:8642")), Ok(()));
        assert!(check(&named, Some("other.localhost")).is_err());
    }

    #[test]
    fn any_accepts_everything() {
        assert_eq!(check(&HostPolicy::Any, Some("evil.example")), Ok(()));
        assert_eq!(check(&HostPolicy::Any, None), Ok(()));
    }

    #[test]
    fn http2_authority_is_used_without_a_host_header() {
        let policy = HostPolicy::loopback("127.0.0.1");
        assert_eq!(policy.check(&HeaderMap::new(), &Uri::from_static("http://127.0.0.1:8642/v1/models")), Ok(()));
        assert!(policy.check(&HeaderMap::new(), &Uri::from_static("http://evil.example/v1/models")).is_err());
    }
}
