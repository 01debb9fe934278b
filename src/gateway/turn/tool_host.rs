//! The gateway's side of the tools that reach outward ([`ToolHost`]): session search scoped to the
//! asking user's own conversations, `send_message` through the outbound path (outbox, chunking,
//! idempotency), and `clarify` questions answered by the user's next message.
//!
//! The host holds strong handles to exactly what it uses — the session log and the routes (not
//! the whole store), the [`Deliverer`], the clarify board and the home channels — none of which
//! own the agent whose tools call it, so it is built before the agent's turns run and needs no
//! back-pointer.

use crate::agent::tools::cronjob::CronJobArgs;
use crate::agent::tools::{HostError, PastMessage, SendId, SessionScope, ToolHost};
use crate::cron::manage::CronJobs;
use crate::gateway::delivery::deliverer::Deliverer;
use crate::gateway::delivery::home_channels::HomeChannels;
use crate::gateway::delivery::outbound::Delivery;
use crate::gateway::delivery::reply::{Reply, ReplyKey};
use crate::gateway::turn::clarify::ClarifyBoard;
use crate::store::{Routes, SearchScope, SessionLog};
use async_trait::async_trait;
use hermes_adapter::{ChatTarget, Platform};
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct GatewayToolHost {
    /// Past messages, for session search.
    log: Arc<dyn SessionLog>,
    /// Who talked where: which chats a user may have messages sent to.
    routes: Arc<dyn Routes>,
    deliverer: Arc<Deliverer>,
    clarify: Arc<ClarifyBoard>,
    homes: HomeChannels,
    /// Scheduled jobs, for the `cronjob` tool.
    cron: CronJobs,
}

/// The store concerns the host reads.
pub(crate) struct HostStore {
    pub log: Arc<dyn SessionLog>,
    pub routes: Arc<dyn Routes>,
}

impl GatewayToolHost {
    pub(crate) fn new(
        store: HostStore,
        deliverer: Arc<Deliverer>,
        clarify: Arc<ClarifyBoard>,
        homes: HomeChannels,
        cron: CronJobs,
    ) -> Self {
        Self { log: store.log, routes: store.routes, deliverer, clarify, homes, cron }
    }
}

/// Where a resolved `send_message` target stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TargetKind {
    /// The asking conversation's own chat.
    Origin,
    /// A configured home channel.
    Home,
    /// Any other chat: allowed only where the asking user has talked to the bot.
    Other,
}

/// Resolve a `send_message` target against the asking conversation.
pub(crate) fn resolve_target(
    homes: &HomeChannels,
    deliverer: &Deliverer,
    scope: &SessionScope,
    target: &str,
) -> Result<(ChatTarget, TargetKind), HostError> {
    let target = target.trim();
    let origin = || ChatTarget {
        platform: Platform::new(scope.platform.clone()),
        chat_id: scope.chat_id.clone(),
        thread_id: scope.thread_id.clone(),
    };
    let home_of = |platform: &str| -> Result<ChatTarget, HostError> {
        homes.get(platform).ok_or_else(|| {
            HostError::BadTarget(format!("no home channel is set for {platform}; use an explicit `{platform}:<chat_id>` target"))
        })
    };
    let resolved = match target {
        "" | "origin" | "here" => (origin(), TargetKind::Origin),
        "home" => (home_of(&scope.platform)?, TargetKind::Home),
        t if !t.contains(':') => (home_of(&t.to_ascii_lowercase())?, TargetKind::Home),
        t => {
            let parsed = ChatTarget::parse(t).map_err(|e| {
                HostError::BadTarget(format!(
                    "{t:?} is not a target ({e}); use origin, home, <platform> or <platform>:<chat_id>[:<thread_id>]"
                ))
            })?;
            let origin = origin();
            let is_home = home_of(parsed.platform.as_str()).is_ok_and(|home| home.chat_id == parsed.chat_id);
            let kind = if parsed.platform == origin.platform && parsed.chat_id == origin.chat_id {
                TargetKind::Origin
            } else if is_home {
                TargetKind::Home
            } else {
                TargetKind::Other
            };
            (parsed, kind)
        }
    };
    if deliverer.adapter(resolved.0.platform.as_str()).is_none() {
        return Err(HostError::BadTarget(format!("the platform `{}` is not connected", resolved.0.platform)));
    }
    Ok(resolved)
}

