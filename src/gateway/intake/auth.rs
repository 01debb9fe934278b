//! Who may talk to the agent. Deny by default: a user is allowed only by an allowlist entry, an
//! explicit allow-all switch, or the operator's approval of their pairing code
//! ([`crate::gateway::intake::pairing`]; approvals are per platform and add to the allowlists). Adapters that
//! authenticate their callers themselves (a bearer key, an HMAC signature) mark events
//! `authorized_upstream`.
//!
//! Entries name people by what the platform vouches for, never by what a sender can type into a
//! profile: an entry matches the sender's platform user id exactly, or the verified handle the
//! adapter read from the platform (a Telegram `username`: `@` optional, any case). Display names,
//! chat titles and channel names are never compared (see [`hermes_adapter::SessionSource`]).
//!
//! Admins are a tier inside the allowed users (`gateway.admin_users`, `<PLATFORM>_ADMIN_USERS`):
//! only they change what every user shares (the global model, `MEMORY.md`, skills) and widen
//! what the agent may do (`/yolo`, `/approve always`, `/pair approve`). With no admin named
//! anywhere, every user an allowlist names by id or handle is one, so single-user installs need
//! no setting; users let in by `allow_all_users`, `*` or pairing were named by nobody and are
//! never admins unless listed (the start-up log, `hermes doctor` and the audit say when no admin
//! exists).
//!
//! The same policy answers adapters that ask before fetching a message's attachments
//! ([`hermes_adapter::SenderPolicy`]), so a file is only downloaded for a sender the router will
//! let in.

