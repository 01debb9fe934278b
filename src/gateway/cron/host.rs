//! The gateway's side of scheduled runs ([`CronHost`]): a fresh agent turn per occurrence
//! (platform `cron`, session `cron_<job>_<time>`, stored and titled, no memory, no `cronjob`,
//! `messaging` or `clarify` tools, commands under `approvals.cron_mode`), delivery through the
//! same outbound path and outbox as replies, and the home channels `/sethome` keeps current.
//!
//! The same host serves `hermes cron tick` from the shell: it is built from the turn's handles
//! whether or not the adapters are receiving.

use crate::agent::providers::ModelSpec;
use crate::agent::tools::SessionScope;
use crate::agent::{Agent, ChatMessage, TurnEvent, TurnRequest, TurnTools};
use crate::cron::delivery::{Homes, Occurrence};
use crate::cron::run::{AgentRun, AgentRunError, CronHost, Sent};
use crate::gateway::conversation::messages::new_message;
use crate::gateway::conversation::models::Models;
use crate::gateway::conversation::sessions::Sessions;
use crate::gateway::delivery::deliverer::Deliverer;
use crate::gateway::delivery::home_channels::HomeChannels;
use crate::gateway::delivery::outbound::Delivery;
use crate::gateway::delivery::reply::{Reply, ReplyKey};
use crate::gateway::turn::tool_access::ToolAccess;
use crate::gateway::turn::{Ledger, TurnHandles};
use crate::store::{CallUsage, TurnOpening};
use async_trait::async_trait;
use hermes_adapter::{ChatTarget, ChatType, Platform, SessionSource};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Toolsets a scheduled run never has: it must not schedule more jobs, send messages itself
/// (its answer is delivered for it) or wait for a person, and it leaves memory alone.
const CRON_DISABLED_TOOLSETS: &[&str] = &["cronjob", "messaging", "clarify", "memory"];

pub(crate) struct GatewayCronHost {
    sessions: Arc<Sessions>,
    models: Arc<Models>,
    tools: Arc<ToolAccess>,
    agent: Arc<Agent>,
    deliverer: Arc<Deliverer>,
    homes: HomeChannels,
    /// Cancelled when the process stops: a running job's turn ends with it.
    stop: CancellationToken,
}

impl GatewayCronHost {
    pub(crate) fn new(turns: &TurnHandles, homes: HomeChannels, stop: CancellationToken) -> Self {
        Self {
            sessions: turns.sessions.clone(),
            models: turns.models.clone(),
            tools: turns.tools.clone(),
            agent: turns.agent.clone(),
            deliverer: turns.deliverer.clone(),
            homes,
            stop,
        }
    }

    /// The job's model (and provider) when it names one, else the configured default.
    fn model(&self, run: &AgentRun) -> ModelSpec {
        let overrides = serde_json::json!({ "model_override": { "model": run.model, "provider": run.provider } });
        self.models.model_for(Some(&overrides))
    }

    /// Open the run's session and store its prompt; returns the session id.
    async fn open(&self, run: &AgentRun, source: &SessionSource, event_id: &str, model: &str) -> Result<String, AgentRunError> {
        let opening = TurnOpening {
            event_id: event_id.to_string(),
            session_key: run.session_key.clone(),
            source: source.clone(),
            default_model: model.to_string(),
            user_message: new_message("", event_id, &ChatMessage::user(run.prompt.clone()), None),
            seed: Vec::new(),
        };
        let opened = self.sessions.turns.turn_open(opening, None).await.map_err(|e| AgentRunError::SessionNotStored(Box::new(e)))?;
        let session_id = opened.route.session_id;
        if let Err(e) = self.sessions.log.session_set_title(&session_id, &run.title).await {
            tracing::warn!(error = %e, "cannot title the cron run's session");
        }
        Ok(session_id)
    }

