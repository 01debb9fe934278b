//! What an email allowlist entry can name: a full address. The adapter reports senders with
//! their address lower-cased as both id and verified handle, so an entry matches whatever its
//! case; a bare name, a domain or a display name can never match and is reported at start-up.

/// Why `entry` can never match an email sender, or `None` when it can (`*` or an address).
pub fn entry_problem(entry: &str) -> Option<&'static str> {
    let entry = entry.trim();
    if entry == "*" || is_address(entry) {
        return None;
    }
    Some("not a full email address (name@domain); names, domains and display names never match")
}

/// `local@domain` with no spaces, brackets or second `@`, and a dotted or `localhost` domain.
pub fn is_address(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else { return false };
    !local.is_empty()
        && !domain.is_empty()
        && !local.contains('@')
        && text.chars().all(|c| !c.is_whitespace() && !c.is_control() && !"<>,;\"()[]\\".contains(c))
        && domain.split('.').all(|label| !label.is_empty())
}

/// The address as sessions and allowlists see it: trimmed and lower-cased.
pub fn normalize(address: &str) -> String {
    address.trim().to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_pass_and_anything_else_is_reported() {
        for fine in ["*", "alice@example.com", " Bob.Smith+x@Mail.Example.org ", "root@localhost"] {
            assert_eq!(entry_problem(fine), None, "{fine}");
        }
        for wrong in ["alice", "@alice", "example.com", "Alice Smith", "<alice@example.com>", "a@b@c", "a@", "a@b..c", ""] {
            assert!(entry_problem(wrong).is_some(), "{wrong:?} is reported");
        }
    }
}
