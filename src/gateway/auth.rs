//! Who may talk to the agent. Deny by default: a user is allowed only by an allowlist entry or an
//! explicit allow-all switch. Adapters that authenticate their callers themselves (a bearer key, an
//! HMAC signature) mark events `authorized_upstream`.

use hermes_adapter::{ChatType, InboundEvent};
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthDecision {
    Allowed,
    /// Not allowed; in a group this is silent, in a DM pairing (a later issue) may answer.
    Denied {
        direct: bool,
    },
}

#[derive(Debug, Clone, Default)]
struct PlatformRule {
    users: Vec<String>,
    allow_all: bool,
}

/// The resolved allowlists.
#[derive(Debug, Clone, Default)]
pub struct AuthPolicy {
    platforms: HashMap<String, PlatformRule>,
    global_users: Vec<String>,
    global_allow_all: bool,
}

impl AuthPolicy {
    pub fn new(global_users: Vec<String>, global_allow_all: bool) -> Self {
        Self { platforms: HashMap::new(), global_users: normalize(global_users), global_allow_all }
    }

    pub fn with_platform(mut self, platform: &str, users: Vec<String>, allow_all: bool) -> Self {
        self.platforms.insert(platform.to_ascii_lowercase(), PlatformRule { users: normalize(users), allow_all });
        self
    }

    /// True when no allowlist and no allow-all exists anywhere: every user is denied.
    pub fn nothing_allowed(&self) -> bool {
        !self.global_allow_all && self.global_users.is_empty() && self.platforms.values().all(|r| !r.allow_all && r.users.is_empty())
    }

    pub fn decide(&self, event: &InboundEvent) -> AuthDecision {
        if event.authorized_upstream {
            return AuthDecision::Allowed;
        }
        let source = &event.source;
        let denied = AuthDecision::Denied { direct: source.chat_type == ChatType::Dm };
        if source.is_bot {
            return denied;
        }
        let ids: Vec<&str> = [source.user_id.as_deref(), source.user_id_alt.as_deref(), source.user_name.as_deref()]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect();
        if source.user_id.is_none() && source.user_id_alt.is_none() {
            return denied;
        }
        let rule = self.platforms.get(source.platform.as_str());
        if self.global_allow_all || rule.is_some_and(|r| r.allow_all) {
            return AuthDecision::Allowed;
        }
        let listed = |list: &[String]| list.iter().any(|entry| entry == "*" || ids.iter().any(|id| matches_entry(entry, id)));
        if rule.is_some_and(|r| listed(&r.users)) || listed(&self.global_users) {
            return AuthDecision::Allowed;
        }
        denied
    }
}

fn normalize(list: Vec<String>) -> Vec<String> {
    list.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

/// An entry matches an id exactly, or a user name with or without a leading `@`, case-insensitively.
fn matches_entry(entry: &str, id: &str) -> bool {
    let entry = entry.trim_start_matches('@');
    let id = id.trim_start_matches('@');
    entry == id || entry.eq_ignore_ascii_case(id) && !entry.chars().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::{Platform, SessionSource};

    fn event(platform: &str, user: Option<&str>, ty: ChatType) -> InboundEvent {
        let mut s = SessionSource::new(Platform::new(platform), "c1", ty);
        s.user_id = user.map(str::to_string);
        InboundEvent::text("e1", s, "hi")
    }

    #[test]
    fn denies_by_default() {
        let p = AuthPolicy::new(vec![], false);
        assert!(p.nothing_allowed());
        assert_eq!(p.decide(&event("telegram", Some("1"), ChatType::Dm)), AuthDecision::Denied { direct: true });
        assert_eq!(p.decide(&event("telegram", Some("1"), ChatType::Group)), AuthDecision::Denied { direct: false });
    }

    #[test]
    fn platform_and_global_allowlists_and_wildcards() {
        let p = AuthPolicy::new(vec!["42".into()], false).with_platform("telegram", vec!["1".into(), "@Alice".into()], false);
        assert_eq!(p.decide(&event("telegram", Some("1"), ChatType::Dm)), AuthDecision::Allowed);
        assert_eq!(p.decide(&event("discord", Some("1"), ChatType::Dm)), AuthDecision::Denied { direct: true });
        assert_eq!(p.decide(&event("discord", Some("42"), ChatType::Dm)), AuthDecision::Allowed);
        let mut by_name = event("telegram", Some("999"), ChatType::Dm);
        by_name.source.user_name = Some("alice".into());
        assert_eq!(p.decide(&by_name), AuthDecision::Allowed);
        let star = AuthPolicy::new(vec![], false).with_platform("slack", vec!["*".into()], false);
        assert_eq!(star.decide(&event("slack", Some("U1"), ChatType::Group)), AuthDecision::Allowed);
        assert!(!star.nothing_allowed());
    }

    #[test]
    fn allow_all_switches_upstream_bots_and_missing_ids() {
        let all = AuthPolicy::new(vec![], true);
        assert_eq!(all.decide(&event("x", Some("7"), ChatType::Dm)), AuthDecision::Allowed);
        assert_eq!(all.decide(&event("x", None, ChatType::Dm)), AuthDecision::Denied { direct: true });
        let mut bot = event("x", Some("7"), ChatType::Dm);
        bot.source.is_bot = true;
        assert_eq!(all.decide(&bot), AuthDecision::Denied { direct: true });
        let mut upstream = event("api_server", None, ChatType::Dm);
        upstream.authorized_upstream = true;
        assert_eq!(AuthPolicy::default().decide(&upstream), AuthDecision::Allowed);
        let platform_all = AuthPolicy::new(vec![], false).with_platform("telegram", vec![], true);
        assert_eq!(platform_all.decide(&event("telegram", Some("5"), ChatType::Group)), AuthDecision::Allowed);
        assert_eq!(platform_all.decide(&event("discord", Some("5"), ChatType::Group)), AuthDecision::Denied { direct: false });
    }
}
