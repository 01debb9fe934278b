//! The gateway's side of the tools that reach outward ([`ToolHost`]): session search scoped to the
//! asking user's own conversations, `send_message` through the outbound path (outbox, chunking,
//! idempotency), and `clarify` questions answered by the user's next message.

use super::outbound::{self, Delivery};
use super::services::Services;
use crate::agent::tools::{PastMessage, SessionScope, ToolHost};
use crate::store::SearchScope;
use async_trait::async_trait;
use hermes_adapter::{ChatTarget, Platform};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

/// Holds the services weakly: the services own the agent, whose tools call this host.
#[derive(Default)]
pub struct GatewayToolHost {
    services: OnceLock<Weak<Services>>,
}

impl GatewayToolHost {
    pub fn bind(&self, services: &Arc<Services>) {
        // Bound once at start-up; a second bind would be a wiring bug and is ignored.
        let _ = self.services.set(Arc::downgrade(services));
    }

    fn services(&self) -> Result<Arc<Services>, String> {
        self.services.get().and_then(Weak::upgrade).ok_or_else(|| "the gateway is shutting down".to_string())
    }
}

/// Where a resolved `send_message` target stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetKind {
    /// The asking conversation's own chat.
    Origin,
    /// A configured home channel.
    Home,
    /// Any other chat: allowed only where the asking user has talked to the bot.
    Other,
}

/// Resolve a `send_message` target against the asking conversation.
pub fn resolve_target(services: &Services, scope: &SessionScope, target: &str) -> Result<(ChatTarget, TargetKind), String> {
    let target = target.trim();
    let origin = || ChatTarget {
        platform: Platform::new(scope.platform.clone()),
        chat_id: scope.chat_id.clone(),
        thread_id: scope.thread_id.clone(),
    };
    let home_of = |platform: &str| -> Result<ChatTarget, String> {
        let home = services
            .config
            .platforms
            .others
            .get(platform)
            .and_then(|p| p.home_channel.clone())
            .ok_or_else(|| format!("no home channel is set for {platform}; use an explicit `{platform}:<chat_id>` target"))?;
        ChatTarget::parse(&format!("{platform}:{home}")).map_err(|e| format!("the home channel of {platform} ({home:?}) is not valid: {e}"))
    };
    let resolved = match target {
        "" | "origin" | "here" => (origin(), TargetKind::Origin),
        "home" => (home_of(&scope.platform)?, TargetKind::Home),
        t if !t.contains(':') => (home_of(&t.to_ascii_lowercase())?, TargetKind::Home),
        t => {
            let parsed = ChatTarget::parse(t)
                .map_err(|e| format!("{t:?} is not a target ({e}); use origin, home, <platform> or <platform>:<chat_id>[:<thread_id>]"))?;
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
    if services.adapter(resolved.0.platform.as_str()).is_none() {
        return Err(format!("the platform `{}` is not connected", resolved.0.platform));
    }
    Ok(resolved)
}

/// Whether the asking user may have a message sent to `target`: their own chat and the home
/// channels always; another chat only if they have talked to the bot there themselves (so the
/// agent cannot be used to post into chats its user is not part of).
async fn may_send_to(services: &Services, scope: &SessionScope, target: &ChatTarget, kind: &TargetKind) -> Result<(), String> {
    if *kind != TargetKind::Other {
        return Ok(());
    }
    let refused = || {
        format!(
            "{}:{} is not this chat, a home channel, or a chat where this user has talked to the bot; messages go only there",
            target.platform, target.chat_id
        )
    };
    let Some(user) = scope.user_id.as_deref() else { return Err(refused()) };
    match services.store.user_talked_in(target.platform.as_str(), &target.chat_id, user).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(refused()),
        Err(e) => Err(format!("cannot check the target chat: {e}")),
    }
}

#[async_trait]
impl ToolHost for GatewayToolHost {
    async fn search_sessions(&self, scope: &SessionScope, query: &str, limit: usize) -> Result<Vec<PastMessage>, String> {
        let services = self.services()?;
        // The asking user's conversations in this chat only; without a user id (webhooks), only
        // this session key's history.
        let search_scope =
            SearchScope::Origin { platform: scope.platform.clone(), chat_id: scope.chat_id.clone(), user_id: scope.user_id.clone() };
        let hits = services.store.search_messages(query, search_scope, limit).await.map_err(|e| e.to_string())?;
        Ok(hits
            .into_iter()
            .map(|h| PastMessage { session_id: h.session_id, role: h.role, snippet: h.snippet, timestamp: h.timestamp.timestamp_millis() })
            .collect())
    }

    async fn send_message(&self, scope: &SessionScope, target: &str, text: &str, key: &str) -> Result<String, String> {
        let services = self.services()?;
        let (resolved, kind) = resolve_target(&services, scope, target)?;
        may_send_to(&services, scope, &resolved, &kind).await?;
        let adapter = services.adapter(resolved.platform.as_str()).ok_or("the platform is not connected")?;
        if !adapter.capabilities().supports_async_delivery {
            return Err(format!("`{}` cannot receive messages outside a request", resolved.platform));
        }
        match outbound::deliver(&services, &resolved, None, text, key, None).await {
            Delivery::Delivered => Ok(format!("Sent to {}:{}.", resolved.platform, resolved.chat_id)),
            Delivery::InDoubt => Ok("The platform did not confirm the delivery; it may have arrived. Do not send it again.".into()),
            Delivery::Failed => Err("the platform refused or could not be reached (see the gateway log)".into()),
        }
    }

    async fn clarify(&self, scope: &SessionScope, question: &str, choices: &[String], timeout: Duration) -> Result<String, String> {
        let services = self.services()?;
        let target = ChatTarget {
            platform: Platform::new(scope.platform.clone()),
            chat_id: scope.chat_id.clone(),
            thread_id: scope.thread_id.clone(),
        };
        let answer = services.clarify.ask(&scope.session_key);
        let mut text = format!("❓ {question}");
        for (i, c) in choices.iter().enumerate() {
            text.push_str(&format!("\n{}. {c}", i + 1));
        }
        text.push_str("\n\n_Reply to answer._");
        let key = format!("clarify:{}:{}", scope.session_id, uuid::Uuid::new_v4());
        if outbound::deliver(&services, &target, None, &text, &key, None).await == Delivery::Failed {
            services.clarify.cancel(&scope.session_key);
            return Err("the question could not be delivered".into());
        }
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(reply)) => {
                // A number picks a choice.
                let picked = reply.trim().parse::<usize>().ok().and_then(|n| choices.get(n.wrapping_sub(1))).cloned();
                Ok(picked.unwrap_or(reply))
            }
            Ok(Err(_)) => Err("the question was withdrawn".into()),
            Err(_) => {
                services.clarify.cancel(&scope.session_key);
                Err(format!("the user did not answer within {} s", timeout.as_secs()))
            }
        }
    }
}
