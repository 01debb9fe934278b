//! What a Telegram allowlist entry can name: a numeric user id, or a `@username` (the handle
//! Telegram keeps unique to one account). First and last names are chosen freely and never match,
//! so an entry that is neither is a mistake the operator should hear about at start-up.

/// Why `entry` can never match a Telegram user, or `None` when it can (`*`, an id, a username).
pub fn entry_problem(entry: &str) -> Option<&'static str> {
    let entry = entry.trim();
    if entry == "*" || is_user_id(entry) {
        return None;
    }
    if entry.starts_with('-') && is_user_id(&entry[1..]) {
        return Some("a negative number is a group or channel id; allowlists name users");
    }
    if is_username(entry.strip_prefix('@').unwrap_or(entry)) {
        return None;
    }
    Some("neither a numeric user id nor a @username (4-32 letters, digits or _, starting with a letter); display names never match")
}

fn is_user_id(entry: &str) -> bool {
    !entry.is_empty() && entry.bytes().all(|b| b.is_ascii_digit())
}

/// Telegram usernames: 5-32 characters of `a-z`, `0-9` and `_`, starting with a letter (4 for the
/// short ones sold on Fragment).
fn is_username(name: &str) -> bool {
    (4..=32).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_usernames_pass_and_names_are_reported() {
        for fine in ["*", "5001", "@alice", "alice", "Alice_Smith", "@abcd"] {
            assert_eq!(entry_problem(fine), None, "{fine}");
        }
        for wrong in ["Alice Smith", "@al", "-1001234", "5001x!", "Zoë", "_alice", ""] {
            assert!(entry_problem(wrong).is_some(), "{wrong:?} is reported");
        }
    }
}
