//! Who may talk, as the configuration says at start-up: the allowlists and admins per platform,
//! pairing where a platform offers it and nobody is named, and what the log tells the operator
//! about it (nobody let in, strangers refused without an answer, no admin).

use super::auth::AuthPolicy;
use crate::config::Config;
use std::sync::Arc;

/// The allowlists and admins the configuration names, per platform (no pairing yet).
pub(crate) fn auth_policy(config: &Config, platforms: &[String]) -> AuthPolicy {
    let mut policy =
        AuthPolicy::new(config.gateway.allowed_users.clone(), config.gateway.allow_all_users).with_admins_named(config.admins_named());
    for p in platforms {
        policy = policy.with_platform(p, config.allowed_users(p), config.allow_all(p)).with_admins(p, config.admin_users(p));
    }
    policy
}

/// Who may talk: the allowlists, plus pairing on the chat platforms that have none. The log says
/// when configuration lets nobody in but pairing, and that paired users are not admins.
pub(crate) fn authorization(
    config: &Config,
    folders: &crate::gateway::folders::Folders,
    adapters: &[Arc<dyn hermes_adapter::PlatformAdapter>],
    platform_names: &[String],
) -> Arc<AuthPolicy> {
    let auth = auth_policy(config, platform_names);
    let offered = |p: &str| config.platforms.get(p).and_then(|b| b.facts).is_some_and(|f| f.pairing.is_offered());
    let pairing = super::pairing::Pairing::for_adapters(folders.pairing(), adapters, |p| offered(p) && !auth.names_users_on(p));
    let pairs_on: Vec<String> = pairing.platforms().map(str::to_string).collect();
    let auth = auth.with_pairing(Arc::new(pairing));
    match (auth.nothing_allowed(), pairs_on.is_empty()) {
        (true, true) => tracing::warn!(
            "no allowlist is configured: every chat user is denied (API and webhook requests are authorized by their key or signature). Set <PLATFORM>_ALLOWED_USERS or GATEWAY_ALLOWED_USERS (or GATEWAY_ALLOW_ALL_USERS=true) to let people in"
        ),
        (true, false) => tracing::warn!(
            platforms = ?pairs_on,
            "no allowlist is configured: chat users get in only by pairing (a stranger's DM is answered with a code; approve it with `hermes pairing approve <platform> <code>`). API and webhook requests are authorized by their key or signature. Set <PLATFORM>_ALLOWED_USERS or GATEWAY_ALLOWED_USERS (or GATEWAY_ALLOW_ALL_USERS=true) to let people in without pairing"
        ),
        (false, false) => {
            tracing::info!(platforms = ?pairs_on, "no allowlist for these platforms: strangers' DMs there are answered with a pairing code")
        }
        (false, true) => {}
    }
    for (platform, why) in pairing_refusals(config, platform_names, &auth) {
        tracing::info!(platform, "strangers on {platform} are not offered pairing: {why}");
    }
    // Someone can get in (allow-all, `*` or pairing), yet nobody may act as an admin.
    if config.no_admin_exists() && (!auth.nothing_allowed() || !pairs_on.is_empty()) {
        tracing::warn!(
            "no admin exists: users let in by allow_all_users, `*` or pairing are not admins, so /yolo, /approve always, /sethome, /pair, the global /model, MEMORY.md and skills are refused to everyone; name the owner in gateway.admin_users (or <PLATFORM>_ADMIN_USERS)"
        );
    }
    Arc::new(auth)
}

/// The running platforms whose configuration names nobody but whose registration does not offer
/// pairing, with the registration's reason: their strangers are denied without an answer.
fn pairing_refusals<'a>(config: &'a Config, platform_names: &'a [String], auth: &AuthPolicy) -> Vec<(&'a str, &'static str)> {
    platform_names
        .iter()
        .filter(|p| !auth.names_users_on(p))
        .filter_map(|p| {
            let facts = config.platforms.get(p)?.facts?;
            match facts.pairing {
                hermes_adapter::PairingOffer::NotOffered { why } if facts.people => Some((p.as_str(), why)),
                _ => None,
            }
        })
        .collect()
}
