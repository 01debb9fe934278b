//! Step 2, prepare: store the user's message once (fenced where an adapter marked outside text),
//! load the session's history, freeze the system prompt on the session's first turn, and
//! compress a conversation that outgrew the model's context. The result is everything the agent
//! is asked with.

use super::admit::AnswerTo;
use super::perceive::Perceived;
use super::{HISTORY_LIMIT, OUTSIDE_TEXT, TurnEnd, TurnError};
use crate::agent::fence::Fence;
use crate::agent::prompt::with_message_instructions;
use crate::agent::providers::ModelSpec;
use crate::agent::tools::ToolFilter;
use crate::agent::{ChatMessage, compress};
use crate::gateway::conversation::history_cache::SessionHistory;
use crate::gateway::conversation::messages::{new_message, seed_message, to_chat_message};
use crate::gateway::conversation::models::{Models, Sight};
use crate::gateway::conversation::sessions::Sessions;
use crate::gateway::turn::tool_access::ToolAccess;
use crate::store::{HistoryUpdate, OpenedTurn, RouteEntry, TurnOpening};
use hermes_adapter::InboundEvent;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What the agent is asked with.
pub(super) struct Prepared {
    pub route: RouteEntry,
    pub model: ModelSpec,
    pub filter: ToolFilter,
    /// System prompt first, then the history ending with the user's message.
    pub messages: Vec<ChatMessage>,
    /// This turn's fence, for what tools bring in from outside.
    pub fence: Arc<Fence>,
    /// How the model takes pictures: `vision_analyze` is offered when another model must look.
    pub sight: Sight,
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn prepare(
    sessions: &Sessions,
    models: &Models,
    tools: &ToolAccess,
    session_key: &str,
    event: &InboundEvent,
    perceived: &Perceived,
    answer: &AnswerTo,
    interrupt: &CancellationToken,
) -> Result<Prepared, TurnEnd> {
    let fence = Arc::new(Fence::new());
    let cached = sessions.history.take(session_key);
    let opening = opening(models, session_key, event, perceived, &fence);
    let opened = match sessions.turns.turn_open(opening, cached.as_ref().map(|h| h.known.clone())).await {
        Ok(opened) => opened,
        Err(crate::store::StoreError::LeaseLost) => {
            // Nothing to the user either: the platform's new holder runs this turn.
            tracing::warn!(event_id = %event.event_id, "this replica lost a lease: the turn is left to the platform's new holder");
            return Err(TurnEnd::Aborted);
        }
        Err(e) => {
            tracing::error!(error = %e, "could not store the user's message");
            answer.fail(&TurnError::MessageNotStored).await;
            return Err(TurnEnd::Closed);
        }
    };
    let OpenedTurn { route, history, system_prompt, last_prompt_tokens, .. } = opened;
    let model = models.model_for(Some(&route.overrides));
    let filter = tools.tool_filter(event.source.platform.as_str(), event.toolsets.as_deref());
    let sight = models.sight(&model);
    let loaded = load_history(sessions, session_key, &route, cached, history).await;
    let frozen = match system_prompt {
        Some(prompt) => Ok(prompt),
        None => sessions.prompts.freeze(&route.session_id, &event.source, &tools.toolsets_allowed(&filter)).await,
    };
    let (mut chat_history, frozen) = match (loaded, frozen) {
        (Ok(history), Ok(frozen)) => (history, frozen),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "session store unavailable");
            answer.fail(&TurnError::StoreDown).await;
            return Err(TurnEnd::Closed);
        }
    };
    let mut route = route;
    compress_if_needed(sessions, &mut route, &mut chat_history, &model, &frozen, last_prompt_tokens, interrupt).await;
    let mut system = with_message_instructions(&frozen, event.channel_prompt.as_deref());
    // Live state, so never frozen: an MCP server that is down is named until it is back.
    if let Some(note) = tools.mcp_note(&filter) {
        system = format!("{system}\n\n{note}");
    }
    let mut messages = vec![ChatMessage::system(system)];
    messages.extend(chat_history);
    if sight == Sight::Sees {
        // The pictures of the conversation ride along from the media cache, newest first, within
        // the request's budget; the older ones are named in a line of text.
        let (max_images, max_bytes) = models.image_budget();
        crate::media::history_images::attach_recent(&mut messages, max_images, max_bytes);
    }
    Ok(Prepared { route, model, filter, messages, fence, sight })
}

/// The user's message as stored: text an adapter marked as from outside (and a voice note's
/// transcript) is fenced; the images it carries are stored with it by reference.
fn opening(models: &Models, session_key: &str, event: &InboundEvent, perceived: &Perceived, fence: &Fence) -> TurnOpening {
    let mut user = ChatMessage::user(fence.fence_marked(OUTSIDE_TEXT, &perceived.text));
    user.images = perceived.images.clone();
    TurnOpening {
        event_id: event.event_id.clone(),
        session_key: session_key.to_string(),
        source: event.source.clone(),
        default_model: models.default_model().model,
        user_message: new_message("", &event.event_id, &user, None),
        seed: event.context.iter().map(|m| new_message("", "", &seed_message(m), None)).collect(),
    }
}

/// The conversation so far: the cached history extended by what the store added, or read whole
/// from the store. The cache keeps the result for the next turn.
async fn load_history(
    sessions: &Sessions,
    session_key: &str,
    route: &RouteEntry,
    cached: Option<SessionHistory>,
    update: HistoryUpdate,
) -> Result<Vec<ChatMessage>, crate::store::StoreError> {
    let history = match (cached, update) {
        (Some(mut kept), HistoryUpdate::After { messages, active_count }) => {
            kept.extend(&messages, active_count, HISTORY_LIMIT, to_chat_message);
            Some(kept)
        }
        _ => {
            let context = sessions.turns.turn_context(&route.session_id, HISTORY_LIMIT).await?;
            SessionHistory::from_rows(&context.history, context.known, HISTORY_LIMIT, to_chat_message)
        }
    };
    let messages = history.as_ref().map(|h| h.messages.iter().cloned().collect()).unwrap_or_default();
    if let Some(h) = history {
        sessions.history.put(session_key, h);
    }
    Ok(messages)
}

/// Compress first when the stored conversation outgrew the model's context: `route` and
/// `history` become the new (child) session's. When compression fails the turn goes on with the
/// full history.
async fn compress_if_needed(
    sessions: &Sessions,
    route: &mut RouteEntry,
    history: &mut Vec<ChatMessage>,
    model: &ModelSpec,
    frozen: &str,
    last_prompt_tokens: u64,
    interrupt: &CancellationToken,
) {
    let estimated = compress::estimate_tokens(history) + compress::estimate_tokens(&[ChatMessage::system(frozen.to_string())]);
    let Some(reason) = sessions.compactor.needs_compression(&model.model, estimated, last_prompt_tokens, history.len()) else {
        return;
    };
    tracing::info!(session_key = %route.session_key, reason, estimated, "compressing the session before the turn");
    match sessions.compactor.compress_session(route, model, frozen, None, interrupt.child_token()).await {
        Ok(done) => {
            *route = done.route;
            match sessions.log.messages(&route.session_id, Some(HISTORY_LIMIT)).await {
                Ok(rows) => *history = rows.iter().filter_map(to_chat_message).collect(),
                // Never a turn without its history: the uncompressed one is still right, if long.
                Err(e) => tracing::warn!(error = %e, "could not read the compressed session; continuing with the full history"),
            }
        }
        Err(e) => tracing::warn!(error = %e, "compression failed; continuing with the full history"),
    }
}
