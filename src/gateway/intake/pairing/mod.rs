//! DM pairing: how a stranger gets in on a platform whose configuration names nobody (no
//! allowlist, no allow-all). Their DM is answered with a one-time code; the operator approves it
//! (`hermes pairing approve <platform> <code>`, or an admin's `/pair approve <code>` in chat) and
//! from their next message on they are an allowed user of that platform. Where an allowlist
//! exists, strangers get no answer at all: the operator has said who may talk.
//!
//! [`store`] keeps codes, approvals and limits in files. This module is the gateway's side of
//! it: the [`Pairing`] handle, which [`crate::gateway::intake::auth::AuthPolicy`] asks whether a user is approved
//! (cached, and reloaded when the file changes, so approvals and revocations made by the CLI
//! apply to the next message without a restart), and [`answer_stranger`], which the router hands
//! a refused DM to.

pub(crate) mod store;

use crate::gateway::delivery::deliverer::Deliverer;
use crate::gateway::delivery::reply::Finish;
use crate::gateway::delivery::reply::{Reply, ReplyKey};
use crate::store::Inbox;
use crate::store::folders::Revision;
use hermes_adapter::{ChatType, InboundEvent, PlatformAdapter, SessionSource};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use store::{ApprovedUser, CodeRequest, PairingError, PairingStore};

/// Said once when no code can be issued (three are waiting, or approvals are locked).
pub(crate) const TOO_MANY_REQUESTS: &str = "Too many pairing requests right now~ Please try again later!";

/// The reply carrying a new code, with the command the owner runs.
pub(crate) fn code_message(platform: &str, code: &str) -> String {
    format!(
        "Hi~ I don't recognize you yet!\n\nHere's your pairing code: `{code}`\n\nAsk the bot owner to run:\n`hermes pairing approve {platform} {code}`"
    )
}

/// The gateway's pairing: which platforms pair, and who is approved on each.
#[derive(Debug)]
pub(crate) struct Pairing {
    store: PairingStore,
    /// Platforms whose strangers are answered with a code.
    pairs_on: BTreeSet<String>,
    approved: Mutex<HashMap<String, ApprovedCache>>,
}

/// One platform's approved ids, as of one revision of its document.
#[derive(Debug)]
struct ApprovedCache {
    revision: Option<Revision>,
    ids: HashSet<String>,
}

impl Pairing {
    pub(crate) fn new(store: PairingStore, pairs_on: impl IntoIterator<Item = String>) -> Self {
        Self { store, pairs_on: pairs_on.into_iter().collect(), approved: Mutex::new(HashMap::new()) }
    }

    /// The gateway's pairing for `adapters`: a platform pairs when its registration offers
    /// pairing (people read its chats as they happen, and a stranger's id is the platform's own)
    /// and the configuration names nobody on it; the caller's `pairs` decides both.
    pub(crate) fn for_adapters(store: PairingStore, adapters: &[Arc<dyn PlatformAdapter>], pairs: impl Fn(&str) -> bool) -> Self {
        let pairs_on = adapters.iter().filter(|a| pairs(a.platform().as_str())).map(|a| a.platform().to_string());
        Self::new(store, pairs_on)
    }

    pub(crate) fn platforms(&self) -> impl Iterator<Item = &str> {
        self.pairs_on.iter().map(String::as_str)
    }

    /// Whether a refused message from `source` is answered with a code: a person's DM, with an
    /// id, on a platform that pairs. Groups, bots and senders without an id get silence.
    pub(crate) fn answers(&self, source: &SessionSource) -> bool {
        source.chat_type == ChatType::Dm
            && !source.is_bot
            && source.user_id.as_deref().is_some_and(|id| !id.is_empty())
            && self.pairs_on.contains(source.platform.as_str())
    }

    /// Whether anyone is approved on any platform now.
    pub(crate) fn any_approved(&self) -> bool {
        self.store.approved().is_ok_and(|users| !users.is_empty())
    }

