//! What a Discord allowlist entry can name: a user id (a snowflake). Usernames, global names and
//! server nicknames are shown to people but allowlists never match them, so any other entry is a
//! mistake the operator should hear about at start-up rather than an entry that silently never
//! matches.

/// Why `entry` can never match a Discord user, or `None` when it can (`*` or a snowflake).
pub fn entry_problem(entry: &str) -> Option<&'static str> {
    let entry = entry.trim();
    if entry == "*" || entry.parse::<u64>().is_ok_and(|id| id > 0) {
        return None;
    }
    Some("not a Discord user id (a number such as 123456789012345678, from Copy User ID in developer mode); names never match")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snowflakes_pass_and_names_are_reported() {
        for fine in ["*", "123456789012345678", " 42 "] {
            assert_eq!(entry_problem(fine), None, "{fine}");
        }
        for wrong in ["alice", "@alice", "alice#1234", "<@123456789012345678>", "0", "-5", ""] {
            assert!(entry_problem(wrong).is_some(), "{wrong:?} is reported");
        }
    }
}
