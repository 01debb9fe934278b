//! What a Slack allowlist entry can name: a user id (`U…`, or `W…` on Enterprise Grid). Display
//! names, real names and e-mail addresses are chosen or changed by users, so allowlists never
//! match them; any other entry is reported at start-up instead of silently never matching.

/// Why `entry` can never match a Slack user, or `None` when it can (`*` or a user id).
pub fn entry_problem(entry: &str) -> Option<&'static str> {
    if is_user_id(entry.trim()) || entry.trim() == "*" {
        return None;
    }
    Some("not a Slack user id (such as U0123ABCDEF, from the profile's \"Copy member ID\"); names and e-mail addresses never match")
}

/// `U…`/`W…` followed by upper-case letters and digits, as Slack writes member ids.
pub fn is_user_id(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some('U' | 'W')) && text.len() >= 3 && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_ids_pass_and_names_are_reported() {
        for fine in ["*", "U0123ABCDEF", " W012AB ", "U0100"] {
            assert_eq!(entry_problem(fine), None, "{fine}");
        }
        for wrong in ["alice", "@alice", "alice@example.com", "<@U0123ABC>", "u0123abc", "C0123ABC", "U", ""] {
            assert!(entry_problem(wrong).is_some(), "{wrong:?} is reported");
        }
    }
}