/// Whether the asking user may have a message sent to `target`: their own chat and the home
/// channels always; another chat only if they have talked to the bot there themselves (so the
/// agent cannot be used to post into chats its user is not part of).
async fn may_send_to(routes: &dyn Routes, scope: &SessionScope, target: &ChatTarget, kind: &TargetKind) -> Result<(), HostError> {
    if *kind != TargetKind::Other {
        return Ok(());
    }
    let refused = || {
        HostError::Refused(format!(
            "{}:{} is not this chat, a home channel, or a chat where this user has talked to the bot; messages go only there",
            target.platform, target.chat_id
        ))
    };
    let Some(user) = scope.user_id.as_deref() else { return Err(refused()) };
    match routes.user_talked_in(target.platform.as_str(), &target.chat_id, user).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(refused()),
        Err(e) => Err(HostError::Store(e.to_string())),
    }
}

#[async_trait]
impl ToolHost for GatewayToolHost {
    async fn search_sessions(&self, scope: &SessionScope, query: &str, limit: usize) -> Result<Vec<PastMessage>, HostError> {
        // The asking user's conversations in this chat only; without a user id (webhooks), only
        // this session key's history.
        let search_scope =
            SearchScope::Origin { platform: scope.platform.clone(), chat_id: scope.chat_id.clone(), user_id: scope.user_id.clone() };
        let hits = self.log.search_messages(query, search_scope, limit).await.map_err(|e| HostError::Store(e.to_string()))?;
        Ok(hits
            .into_iter()
            .map(|h| PastMessage { session_id: h.session_id, role: h.role, snippet: h.snippet, timestamp: h.timestamp.timestamp_millis() })
            .collect())
    }

    async fn send_message(&self, scope: &SessionScope, target: &str, text: &str, id: &SendId) -> Result<String, HostError> {
        let (resolved, kind) = resolve_target(&self.homes, &self.deliverer, scope, target)?;
        may_send_to(self.routes.as_ref(), scope, &resolved, &kind).await?;
        let adapter = self
            .deliverer
            .adapter(resolved.platform.as_str())
            .ok_or_else(|| HostError::BadTarget("the platform is not connected".into()))?;
        if !adapter.capabilities().supports_async_delivery {
            return Err(HostError::Unavailable(format!("`{}` cannot receive messages outside a request", resolved.platform)));
        }
        match self.deliverer.send(Reply::markdown(resolved.clone(), text), ReplyKey::send_message(id)).await {
            Delivery::Delivered => Ok(format!("Sent to {}:{}.", resolved.platform, resolved.chat_id)),
            Delivery::Queued => Ok(format!(
                "{} is not accepting messages right now; the message is queued and will be delivered when it recovers. Do not send it again.",
                resolved.platform
            )),
            Delivery::InDoubt => Ok("The platform did not confirm the delivery; it may have arrived. Do not send it again.".into()),
            Delivery::Failed => Err(HostError::Delivery("the platform refused or could not be reached (see the gateway log)".into())),
        }
    }

    async fn cronjob(&self, scope: &SessionScope, args: CronJobArgs) -> Result<String, HostError> {
        let rights = crate::gateway::delivery::rights::DeliveryRights { routes: self.routes.as_ref(), homes: &self.homes };
        crate::gateway::turn::cron_tool::act(&self.cron, &rights, scope, args).await
    }

    async fn clarify(&self, scope: &SessionScope, question: &str, choices: &[String], timeout: Duration) -> Result<String, HostError> {
        let target = ChatTarget {
            platform: Platform::new(scope.platform.clone()),
            chat_id: scope.chat_id.clone(),
            thread_id: scope.thread_id.clone(),
        };
        let answer = self.clarify.ask(&scope.session_key);
        let mut text = format!("❓ {question}");
        for (i, c) in choices.iter().enumerate() {
            text.push_str(&format!("\n{}. {c}", i + 1));
        }
        text.push_str("\n\n_Reply to answer._");
        let key = ReplyKey::Clarify { session_id: scope.session_id.clone(), question_id: uuid::Uuid::new_v4().to_string() };
        if self.deliverer.send(Reply::markdown(target, text), key).await == Delivery::Failed {
            self.clarify.cancel(&scope.session_key);
            return Err(HostError::Delivery("the question could not be delivered".into()));
        }
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(reply)) => {
                // A number picks a choice.
                let picked = reply.trim().parse::<usize>().ok().and_then(|n| choices.get(n.wrapping_sub(1))).cloned();
                Ok(picked.unwrap_or(reply))
            }
            Ok(Err(_)) => Err(HostError::NoAnswer("the question was withdrawn".into())),
            Err(_) => {
                self.clarify.cancel(&scope.session_key);
                Err(HostError::NoAnswer(format!("the user did not answer within {} s", timeout.as_secs())))
            }
        }
    }
}