    /// Whether `user_id` is approved on `platform`. The document's revision is looked at on
    /// every call (one `stat`, or one indexed query in a shared store) and the document read
    /// again only when it changed.
    pub(crate) fn is_approved(&self, platform: &str, user_id: &str) -> bool {
        let revision = match self.store.approved_revision(platform) {
            Ok(revision) => revision,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the approved pairing users; treating none as approved");
                return false;
            }
        };
        let mut cache = self.approved.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = cache.entry(platform.to_string()).or_insert(ApprovedCache { revision: None, ids: HashSet::new() });
        if entry.revision != revision {
            // Read after the revision: a write in between leaves a newer document than the one
            // recorded, so the next call reads it again; never an older one.
            entry.ids = match revision {
                None => HashSet::new(),
                Some(_) => self.store.approved_ids(platform).unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "cannot read the approved pairing users; treating none as approved");
                    HashSet::new()
                }),
            };
            entry.revision = revision;
        }
        entry.ids.contains(user_id)
    }

    /// The reply to a refused DM from `source`: a new code, the refusal said once, or nothing.
    pub(crate) async fn reply_to(&self, source: &SessionSource) -> Option<String> {
        let platform = source.platform.to_string();
        let user_id = source.user_id.clone().unwrap_or_default();
        // The name only helps the operator recognise the request; it is never matched.
        let user_name =
            source.user_display_name.clone().or_else(|| source.user_handle.as_ref().map(|h| format!("@{h}"))).unwrap_or_default();
        let store = self.store.clone();
        let (p, u) = (platform.clone(), user_id.clone());
        let requested = tokio::task::spawn_blocking(move || store.request_code(&p, &u, &user_name, store::now())).await;
        match requested {
            Ok(Ok(CodeRequest::Issued(code))) => {
                tracing::info!(%platform, %user_id, "a stranger's DM was answered with a pairing code (approve it with `hermes pairing approve`)");
                Some(code_message(&platform, &code))
            }
            Ok(Ok(CodeRequest::TooMany)) => {
                tracing::info!(%platform, %user_id, "a stranger asked for a pairing code, but none can be issued now (too many pending, or approvals locked)");
                Some(TOO_MANY_REQUESTS.to_string())
            }
            Ok(Ok(CodeRequest::Silent)) => {
                tracing::debug!(%platform, %user_id, "a stranger's DM inside the pairing rate limit was ignored");
                None
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, %platform, %user_id, "could not issue a pairing code; the DM is ignored");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "the pairing task failed; the DM is ignored");
                None
            }
        }
    }

    /// Approve a code on `platform` (the chat command's path; the CLI uses the store directly).
    pub(crate) async fn approve(&self, platform: &str, code: &str) -> Result<ApprovedUser, PairingError> {
        let store = self.store.clone();
        let (platform, code) = (platform.to_string(), code.to_string());
        tokio::task::spawn_blocking(move || store.approve(&platform, &code, store::now()))
            .await
            .map_err(|e| PairingError::Io { path: self.store.location(), source: std::io::Error::other(e) })?
    }
}

/// Answer a stranger's refused DM (see [`Pairing::reply_to`]) and close its inbox row. Nothing of
/// the message reaches the agent. Runs in its own task, so the router never waits on a send.
pub(crate) async fn answer_stranger(pairing: Arc<Pairing>, deliverer: Arc<Deliverer>, inbox: Arc<dyn Inbox>, event: InboundEvent) {
    if let Some(text) = pairing.reply_to(&event.source).await {
        let target = event.answer_target();
        let reply = Reply::markdown(target, text).finishing(Some(Finish::stop()));
        deliverer.send(reply, ReplyKey::Pairing(event.event_id.clone())).await;
    }
    if let Err(e) = inbox.inbox_mark_done(&event.event_id).await {
        tracing::warn!(error = %e, "could not close an unauthorized inbox row");
    }
}

#[cfg(test)]
mod tests;
