//! Compressing a session's stored transcript: before a turn when it outgrew
//! `compression.threshold` of the model's context (or the hygiene limits), and on `/compress`.
//! The summary and the protected messages move into a new session whose parent is the old one;
//! the route follows, and the old session stays searchable. [`Compactor`] holds what that takes:
//! the settings, the agent that writes the summary, the [`Models`] that choose its model, the session log.

use super::messages::{new_message, to_chat_message};
use crate::agent::compress::{self, Split};
use crate::agent::run_loop::InTurnCompression;
use crate::agent::{Agent, ChatMessage, ModelSpec};
use crate::config::CompressionConfig;
use crate::gateway::conversation::models::Models;
use crate::store::{RouteEntry, SessionLog};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Compresses conversations that outgrew their model (`compression.*`).
pub(crate) struct Compactor {
    settings: CompressionConfig,
    agent: Arc<Agent>,
    models: Arc<Models>,
    /// The transcript read and rewritten into the new session.
    log: Arc<dyn SessionLog>,
}

/// What a compression did.
#[derive(Debug, Clone)]
pub(crate) struct Compressed {
    pub route: RouteEntry,
    pub messages_before: usize,
    pub messages_after: usize,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum CompressError {
    #[error("Not enough conversation to compress (need at least {} messages).", compress::MIN_MESSAGES)]
    TooShort,
    #[error("the summary could not be written: {0}")]
    Summarizer(String),
    #[error("the session store is unavailable: {0}")]
    Storage(String),
    #[error("the session changed while compressing; nothing was compressed")]
    Raced,
}

impl Compactor {
    pub(crate) fn new(settings: CompressionConfig, agent: Arc<Agent>, models: Arc<Models>, log: Arc<dyn SessionLog>) -> Self {
        Self { settings, agent, models, log }
    }

    /// Why a turn should compress first, or `None`.
    pub(crate) fn needs_compression(&self, model: &str, estimated: u64, last_prompt_tokens: u64, messages: usize) -> Option<&'static str> {
        let c = &self.settings;
        if !c.enabled || messages < compress::MIN_MESSAGES {
            return None;
        }
        let window = self.models.context_length(model) as f64;
        if messages >= c.hygiene_hard_message_limit {
            return Some("message limit");
        }
        if last_prompt_tokens as f64 > 0.85 * window {
            return Some("last prompt near the context limit");
        }
        (estimated as f64 > c.threshold * window).then_some("threshold")
    }

    /// Compress the session `route` points at. `focus` guides the summary (`/compress <focus>`).
    pub(crate) async fn compress_session(
        &self,
        route: &RouteEntry,
        model: &ModelSpec,
        system_prompt: &str,
        focus: Option<&str>,
        cancel: CancellationToken,
    ) -> Result<Compressed, CompressError> {
        let rows = self.log.messages(&route.session_id, None).await.map_err(|e| CompressError::Storage(e.to_string()))?;
        // Each message with its row (rows with an unknown role are left out).
        let (rows, history): (Vec<_>, Vec<ChatMessage>) = rows.into_iter().filter_map(|r| to_chat_message(&r).map(|m| (r, m))).unzip();
        let c = &self.settings;
        let Some(Split { head, tail }) =
            compress::split(&history, c.protect_first_n, c.protect_last_n.min(history.len().saturating_sub(1)))
        else {
            return Err(CompressError::TooShort);
        };
        let middle = &history[head..tail];
        let target = ((compress::estimate_tokens(middle) as f64) * c.target_ratio).max(200.0) as u64;
        let summary = compress::summarize(&self.agent, self.models.compression_model(model), middle, focus, target, cancel)
            .await
            .map_err(|e| CompressError::Summarizer(e.to_string()))?;
        let mut carried: Vec<ChatMessage> = history[..head].to_vec();
        carried.push(compress::summary_message(&summary));
        carried.extend_from_slice(&history[tail..]);
        let tokens_before = compress::estimate_tokens(&history);
        let tokens_after = compress::estimate_tokens(&carried);
        // Carried rows keep their event ids, so a replayed event still finds its stored message.
        let keep = |(r, m): (&crate::store::MessageRow, &ChatMessage)| {
            new_message("", r.event_id.as_deref().unwrap_or_default(), m, r.finish_reason.as_deref())
        };
        let mut rows_carried: Vec<_> = rows[..head].iter().zip(&history[..head]).map(keep).collect();
        rows_carried.push(new_message("", "", &compress::summary_message(&summary), None));
        rows_carried.extend(rows[tail..].iter().zip(&history[tail..]).map(keep));
        let next = self
            .log
            .session_compress_into(&route.session_key, &route.session_id, &model.model, system_prompt, rows_carried)
            .await
            .map_err(|e| CompressError::Storage(e.to_string()))?
            .ok_or(CompressError::Raced)?;
        tracing::info!(
            session_key = %route.session_key,
            parent = %route.session_id,
            child = %next.session_id,
            tokens_before,
            tokens_after,
            "session compressed"
        );
        Ok(Compressed { route: next, messages_before: history.len(), messages_after: carried.len(), tokens_before, tokens_after })
    }

    /// Compression inside a turn (between tool rounds) for `model`, when it is on.
    pub(crate) fn in_turn(&self, model: &ModelSpec) -> Option<InTurnCompression> {
        let c = &self.settings;
        c.enabled.then(|| InTurnCompression {
            context_tokens: self.models.context_length(&model.model),
            threshold: c.threshold,
            protect_first: c.protect_first_n,
            protect_last: c.protect_last_n,
            target_ratio: c.target_ratio,
            summarizer: self.models.compression_model(model),
        })
    }
}