use crate::gateway::intake::pairing::Pairing;
use hermes_adapter::{ChatType, InboundEvent, SenderPolicy, SessionSource};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthDecision {
    Allowed,
    /// Not allowed; in a group this is silent, in a DM pairing may answer (see
    /// [`crate::gateway::intake::pairing::Pairing::answers`]).
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
pub(crate) struct AuthPolicy {
    platforms: HashMap<String, PlatformRule>,
    global_users: Vec<String>,
    global_allow_all: bool,
    /// Per platform, its admins (already merged with the global list by the config).
    admins: HashMap<String, Vec<String>>,
    admins_named: bool,
    /// Users approved by pairing, and where strangers are offered a code.
    pairing: Option<Arc<Pairing>>,
}

impl AuthPolicy {
    pub(crate) fn new(global_users: Vec<String>, global_allow_all: bool) -> Self {
        Self { platforms: HashMap::new(), global_users: normalize(global_users), global_allow_all, ..Self::default() }
    }

    pub(crate) fn with_platform(mut self, platform: &str, users: Vec<String>, allow_all: bool) -> Self {
        self.platforms.insert(platform.to_ascii_lowercase(), PlatformRule { users: normalize(users), allow_all });
        self
    }

    /// `users` are the admins of `platform`; naming any admin anywhere makes the tier exclusive.
    pub(crate) fn with_admins(mut self, platform: &str, users: Vec<String>) -> Self {
        let users = normalize(users);
        self.admins_named |= !users.is_empty();
        self.admins.insert(platform.to_ascii_lowercase(), users);
        self
    }

    /// Admins are named somewhere in the configuration (perhaps for a platform not running now):
    /// then only listed users are admins, on every platform.
    pub(crate) fn with_admins_named(mut self, named: bool) -> Self {
        self.admins_named |= named;
        self
    }

    /// Users approved through pairing are allowed too (on the platform they paired on).
    pub(crate) fn with_pairing(mut self, pairing: Arc<Pairing>) -> Self {
        self.pairing = Some(pairing);
        self
    }

    pub(crate) fn pairing(&self) -> Option<&Arc<Pairing>> {
        self.pairing.as_ref()
    }

    /// Whether the configuration names who may use `platform` (an allowlist, its own or the
    /// global one, or an allow-all switch). Where it does, strangers are not offered pairing.
    pub(crate) fn names_users_on(&self, platform: &str) -> bool {
        let rule = self.platforms.get(&platform.to_ascii_lowercase());
        self.global_allow_all || !self.global_users.is_empty() || rule.is_some_and(|r| r.allow_all || !r.users.is_empty())
    }

    /// Whether the sender of `event` may change what every user shares. Callers the operator
    /// authenticated upstream (an API key, a signed webhook whose route lists the toolsets) act
    /// for the operator; their reach is limited by their toolsets instead.
    pub(crate) fn is_admin(&self, event: &InboundEvent) -> bool {
        if event.authorized_upstream {
            return true;
        }
        if self.decide_sender(&event.source) != AuthDecision::Allowed {
            return false;
        }
        if !self.admins_named {
            // Only an allowlist that names people by id or handle makes its users admins. An
            // allow-all switch or `*` names nobody, and a stranger let in by pairing was named by
            // nobody either: neither may hand themselves `/yolo` or `/approve always`.
            return self.names_explicitly(&event.source);
        }
        let source = &event.source;
        let (Some(user_id), Some(admins)) = (source.user_id.as_deref(), self.admins.get(source.platform.as_str())) else {
            return false;
        };
        let handle = source.user_handle.as_deref().map(|h| h.strip_prefix('@').unwrap_or(h)).filter(|h| !h.is_empty());
        admins.iter().any(|entry| entry != "*" && names_sender(entry, user_id, handle))
    }

    /// Whether more than one person may talk to the agent: then each keeps their own `USER.md`.
    pub(crate) fn serves_several_users(&self) -> bool {
        let rules = self.platforms.values();
        let allow_all = self.global_allow_all || self.platforms.values().any(|r| r.allow_all || r.users.iter().any(|u| u == "*"));
        let mut named: Vec<&str> =
            rules.flat_map(|r| r.users.iter()).chain(&self.global_users).map(|u| u.trim_start_matches('@')).collect();
        named.sort_unstable();
        named.dedup();
        // Pairing may let anyone in later, and may already have.
        let pairing = self.pairing.as_ref().is_some_and(|p| p.platforms().next().is_some() || p.any_approved());
        allow_all || named.len() > 1 || pairing
    }

    /// True when no allowlist and no allow-all exists anywhere: every user is denied, apart from
    /// those approved by pairing.
    pub(crate) fn nothing_allowed(&self) -> bool {
        !self.global_allow_all && self.global_users.is_empty() && self.platforms.values().all(|r| !r.allow_all && r.users.is_empty())
    }

    pub(crate) fn decide(&self, event: &InboundEvent) -> AuthDecision {
        if event.authorized_upstream {
            return AuthDecision::Allowed;
        }
        self.decide_sender(&event.source)
    }

    /// The decision for a sender, from the source alone.
    pub(crate) fn decide_sender(&self, source: &SessionSource) -> AuthDecision {
        let configured = self.configured_decision(source);
        let approved = |user_id: &str| self.pairing.as_ref().is_some_and(|p| p.is_approved(source.platform.as_str(), user_id));
        match (configured, source.user_id.as_deref().filter(|id| !id.is_empty())) {
            // By id only: a pairing approval names the account that was sent the code.
            (AuthDecision::Denied { .. }, Some(user_id)) if !source.is_bot && approved(user_id) => AuthDecision::Allowed,
            _ => configured,
        }
    }

    /// Whether an allowlist names this sender by id or handle (not through `*` or allow-all).
    fn names_explicitly(&self, source: &SessionSource) -> bool {
        let Some(user_id) = source.user_id.as_deref().filter(|id| !id.is_empty()) else {
            return false;
        };
        if source.is_bot {
            return false;
        }
        let handle = source.user_handle.as_deref().map(|h| h.strip_prefix('@').unwrap_or(h)).filter(|h| !h.is_empty());
        let listed = |list: &[String]| list.iter().any(|entry| entry != "*" && names_sender(entry, user_id, handle));
        self.platforms.get(source.platform.as_str()).is_some_and(|r| listed(&r.users)) || listed(&self.global_users)
    }

    /// The decision of the configuration alone (allowlists and allow-all switches), pairing aside.
    fn configured_decision(&self, source: &SessionSource) -> AuthDecision {
        let denied = AuthDecision::Denied { direct: source.chat_type == ChatType::Dm };
        if source.is_bot {
            return denied;
        }
        let Some(user_id) = source.user_id.as_deref().filter(|id| !id.is_empty()) else {
            return denied;
        };
        let rule = self.platforms.get(source.platform.as_str());
        if self.global_allow_all || rule.is_some_and(|r| r.allow_all) {
            return AuthDecision::Allowed;
        }
        let handle = source.user_handle.as_deref().map(|h| h.strip_prefix('@').unwrap_or(h)).filter(|h| !h.is_empty());
        let listed = |list: &[String]| list.iter().any(|entry| entry == "*" || names_sender(entry, user_id, handle));
        if rule.is_some_and(|r| listed(&r.users)) || listed(&self.global_users) {
            return AuthDecision::Allowed;
        }
        denied
    }
}

impl SenderPolicy for AuthPolicy {
    fn allows(&self, source: &SessionSource) -> bool {
        self.decide_sender(source) == AuthDecision::Allowed
    }

    fn offers_pairing(&self, platform: &str) -> bool {
        self.pairing.as_ref().is_some_and(|p| p.platforms().any(|pairs| pairs == platform))
    }
}

fn normalize(list: Vec<String>) -> Vec<String> {
    list.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

/// An entry names the sender by their id, exactly, or by their verified handle, `@` optional and
/// in any case. An all-digit entry is an id and never compared with a handle.
fn names_sender(entry: &str, user_id: &str, handle: Option<&str>) -> bool {
    if entry == user_id {
        return true;
    }
    let wanted = entry.strip_prefix('@').unwrap_or(entry);
    let is_id = wanted.bytes().all(|b| b.is_ascii_digit());
    !wanted.is_empty() && !is_id && handle.is_some_and(|h| h.eq_ignore_ascii_case(wanted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::Platform;

    fn event(platform: &str, user: Option<&str>, ty: ChatType) -> InboundEvent {
        let mut s = SessionSource::new(Platform::new(platform), "c1", ty);
        s.user_id = user.map(str::to_string);
        InboundEvent::text("e1", s, "hi")
    }

    /// A sender on `platform` with this id, handle and display name.
    fn sender(platform: &str, id: &str, handle: Option<&str>, display: Option<&str>) -> InboundEvent {
        let mut e = event(platform, Some(id), ChatType::Dm);
        e.source.user_handle = handle.map(str::to_string);
        e.source.user_display_name = display.map(str::to_string);
        e
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
        let star = AuthPolicy::new(vec![], false).with_platform("slack", vec!["*".into()], false);
        assert_eq!(star.decide(&event("slack", Some("U1"), ChatType::Group)), AuthDecision::Allowed);
        assert!(!star.nothing_allowed());
    }

    #[test]
    fn a_handle_entry_matches_the_verified_handle_with_or_without_at_in_any_case() {
        let p = AuthPolicy::new(vec![], false).with_platform("telegram", vec!["@Alice".into(), "bob".into()], false);
        assert_eq!(p.decide(&sender("telegram", "999", Some("alice"), None)), AuthDecision::Allowed);
        assert_eq!(p.decide(&sender("telegram", "998", Some("BOB"), None)), AuthDecision::Allowed);
        assert_eq!(p.decide(&sender("telegram", "997", Some("@bob"), None)), AuthDecision::Allowed);
        assert_eq!(p.decide(&sender("telegram", "996", Some("alicex"), None)), AuthDecision::Denied { direct: true });
    }

    #[test]
    fn display_names_never_authorize_whatever_they_say() {
        let p = AuthPolicy::new(vec!["77".into()], false).with_platform("telegram", vec!["5001".into(), "@alice".into()], false);
        for spoof in ["5001", "alice", "@alice", "ALICE", "77", "*"] {
            let e = sender("telegram", "6001", None, Some(spoof));
            assert_eq!(p.decide(&e), AuthDecision::Denied { direct: true }, "display name {spoof:?}");
            let mut in_group = e.clone();
            in_group.source.chat_type = ChatType::Group;
            in_group.source.chat_name = Some(spoof.to_string());
            assert_eq!(p.decide(&in_group), AuthDecision::Denied { direct: false }, "chat named {spoof:?}");
        }
    }

    #[test]
    fn ids_match_exactly_and_never_through_a_handle() {
        let p = AuthPolicy::new(vec![], false).with_platform("telegram", vec!["5001".into(), "@5002".into()], false);
        // A numeric entry names an id; a handle that reads like it (impossible on Telegram, but
        // not assumed) does not match it.
        assert_eq!(p.decide(&sender("telegram", "6001", Some("5001"), None)), AuthDecision::Denied { direct: true });
        assert_eq!(p.decide(&sender("telegram", "6002", Some("5002"), None)), AuthDecision::Denied { direct: true });
        assert_eq!(p.decide(&sender("telegram", "50011", None, None)), AuthDecision::Denied { direct: true });
        assert_eq!(p.decide(&sender("telegram", "5001", None, None)), AuthDecision::Allowed);
        // Ids are case-sensitive (Slack `U…`), and an mxid entry matches the mxid id.
        let ids = AuthPolicy::new(vec![], false).with_platform("matrix", vec!["@alice:example.org".into()], false);
        assert_eq!(ids.decide(&sender("matrix", "@alice:example.org", None, None)), AuthDecision::Allowed);
        assert_eq!(
            ids.decide(&sender("matrix", "@mallory:evil.org", None, Some("@alice:example.org"))),
            AuthDecision::Denied { direct: true }
        );
        let slack = AuthPolicy::new(vec![], false).with_platform("slack", vec!["U01ABC".into()], false);
        assert_eq!(slack.decide(&sender("slack", "u01abc", None, None)), AuthDecision::Denied { direct: true });
    }

    #[test]
    fn without_named_admins_every_allowed_user_is_one() {
        let p = AuthPolicy::new(vec![], false).with_platform("telegram", vec!["5001".into()], false).with_admins("telegram", vec![]);
        assert!(p.is_admin(&sender("telegram", "5001", None, None)));
        assert!(!p.is_admin(&sender("telegram", "6001", None, Some("5001"))), "a stranger is never an admin");
    }

    #[test]
    fn allow_all_star_and_pairing_make_nobody_an_admin_when_none_is_named() {
        let stranger = sender("telegram", "6001", Some("owner"), Some("Owner"));
        let allow_all = AuthPolicy::new(vec![], false).with_platform("telegram", vec![], true);
        assert_eq!(allow_all.decide(&stranger), AuthDecision::Allowed);
        assert!(!allow_all.is_admin(&stranger), "allow_all_users lets a stranger talk, not run /yolo");
        let global = AuthPolicy::new(vec![], true);
        assert!(!global.is_admin(&stranger), "GATEWAY_ALLOW_ALL_USERS names nobody");
        let star = AuthPolicy::new(vec!["*".into()], false);
        assert!(!star.is_admin(&stranger), "`*` names nobody");
        let mixed = AuthPolicy::new(vec![], false).with_platform("telegram", vec!["*".into(), "5001".into()], false);
        assert!(mixed.is_admin(&sender("telegram", "5001", None, None)), "the one named by id still is");
        assert!(!mixed.is_admin(&stranger));
    }

    #[test]
    fn named_admins_are_matched_by_id_or_handle_never_by_display_name() {
        let p = AuthPolicy::new(vec![], false)
            .with_platform("telegram", vec!["5001".into(), "5002".into(), "@carol".into()], false)
            .with_admins("telegram", vec!["5001".into(), "@carol".into()])
            .with_admins("discord", vec![]);
        assert!(p.is_admin(&sender("telegram", "5001", None, None)));
        assert!(p.is_admin(&sender("telegram", "7001", Some("Carol"), None)));
        assert!(!p.is_admin(&sender("telegram", "5002", None, Some("5001"))), "an allowed user naming themselves after the admin");
        assert!(!p.is_admin(&sender("telegram", "5002", Some("carolx"), Some("carol"))));
        assert!(!p.is_admin(&sender("discord", "5001", None, None)), "admin lists are per platform");
        let mut upstream = sender("api_server", "anyone", None, None);
        upstream.authorized_upstream = true;
        assert!(p.is_admin(&upstream), "the key holder is the operator");
    }

    #[test]
    fn several_users_means_two_distinct_entries_or_allow_all() {
        let one = AuthPolicy::new(vec!["5001".into()], false).with_platform("telegram", vec!["5001".into()], false);
        assert!(!one.serves_several_users());
        let two = AuthPolicy::new(vec![], false).with_platform("telegram", vec!["5001".into(), "@bob".into()], false);
        assert!(two.serves_several_users());
        assert!(AuthPolicy::new(vec![], true).serves_several_users());
        assert!(AuthPolicy::new(vec![], false).with_platform("discord", vec!["*".into()], false).serves_several_users());
    }

    #[test]
    fn a_handle_without_an_id_is_not_enough() {
        let p = AuthPolicy::new(vec![], false).with_platform("telegram", vec!["@alice".into()], false);
        let mut e = sender("telegram", "1", Some("alice"), None);
        e.source.user_id = None;
        assert_eq!(p.decide(&e), AuthDecision::Denied { direct: true });
    }

    #[test]
    fn the_sender_policy_adapters_ask_is_the_routers_decision() {
        let p = AuthPolicy::new(vec![], false).with_platform("telegram", vec!["5001".into()], false);
        assert!(p.allows(&sender("telegram", "5001", None, None).source));
        assert!(!p.allows(&sender("telegram", "6001", None, Some("5001")).source));
        let mut bot = sender("telegram", "5001", None, None);
        bot.source.is_bot = true;
        assert!(!p.allows(&bot.source));
    }

    #[test]
    fn pairing_is_offered_only_where_the_gateway_pairs() {
        use crate::gateway::intake::pairing::{Pairing, store::PairingStore};
        assert!(!AuthPolicy::default().offers_pairing("matrix"), "no pairing configured: none offered");
        let pairing = Pairing::new(PairingStore::new("/nonexistent".into()), ["matrix".to_string()]);
        let p = AuthPolicy::default().with_pairing(Arc::new(pairing));
        assert!(p.offers_pairing("matrix"));
        assert!(!p.offers_pairing("telegram") && !p.offers_pairing("Matrix"), "exact platform names only");
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
