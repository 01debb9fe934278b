//! What a Matrix allowlist entry can name: a full user id (`@local:server`). Display names are
//! chosen by users and a bare localpart names a different person on every homeserver, so
//! allowlists never match them; any other entry is reported at start-up instead of silently
//! never matching.

/// Why `entry` can never match a Matrix user, or `None` when it can (`*` or a full mxid).
pub fn entry_problem(entry: &str) -> Option<&'static str> {
    let entry = entry.trim();
    if entry == "*" || is_user_id(entry) {
        return None;
    }
    Some("not a full Matrix user id (such as @alice:example.org); display names and bare localparts never match")
}

/// `@localpart:server`, with a non-empty localpart of the characters the spec allows (historical
/// ids included: any printable ASCII but `:`) and a non-empty server name without spaces.
pub fn is_user_id(text: &str) -> bool {
    let Some(rest) = text.strip_prefix('@') else { return false };
    let Some((local, server)) = rest.split_once(':') else { return false };
    !local.is_empty()
        && local.bytes().all(|b| b.is_ascii_graphic() && b != b':')
        && !server.is_empty()
        && server.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_mxids_pass_and_names_are_reported() {
        for fine in ["*", "@alice:example.org", " @bob:localhost:8448 ", "@a.b-c_d=e/f:matrix.org", "@x:[::1]"] {
            assert_eq!(entry_problem(fine), None, "{fine}");
        }
        for wrong in ["alice", "@alice", "alice:example.org", "@:example.org", "@alice:", "Alice Smith", "@al ice:x.org", ""] {
            assert!(entry_problem(wrong).is_some(), "{wrong:?} is reported");
        }
    }
}
