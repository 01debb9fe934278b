//! Which mail the bot answers, from its headers alone (nothing else is downloaded before this
//! says yes):
//!
//! * [`automated`]: auto-replies, bounces, bulk and list mail, no-reply senders and the bot's
//!   own mail are never answered (answering them loops or spams);
//! * [`authenticated`]: the `From` address is believed only when the receiving server's own
//!   `Authentication-Results` header (the topmost one carrying our `authserv-id`: headers lower
//!   down, or with another id, may have been written by the sender) reports DKIM, SPF or DMARC
//!   passing for the `From` domain.

/// The header fields of one mail, in order (topmost first), values unfolded.
pub type Headers = [(String, String)];

fn values<'a>(headers: &'a Headers, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim())
}

/// Why this mail must not be answered because a machine sent it, or `None` for a person's mail.
/// `from` is the sender's address, lower-cased; `own` the bot's.
pub fn automated(headers: &Headers, from: &str, own: &str) -> Option<String> {
    if from.eq_ignore_ascii_case(own) {
        return Some("mail from the bot's own address".into());
    }
    for value in values(headers, "Auto-Submitted") {
        let kind = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        if kind != "no" {
            return Some(format!("Auto-Submitted: {kind}"));
        }
    }
    for value in values(headers, "Precedence") {
        let kind = value.to_ascii_lowercase();
        if matches!(kind.as_str(), "bulk" | "list" | "junk" | "auto_reply") {
            return Some(format!("Precedence: {kind}"));
        }
    }
    for name in ["List-Id", "List-Unsubscribe", "X-Autoreply", "X-Autorespond", "X-Auto-Response-Suppress"] {
        if values(headers, name).next().is_some() {
            return Some(format!("a {name} header (list or automatic mail)"));
        }
    }
    if values(headers, "Return-Path").any(|v| v.replace(' ', "") == "<>") {
        return Some("an empty Return-Path (a bounce)".into());
    }
    let local = from.split('@').next().unwrap_or("").to_ascii_lowercase();
    let squashed: String = local.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    if matches!(local.as_str(), "mailer-daemon" | "postmaster")
        || ["noreply", "donotreply", "dontreply"].iter().any(|p| squashed.contains(p))
    {
        return Some(format!("a no-reply or system sender ({local})"));
    }
    None
}

/// One `method=result` of an `Authentication-Results` header, with its properties.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MethodResult {
    method: String,
    result: String,
    /// `ptype.property` → value, lower-cased (`header.d`, `smtp.mailfrom`, `header.from`).
    properties: Vec<(String, String)>,
}

