//! Session keys: the deterministic string that decides which conversation a message belongs to
//! (behaviour reference §3.1). Ids may contain colons, so keys are opaque strings.

use hermes_adapter::{ChatType, SessionSource};

/// How group and thread sessions are shared.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyPolicy {
    /// Each member of a group has a private session with the bot (default true).
    pub group_sessions_per_user: bool,
    /// Each member of a thread has a private session (default false: threads are shared).
    pub thread_sessions_per_user: bool,
}

impl Default for KeyPolicy {
    fn default() -> Self {
        Self { group_sessions_per_user: true, thread_sessions_per_user: false }
    }
}

pub(crate) const NAMESPACE: &str = "agent:main";

/// The session key of `source`. It is injective: two different conversations never share a
/// key. Ids are escaped (`%` → `%25`, `:` → `%3A`) so an id with a colon cannot pass for two
/// parts, and a thread is labelled (`…:<chat>:thread:<thread>`) so a forum topic never reads as
/// a group member's private session (`…:<chat>:<user>`). Keys of ids without colons and without
/// threads are Hermes' own.
pub(crate) fn session_key(source: &SessionSource, policy: KeyPolicy) -> String {
    let platform = escape(source.platform.as_str());
    let thread = source.thread_id.as_deref().filter(|t| !t.is_empty()).map(escape);
    let chat = Some(source.chat_id.as_str()).filter(|c| !c.is_empty()).map(escape);
    let participant = source.participant().filter(|p| !p.is_empty()).map(escape);
    let mut key = format!("{NAMESPACE}:{platform}");
    let mut push = |part: &str| {
        key.push(':');
        key.push_str(part);
    };
    if source.chat_type == ChatType::Dm {
        push("dm");
        if let Some(id) = chat.or(participant) {
            push(&id);
        }
        if let Some(t) = &thread {
            push("thread");
            push(t);
        }
        return key;
    }
    push(source.chat_type.as_str());
    push(&chat.unwrap_or_default());
    if let Some(t) = &thread {
        push("thread");
        push(t);
    }
    let per_user = if thread.is_some() { policy.thread_sessions_per_user } else { policy.group_sessions_per_user };
    if per_user && let Some(p) = &participant {
        push(p);
    }
    key
}

/// An id as one part of a key.
fn escape(id: &str) -> String {
    if !id.contains([':', '%']) {
        return id.to_string();
    }
    id.replace('%', "%25").replace(':', "%3A")
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::Platform;

    fn src(platform: &str, chat: &str, ty: ChatType, user: Option<&str>, thread: Option<&str>) -> SessionSource {
        let mut s = SessionSource::new(Platform::new(platform), chat, ty);
        s.user_id = user.map(str::to_string);
        s.thread_id = thread.map(str::to_string);
        s
    }

    #[test]
    fn dm_keys_follow_the_chat() {
        let p = KeyPolicy::default();
        assert_eq!(session_key(&src("telegram", "123456", ChatType::Dm, Some("123456"), None), p), "agent:main:telegram:dm:123456");
        assert_eq!(session_key(&src("telegram", "1", ChatType::Dm, Some("1"), Some("9")), p), "agent:main:telegram:dm:1:thread:9");
        assert_eq!(session_key(&src("signal", "", ChatType::Dm, Some("u7"), None), p), "agent:main:signal:dm:u7");
        assert_eq!(session_key(&src("x", "", ChatType::Dm, None, None), p), "agent:main:x:dm");
    }

    #[test]
    fn groups_are_per_user_and_threads_shared_by_default() {
        let p = KeyPolicy::default();
        assert_eq!(session_key(&src("discord", "987", ChatType::Group, Some("1"), None), p), "agent:main:discord:group:987:1");
        assert_eq!(session_key(&src("discord", "987", ChatType::Group, Some("2"), None), p), "agent:main:discord:group:987:2");
        let a = session_key(&src("slack", "C01", ChatType::Group, Some("U1"), Some("1700000000.123")), p);
        let b = session_key(&src("slack", "C01", ChatType::Group, Some("U2"), Some("1700000000.123")), p);
        assert_eq!(a, "agent:main:slack:group:C01:thread:1700000000.123");
        assert_eq!(a, b);
        let shared = KeyPolicy { group_sessions_per_user: false, thread_sessions_per_user: true };
        assert_eq!(session_key(&src("discord", "987", ChatType::Group, Some("1"), None), shared), "agent:main:discord:group:987");
        assert_eq!(
            session_key(&src("slack", "C01", ChatType::Group, Some("U1"), Some("t")), shared),
            "agent:main:slack:group:C01:thread:t:U1"
        );
    }

    #[test]
    fn ids_with_colons_stay_one_part() {
        let s = src("webhook", "webhook:github:abc", ChatType::Webhook, Some("webhook:github"), None);
        assert_eq!(session_key(&s, KeyPolicy::default()), "agent:main:webhook:webhook:webhook%3Agithub%3Aabc:webhook%3Agithub");
        let room = session_key(&src("matrix", "!r:hs", ChatType::Group, Some("@a:hs"), None), KeyPolicy::default());
        let other = session_key(&src("matrix", "!r", ChatType::Group, Some("hs:@a:hs"), None), KeyPolicy::default());
        assert_ne!(room, other);
    }

    /// A Telegram forum topic and a group member's private session used to share a key when the
    /// topic id equalled the member's id: one user could read another's conversation.
    #[test]
    fn a_forum_topic_never_shares_a_key_with_a_members_private_session() {
        let p = KeyPolicy::default();
        let topic = session_key(&src("telegram", "-1001", ChatType::Group, Some("7"), Some("42")), p);
        let member = session_key(&src("telegram", "-1001", ChatType::Group, Some("42"), None), p);
        assert_ne!(topic, member);
        let per_user_threads = KeyPolicy { group_sessions_per_user: true, thread_sessions_per_user: true };
        let topic_member = session_key(&src("telegram", "-1001", ChatType::Group, Some("7"), Some("42")), per_user_threads);
        let thread_named_like_a_user = session_key(&src("telegram", "-1001", ChatType::Group, Some("thread"), None), per_user_threads);
        assert_ne!(topic_member, thread_named_like_a_user);
        assert_eq!(topic, "agent:main:telegram:group:-1001:thread:42");
    }
}