    fn request(
        &self,
        run: AgentRun,
        model: ModelSpec,
        source: &SessionSource,
        session_id: &str,
        event_id: &str,
        cancel: &CancellationToken,
    ) -> TurnRequest {
        let filter = self.tools.tool_filter("cron", run.toolsets.as_deref()).without_toolsets(CRON_DISABLED_TOOLSETS);
        let mut system = self.sessions.prompts.scheduled(source, &self.tools.toolsets_allowed(&filter));
        if let Some(note) = self.tools.mcp_note(&filter) {
            system = format!("{system}\n\n{note}");
        }
        let scope = SessionScope {
            session_id: session_id.to_string(),
            session_key: run.session_key.clone(),
            platform: "cron".into(),
            chat_id: run.job_id.clone(),
            user_id: run.user_id.clone(),
            interactive: false,
            scheduled: true,
            ..SessionScope::default()
        };
        let context = self.tools.context(scope, event_id, Arc::new(run.fence), cancel.clone());
        let mut request = TurnRequest::new(model, vec![ChatMessage::system(system), ChatMessage::user(run.prompt)]);
        request.fallbacks = self.models.fallbacks();
        request.tools = Some(TurnTools { filter, context });
        request.tool_protocol = self.models.tool_protocol();
        request
    }

    /// Follow the turn to its end, storing tool messages, usage and the answer.
    async fn follow(&self, request: TurnRequest, ledger: Ledger<'_>, cancel: CancellationToken) -> Result<String, AgentRunError> {
        let mut events = self.agent.run_turn(request, cancel);
        let mut unrecorded: Vec<CallUsage> = Vec::new();
        loop {
            let Some(event) = events.recv().await else { return Err(AgentRunError::AgentStopped) };
            let stored = match event {
                TurnEvent::Persist(m) => ledger.store(&mut unrecorded, &m, None).await,
                TurnEvent::CallUsage { model, usage } => {
                    ledger.count(&mut unrecorded, model, usage);
                    continue;
                }
                TurnEvent::Done(outcome) => {
                    let answer = ChatMessage::assistant(outcome.text.clone());
                    if let Err(e) = ledger.store(&mut unrecorded, &answer, Some(&outcome.finish_reason)).await {
                        tracing::warn!(error = %e, "cannot store the answer of a cron run");
                    }
                    return Ok(outcome.text);
                }
                TurnEvent::Failed(e) => return Err(AgentRunError::TurnFailed(Box::new(e))),
                _ => continue,
            };
            if let Err(e) = stored {
                tracing::warn!(error = %e, "cannot store a message of a cron run");
            }
        }
    }
}

#[async_trait]
impl CronHost for GatewayCronHost {
    async fn run_agent(&self, run: AgentRun) -> Result<String, AgentRunError> {
        let event_id = format!("cron:{}", run.session_key);
        let source = SessionSource::new(Platform::new("cron"), run.job_id.clone(), ChatType::Dm);
        let source = match &run.user_id {
            Some(user) => source.with_user(user.clone()),
            None => source,
        };
        let model = self.model(&run);
        let session_id = self.open(&run, &source, &event_id, &model.model).await?;
        let timeout = run.timeout;
        let cancel = self.stop.child_token();
        let request = self.request(run, model, &source, &session_id, &event_id, &cancel);
        let ledger = Ledger { turns: self.sessions.turns.as_ref(), models: &self.models, session_id: &session_id, event_id: &event_id };
        let follow = self.follow(request, ledger, cancel.clone());
        if timeout.is_zero() {
            return follow.await;
        }
        match tokio::time::timeout(timeout, follow).await {
            Ok(result) => result,
            Err(_) => {
                cancel.cancel();
                Err(AgentRunError::TimedOut { secs: timeout.as_secs() })
            }
        }
    }

    async fn deliver(&self, target: &ChatTarget, text: &str, occurrence: &Occurrence) -> Sent {
        if self.deliverer.adapter(target.platform.as_str()).is_none() {
            return Sent::Failed(format!("platform `{}` is not enabled in this gateway", target.platform));
        }
        match self.deliverer.send(Reply::markdown(target.clone(), text), ReplyKey::cron_delivery(occurrence, target)).await {
            Delivery::Delivered => Sent::Delivered,
            Delivery::Queued => Sent::Queued,
            Delivery::InDoubt => Sent::InDoubt,
            Delivery::Failed => Sent::Failed("the platform refused the message or could not be reached (see the gateway log)".into()),
        }
    }

    fn homes(&self) -> Homes {
        self.homes.targets().into_iter().filter(|(platform, _)| self.deliverer.adapter(platform).is_some()).collect()
    }
}