/// Remove RFC 5322 comments `( … )`, which may nest and may hide anything.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    let mut quoted = false;
    for c in text.chars() {
        match c {
            '"' if depth == 0 => {
                quoted = !quoted;
                out.push(c);
            }
            '(' if !quoted => depth += 1,
            ')' if !quoted && depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The authserv-id and the results of one `Authentication-Results` value.
fn parse_results(value: &str) -> (String, Vec<MethodResult>) {
    let clean = strip_comments(value);
    let mut parts = clean.split(';');
    let authserv_id = parts.next().unwrap_or("").split_whitespace().next().unwrap_or("").to_ascii_lowercase();
    let mut results = Vec::new();
    for part in parts {
        let mut tokens = part.split_whitespace();
        let Some((method, result)) = tokens.next().and_then(|t| t.split_once('=')) else { continue };
        let properties = tokens
            .filter_map(|t| t.split_once('='))
            .map(|(k, v)| (k.to_ascii_lowercase(), v.trim_matches('"').to_ascii_lowercase()))
            .collect();
        results.push(MethodResult { method: method.to_ascii_lowercase(), result: result.to_ascii_lowercase(), properties });
    }
    (authserv_id, results)
}

/// The domain of an address or of a bare domain, lower-cased, without a trailing dot.
fn domain_of(text: &str) -> String {
    let text = text.trim().trim_start_matches('<').trim_end_matches('>');
    text.rsplit_once('@').map(|(_, d)| d).unwrap_or(text).trim_end_matches('.').to_ascii_lowercase()
}

/// Relaxed DMARC alignment: equal domains, or one a subdomain of the other's organisational
/// domain. Without a public-suffix list the organisational domain is not known, so only equality
/// and "the authenticated domain is a parent of the From domain, with at least two labels"
/// count; that never lets `evil.test` vouch for `example.test`.
fn aligned(authenticated: &str, from_domain: &str) -> bool {
    if authenticated.is_empty() {
        return false;
    }
    authenticated == from_domain || (authenticated.contains('.') && from_domain.ends_with(&format!(".{authenticated}")))
}

/// Whether the sender `from` (an address) is authenticated by the topmost
/// `Authentication-Results` header of `authserv_id`; `Err` says why not.
pub fn authenticated(headers: &Headers, authserv_id: &str, from: &str) -> Result<&'static str, String> {
    let wanted = authserv_id.trim().to_ascii_lowercase();
    let from_domain = domain_of(from);
    let mut others = 0usize;
    let Some(results) = values(headers, "Authentication-Results").find_map(|value| {
        let (id, results) = parse_results(value);
        if id == wanted {
            Some(results)
        } else {
            others += 1;
            None
        }
    }) else {
        return Err(if others > 0 {
            format!("no Authentication-Results header from {wanted} ({others} from other servers are not believed)")
        } else {
            format!("no Authentication-Results header from {wanted}")
        });
    };
    let prop = |r: &MethodResult, key: &str| r.properties.iter().find(|(k, _)| k == key).map(|(_, v)| domain_of(v));
    for r in results.iter().filter(|r| r.result == "pass") {
        match r.method.as_str() {
            "dmarc" if prop(r, "header.from").is_some_and(|d| d == from_domain) => return Ok("dmarc=pass"),
            "dkim" if prop(r, "header.d").or_else(|| prop(r, "header.i")).is_some_and(|d| aligned(&d, &from_domain)) => {
                return Ok("dkim=pass aligned with From");
            }
            "spf" if prop(r, "smtp.mailfrom").is_some_and(|d| aligned(&d, &from_domain)) => return Ok("spf=pass aligned with From"),
            _ => {}
        }
    }
    let summary: Vec<String> = results.iter().map(|r| format!("{}={}", r.method, r.result)).collect();
    Err(format!(
        "the Authentication-Results of {wanted} show no DKIM, SPF or DMARC pass aligned with {from_domain} ({})",
        if summary.is_empty() { "no results".to_string() } else { summary.join(", ") }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    #[test]
    fn machine_mail_is_recognised() {
        let own = "bot@example.test";
        let person = "alice@example.test";
        for headers in [
            h(&[("Auto-Submitted", "auto-replied")]),
            h(&[("Auto-Submitted", "auto-generated; owner-email=x@y")]),
            h(&[("Precedence", "bulk")]),
            h(&[("Precedence", "List")]),
            h(&[("Precedence", "junk")]),
            h(&[("List-Id", "<news.example.test>")]),
            h(&[("List-Unsubscribe", "<mailto:u@example.test>")]),
            h(&[("Return-Path", "<>")]),
        ] {
            assert!(automated(&headers, person, own).is_some(), "{headers:?}");
        }
        for sender in [
            "MAILER-DAEMON@example.test",
            "postmaster@example.test",
            "no-reply@x.test",
            "noreply@x.test",
            "do-not-reply@x.test",
            "do_not_reply@x.test",
            own,
        ] {
            assert!(automated(&[], &sender.to_lowercase(), own).is_some(), "{sender}");
        }
        assert_eq!(
            automated(&h(&[("Auto-Submitted", "no"), ("Precedence", "normal"), ("Return-Path", "<alice@example.test>")]), person, own),
            None
        );
        assert!(automated(&[], "nora.reply@example.test", own).is_none(), "a person whose name merely contains reply");
    }

    const ID: &str = "mx.example.test";

    #[test]
    fn an_aligned_pass_from_our_server_authenticates() {
        for value in [
            "mx.example.test; dkim=pass header.d=example.test header.s=s1",
            "mx.example.test; spf=pass smtp.mailfrom=alice@example.test",
            "MX.Example.Test (our server); dmarc=pass (p=reject) header.from=example.test",
            "mx.example.test; dkim=pass header.d=example.test; spf=fail smtp.mailfrom=x@evil.test",
            "mx.example.test; dkim=pass header.i=@example.test",
        ] {
            assert!(authenticated(&h(&[("Authentication-Results", value)]), ID, "alice@example.test").is_ok(), "{value}");
        }
        // A subdomain's From aligned with the parent's DKIM signature (relaxed alignment).
        let sub = h(&[("Authentication-Results", "mx.example.test; dkim=pass header.d=example.test")]);
        assert!(authenticated(&sub, ID, "alice@mail.example.test").is_ok());
    }

    #[test]
    fn forged_or_foreign_results_do_not_authenticate() {
        let cases = [
            vec![],
            h(&[("Authentication-Results", "evil.test; dkim=pass header.d=example.test")]),
            h(&[("Authentication-Results", "mx.example.test; dkim=pass header.d=evil.test")]),
            h(&[("Authentication-Results", "mx.example.test; dkim=pass header.d=test")]),
            h(&[("Authentication-Results", "mx.example.test; dkim=fail header.d=example.test; spf=softfail smtp.mailfrom=example.test")]),
            h(&[("Authentication-Results", "mx.example.test; spf=pass smtp.mailfrom=alice@evil.test")]),
            h(&[("Authentication-Results", "mx.example.test; dkim=none (dkim=pass header.d=example.test)")]),
            h(&[("Authentication-Results", "mx.example.test; dkim=pass header.d=notexample.test")]),
            // Only the topmost header of our server counts: the sender wrote the lower one.
            h(&[
                ("Authentication-Results", "mx.example.test; dkim=fail header.d=example.test"),
                ("Authentication-Results", "mx.example.test; dkim=pass header.d=example.test"),
            ]),
            // A lookalike id does not count.
            h(&[("Authentication-Results", "mx.example.test.evil.test; dkim=pass header.d=example.test")]),
        ];
        for headers in cases {
            let verdict = authenticated(&headers, ID, "alice@example.test");
            assert!(verdict.is_err(), "{headers:?} → {verdict:?}");
        }
        let foreign = h(&[("Authentication-Results", "evil.test; dkim=pass header.d=example.test")]);
        assert!(authenticated(&foreign, ID, "alice@example.test").unwrap_err().contains("other servers"));
    }
}
