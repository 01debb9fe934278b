//! Session keys: the deterministic string that decides which conversation a message belongs to
//! (behaviour reference §3.1). Ids may contain colons, so keys are opaque strings.

use hermes_adapter::{ChatType, SessionSource};

/// How group and thread sessions are shared.
#[derive(Debug, Clone, Copy)]
pub struct KeyPolicy {
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

pub const NAMESPACE: &str = "agent:main";

pub fn session_key(source: &SessionSource, policy: KeyPolicy) -> String {
    let platform = source.platform.as_str();
    let thread = source.thread_id.as_deref().filter(|t| !t.is_empty());
    let chat = Some(source.chat_id.as_str()).filter(|c| !c.is_empty());
    let participant = source.participant().filter(|p| !p.is_empty());
    if source.chat_type == ChatType::Dm {
        let mut key = format!("{NAMESPACE}:{platform}:dm");
        if let Some(id) = chat.or(participant) {
            key.push(':');
            key.push_str(id);
        }
        if let Some(t) = thread {
            key.push(':');
            key.push_str(t);
        }
        return key;
    }
    let mut key = format!("{NAMESPACE}:{platform}:{}:{}", source.chat_type.as_str(), source.chat_id);
    if let Some(t) = thread {
        key.push(':');
        key.push_str(t);
    }
    let per_user = if thread.is_some() { policy.thread_sessions_per_user } else { policy.group_sessions_per_user };
    if per_user && let Some(p) = participant {
        key.push(':');
        key.push_str(p);
    }
    key
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
        assert_eq!(session_key(&src("telegram", "1", ChatType::Dm, Some("1"), Some("9")), p), "agent:main:telegram:dm:1:9");
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
        assert_eq!(a, "agent:main:slack:group:C01:1700000000.123");
        assert_eq!(a, b);
        let shared = KeyPolicy { group_sessions_per_user: false, thread_sessions_per_user: true };
        assert_eq!(session_key(&src("discord", "987", ChatType::Group, Some("1"), None), shared), "agent:main:discord:group:987");
        assert_eq!(session_key(&src("slack", "C01", ChatType::Group, Some("U1"), Some("t")), shared), "agent:main:slack:group:C01:t:U1");
    }

    #[test]
    fn webhook_key_matches_the_reference_example() {
        let s = src("webhook", "webhook:github:abc", ChatType::Webhook, Some("webhook:github"), None);
        assert_eq!(session_key(&s, KeyPolicy::default()), "agent:main:webhook:webhook:webhook:github:abc:webhook:github");
    }
}
