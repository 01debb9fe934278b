//! The words of a mail as the agent reads them: the new text only (quoted history and signature
//! removed), the subject in front of a new conversation, and safe names for attachments.

/// The reply the person wrote, without the history their mail program quoted below (or above)
/// it: `>` lines, an "On … wrote:" line and everything after it, a forwarded/original-message
/// separator and what follows, and a signature after `-- `.
pub fn strip_quoted(body: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let lines: Vec<&str> = body.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_end_matches('\r');
        let trimmed = line.trim();
        if line == "-- " || line == "--" {
            break;
        }
        if is_separator(trimmed) {
            break;
        }
        // "On Mon, 1 Jan 2024, Alice <a@x> wrote:" may be wrapped over two lines.
        let joined = match lines.get(i + 1) {
            Some(next) => format!("{trimmed} {}", next.trim()),
            None => trimmed.to_string(),
        };
        if is_attribution(trimmed) {
            break;
        }
        if trimmed.starts_with("On ") && !trimmed.ends_with(':') && is_attribution(&joined) {
            break;
        }
        if trimmed.starts_with('>') {
            i += 1;
            continue;
        }
        kept.push(line);
        i += 1;
    }
    let text = kept.join("\n");
    text.trim().to_string()
}

/// The words a reply quotes, `>` marks taken off one level (deeper levels keep theirs), up to a
/// signature: what the sender's mail program shows as the mail answered. Empty when nothing is
/// quoted.
pub fn quoted(body: &str) -> String {
    let mut lines = Vec::new();
    for line in body.lines().map(|l| l.trim_end_matches('\r')) {
        if line == "-- " || line == "--" {
            break;
        }
        if let Some(rest) = line.trim_start().strip_prefix('>') {
            lines.push(rest.strip_prefix(' ').unwrap_or(rest));
        }
    }
    lines.join("\n").trim().to_string()
}

fn is_attribution(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    (lower.starts_with("on ") && lower.ends_with("wrote:")) || (lower.starts_with("le ") && lower.ends_with("a écrit :"))
}

fn is_separator(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.starts_with("-----original message-----")
        || lower.starts_with("---------- forwarded message")
        || lower == "________________________________"
}

/// Whether a subject continues a conversation (`Re:`, `RE:`, `Aw:`, `Re[2]:` …).
pub fn is_reply_subject(subject: &str) -> bool {
    let lower = subject.trim_start().to_ascii_lowercase();
    ["re:", "aw:", "sv:", "re[", "re :"].iter().any(|p| lower.starts_with(p))
}

/// The agent's text: `[Subject: …]` in front unless the subject is a reply's.
pub fn with_subject(subject: Option<&str>, body: &str) -> String {
    match subject.map(str::trim).filter(|s| !s.is_empty() && !is_reply_subject(s)) {
        Some(subject) => {
            let subject: String = subject.chars().filter(|c| !c.is_control()).take(300).collect();
            if body.is_empty() { format!("[Subject: {subject}]") } else { format!("[Subject: {subject}]\n\n{body}") }
        }
        None => body.to_string(),
    }
}

/// The subject of a reply: `Re: ` once in front of the original's.
pub fn reply_subject(original: Option<&str>) -> String {
    let original: String = original.unwrap_or("").chars().filter(|c| !c.is_control()).collect();
    let original = original.trim();
    if original.is_empty() {
        "Re: your message".to_string()
    } else if original.to_ascii_lowercase().starts_with("re:") {
        original.to_string()
    } else {
        format!("Re: {original}")
    }
}

/// A file name that is safe to create in the cache folder: only the last path component of the
/// sender's name, letters, digits, `.`, `-`, `_`, no leading dot, at most 100 characters.
pub fn safe_file_name(untrusted: &str) -> String {
    let last = untrusted.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = last.chars().map(|c| if c.is_alphanumeric() || "-_.".contains(c) { c } else { '_' }).take(100).collect();
    let cleaned = cleaned.trim_start_matches('.').to_string();
    if cleaned.is_empty() || cleaned.chars().all(|c| c == '_' || c == '.') { "attachment".to_string() } else { cleaned }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_history_and_signature_are_removed() {
        let body = "Sounds good, see you at 5.\n\nOn Mon, 1 Jan 2024 at 10:00, Bob <bob@example.test> wrote:\n> Shall we meet?\n> Bob\n";
        assert_eq!(strip_quoted(body), "Sounds good, see you at 5.");
        let wrapped = "Yes.\nOn Mon, 1 Jan 2024 at 10:00, Bob Example\n<bob@example.test> wrote:\n> old";
        assert_eq!(strip_quoted(wrapped), "Yes.");
        assert_eq!(strip_quoted("First\n> quoted inline\nSecond\n-- \nAlice\nCEO"), "First\nSecond");
        assert_eq!(strip_quoted("Hi\n-----Original Message-----\nFrom: x"), "Hi");
        assert_eq!(strip_quoted("On the other hand, I agree."), "On the other hand, I agree.");
    }

    #[test]
    fn the_quoted_mail_is_read_one_level_deep_up_to_the_signature() {
        let body = "Why?\n\nOn Fri, Bot <b@x> wrote:\n> run this\n>> older\n>\n> now\n-- \n> sig quote";
        assert_eq!(quoted(body), "run this\n> older\n\nnow");
        assert_eq!(quoted("No quote here."), "");
    }

    #[test]
    fn subjects_lead_new_conversations_only() {
        assert_eq!(with_subject(Some("Plans"), "hi"), "[Subject: Plans]\n\nhi");
        assert_eq!(with_subject(Some("Re: Plans"), "hi"), "hi");
        assert_eq!(with_subject(Some("RE: Plans"), "hi"), "hi");
        assert_eq!(with_subject(None, "hi"), "hi");
        assert_eq!(reply_subject(Some("Plans")), "Re: Plans");
        assert_eq!(reply_subject(Some("Re: Plans")), "Re: Plans");
        assert_eq!(reply_subject(Some("Evil\r\nBcc: x@y")), "Re: EvilBcc: x@y");
    }

    #[test]
    fn hostile_file_names_stay_in_their_folder() {
        assert_eq!(safe_file_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_file_name("..\\..\\boot.ini"), "boot.ini");
        assert_eq!(safe_file_name(".bashrc"), "bashrc");
        assert_eq!(safe_file_name(".."), "attachment");
        assert_eq!(safe_file_name("a b;rm -rf.txt"), "a_b_rm_-rf.txt");
        assert_eq!(safe_file_name(""), "attachment");
        assert!(safe_file_name(&"x".repeat(500)).len() <= 100);
    }
}
