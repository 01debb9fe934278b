//! Running one turn for a session: persist the user's message once, assemble the prompt from the
//! stored history, drive the agent, stream its progress to adapters that show it, persist the
//! answer and deliver it. The inbox row is closed only when the turn really ended, so a turn cut
//! off by a crash or a drain is replayed after the restart.

use super::compaction;
use super::history_cache::SessionHistory;
use super::outbound::{self, Finish};
use super::services::Services;
use super::stream_edit::StreamEditor;
use crate::agent::compress;
use crate::agent::fence::Fence;
use crate::agent::memory::MemoryStore;
use crate::agent::prompt::{PromptInputs, assemble, with_message_instructions};
use crate::agent::tools::{SessionScope, ToolContext};
use crate::agent::turn::InTurnCompression;
use crate::agent::{ChatMessage, ProviderError, Role, SteeringInbox, ToolCallRequest, TurnEvent, TurnOutcome, TurnRequest, TurnTools};
use crate::store::{CallUsage, HistoryUpdate, MessageRow, NewMessage, TurnOpening};
use hermes_adapter::media::extract_media_tags;
use hermes_adapter::{ChatTarget, ChatType, InboundEvent, SendError, StreamEvent, StreamStyle};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

/// Stored messages loaded as context for a turn.
const HISTORY_LIMIT: usize = 400;
/// How the fence names text an adapter marked as coming from outside the chat.
const OUTSIDE_TEXT: &str = "text from outside this conversation (a payload, a quoted or forwarded message)";
/// Answers that mean "say nothing": stored, not delivered.
const SILENCE_TOKENS: [&str; 4] = ["[SILENT]", "SILENT", "NO_REPLY", "NO REPLY"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TurnEnd {
    /// Done with (answered, interrupted by the user, or failed with a message to the user).
    Closed,
    /// Cut off by shutdown: stays in the inbox to be replayed.
    Aborted,
    /// It crashed: parked in the inbox, never replayed.
    Parked,
}

pub fn is_silence(text: &str) -> bool {
    let t = text.trim();
    SILENCE_TOKENS.iter().any(|s| t.eq_ignore_ascii_case(s))
}

/// Variations of a turn.
#[derive(Debug, Clone, Default)]
pub struct TurnMode {
    /// Put before the answer (a `/background` task's result names its task).
    pub answer_prefix: Option<String>,
}

/// Run the turn for `event` and close its inbox row unless it was aborted by shutdown.
pub async fn run(
    services: Arc<Services>,
    session_key: String,
    event: InboundEvent,
    interrupt: CancellationToken,
    started: Arc<AtomicBool>,
    steering: SteeringInbox,
    mode: TurnMode,
) {
    let _running = services.turns.begin();
    let end = drive(&services, &session_key, &event, &interrupt, &started, &steering, &mode).await;
    if end == TurnEnd::Closed
        && let Err(e) = services.store.inbox_mark_done(&event.event_id).await
    {
        tracing::error!(error = %e, event_id = %event.event_id, "could not close the inbox row; the event may be replayed");
    }
}

async fn drive(
    services: &Arc<Services>,
    session_key: &str,
    event: &InboundEvent,
    interrupt: &CancellationToken,
    started: &AtomicBool,
    steering: &SteeringInbox,
    mode: &TurnMode,
) -> TurnEnd {
    let _slot = match &services.turn_slots {
        Some(slots) => tokio::select! {
            permit = slots.clone().acquire_owned() => permit.ok(),
            _ = interrupt.cancelled() => return aborted_or_closed(services),
        },
        None => None,
    };
    let store = &services.store;
    let target = event.reply_target.clone().unwrap_or_else(|| ChatTarget {
        platform: event.source.platform.clone(),
        chat_id: event.source.chat_id.clone(),
        thread_id: event.source.thread_id.clone(),
    });
    // A reply to another chat is not a reply to this message.
    let reply_to = if event.reply_target.is_some() { None } else { event.message_id.clone() };
    let Some(adapter) = services.adapter(target.platform.as_str()).cloned() else {
        tracing::error!(platform = %target.platform, event_id = %event.event_id, "the answer's platform is not enabled; dropping the turn");
        return TurnEnd::Closed;
    };
    let caps = adapter.capabilities().clone();
    let answer_key = format!("{}:answer", event.event_id);
    let fail = |text: String| {
        let services = services.clone();
        let target = target.clone();
        let reply_to = reply_to.clone();
        let answer_key = answer_key.clone();
        async move {
            outbound::deliver(
                &services,
                &target,
                reply_to.as_deref(),
                &text,
                &answer_key,
                Some(Finish { usage: Default::default(), finish_reason: "error".into() }),
            )
            .await;
        }
    };

    let default_model = services.default_model();
    let fence = Arc::new(Fence::new());
    let opening = TurnOpening {
        event_id: event.event_id.clone(),
        session_key: session_key.to_string(),
        source: event.source.clone(),
        default_model: default_model.model.clone(),
        user_message: new_message("", &event.event_id, &ChatMessage::user(fence.fence_marked(OUTSIDE_TEXT, &event.text)), None),
        seed: event.context.iter().map(|m| new_message("", "", &seed_message(m), None)).collect(),
    };
    let cached = services.history.take(session_key);
    let opened = match store.turn_open(opening, cached.as_ref().map(|h| h.known.clone())).await {
        Ok(opened) => opened,
        Err(e) => {
            tracing::error!(error = %e, "could not store the user's message");
            fail("Sorry, I encountered an error (StorageError).\nYour message could not be stored.\nTry again in a moment.".into()).await;
            return TurnEnd::Closed;
        }
    };
    let mut route = opened.route;
    let model = services.model_for(Some(&route.overrides));
    let filter = services.tool_filter(event.source.platform.as_str(), event.toolsets.as_deref());
    let toolsets = services.toolsets_allowed(&filter);
    let session_history = match (cached, opened.history) {
        (Some(mut kept), HistoryUpdate::After { messages, active_count }) => {
            kept.extend(&messages, active_count, HISTORY_LIMIT, to_chat_message);
            Some(kept)
        }
        _ => match store.turn_context(&route.session_id, HISTORY_LIMIT).await {
            Ok(context) => SessionHistory::from_rows(&context.history, context.known, HISTORY_LIMIT, to_chat_message),
            Err(e) => {
                tracing::error!(error = %e, "session store unavailable");
                fail("Sorry, I encountered an error (StorageError).\nThe session store is unavailable.\nTry again in a moment.".into())
                    .await;
                return TurnEnd::Closed;
            }
        },
    };
    let frozen = match opened.system_prompt {
        Some(prompt) => prompt,
        None => match freeze_prompt(services, &route.session_id, &event.source, &toolsets).await {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "session store unavailable");
                fail("Sorry, I encountered an error (StorageError).\nThe session store is unavailable.\nTry again in a moment.".into())
                    .await;
                return TurnEnd::Closed;
            }
        },
    };
    let last_prompt = opened.last_prompt_tokens;
    let mut chat_history: Vec<ChatMessage> = session_history.as_ref().map(|h| h.messages.iter().cloned().collect()).unwrap_or_default();
    if let Some(h) = session_history {
        services.history.put(session_key, h);
    }

    // Compress first when the stored conversation outgrew the model's context.
    let estimated = compress::estimate_tokens(&chat_history) + compress::estimate_tokens(&[ChatMessage::system(frozen.clone())]);
    if let Some(reason) = compaction::needs_compression(services, &model.model, estimated, last_prompt, chat_history.len()) {
        tracing::info!(session_key, reason, estimated, "compressing the session before the turn");
        match compaction::compress_session(services, &route, &model, &frozen, None, interrupt.child_token()).await {
            Ok(done) => {
                route = done.route;
                let history = store.messages(&route.session_id, Some(HISTORY_LIMIT)).await.unwrap_or_default();
                chat_history = history.iter().filter_map(to_chat_message).collect();
            }
            Err(e) => tracing::warn!(error = %e, "compression failed; continuing with the full history"),
        }
    }

    let system = with_message_instructions(&frozen, event.channel_prompt.as_deref());
    let mut messages = vec![ChatMessage::system(system)];
    messages.extend(chat_history);
    let stream_events = caps.streaming == StreamStyle::Events;
    let mut editor = (caps.streaming == StreamStyle::EditInPlace && StreamEditor::wanted(services, &caps))
        .then(|| StreamEditor::new(services.clone(), adapter.clone(), target.clone(), reply_to.clone(), answer_key.clone()));
    // Chat platforms without streaming still see tool progress lines, one message each.
    // (Not for webhook events: their answer goes to a callback, where progress is noise.)
    let progress_lines = editor.is_none() && !stream_events && caps.supports_async_delivery && event.source.chat_type != ChatType::Webhook;
    let _typing = super::typing::TypingGuard::start(adapter.clone(), target.clone());
    let scope = SessionScope {
        session_id: route.session_id.clone(),
        session_key: session_key.to_string(),
        platform: event.source.platform.to_string(),
        chat_id: event.source.chat_id.clone(),
        chat_name: event.source.chat_name.clone(),
        thread_id: event.source.thread_id.clone(),
        user_id: event.source.user_id.clone(),
        interactive: caps.supports_async_delivery && event.source.chat_type != ChatType::Webhook,
    };
    let context = ToolContext {
        scope,
        paths: services.paths.clone(),
        settings: services.tool_settings.clone(),
        host: services.tool_host.clone(),
        approval: services.approval.clone(),
        delegation: None,
        cancel: interrupt.clone(),
        call_id: String::new(),
        turn_id: event.event_id.clone(),
        fence,
    };
    let mut request = TurnRequest::new(model.clone(), messages);
    request.fallbacks = services.fallbacks();
    request.stream = stream_events || editor.is_some();
    request.tools = Some(TurnTools { filter, context });
    request.tool_protocol = services.config.model.tool_protocol;
    request.steering = Some(steering.clone());
    let c = &services.config.compression;
    request.compression = c.enabled.then(|| InTurnCompression {
        context_tokens: services.context_length(&model.model),
        threshold: c.threshold,
        protect_first: c.protect_first_n,
        protect_last: c.protect_last_n,
        target_ratio: c.target_ratio,
        summarizer: services.compression_model(&model),
    });
    started.store(true, Ordering::Release);
    let mut events = services.agent.run_turn(request, interrupt.clone());

    let mut streamed = String::new();
    let mut recipient_gone = false;
    let mut progress_count = 0usize;
    let mut tools_seen = std::collections::HashSet::new();
    // Model calls whose usage is not recorded yet.
    let mut calls: Vec<CallUsage> = Vec::new();
    let stream_out = |ev: StreamEvent| {
        let adapter = adapter.clone();
        let target = target.clone();
        let reply_to = reply_to.clone();
        async move { adapter.stream(&target, reply_to.as_deref(), &ev).await }
    };
    let outcome: Result<TurnOutcome, ProviderError> = loop {
        let Some(ev) = events.recv().await else {
            break Err(ProviderError::Fatal("the agent stopped unexpectedly".into()));
        };
        let to_stream = match ev {
            TurnEvent::TextDelta(d) => {
                streamed.push_str(&d);
                if let Some(ed) = editor.as_mut() {
                    ed.on_delta(&d).await;
                }
                StreamEvent::Token { text: d }
            }
            TurnEvent::ToolCall(c) => {
                streamed.clear();
                if let Some(ed) = editor.as_mut() {
                    ed.on_tool_call(&c.name, &c.arguments).await;
                } else if progress_lines && services.config.display.tool_progress.shows(tools_seen.insert(c.name.clone())) {
                    let line = format!("🔧 {}", c.name);
                    outbound::deliver(services, &target, None, &line, &format!("{answer_key}:progress{progress_count}"), None).await;
                    progress_count += 1;
                }
                StreamEvent::ToolCall { id: c.id, name: c.name, arguments: c.arguments }
            }
            TurnEvent::ToolResult { id, name, content, .. } => StreamEvent::ToolResult { id, name, content },
            TurnEvent::Persist(m) => {
                let message = new_message(&route.session_id, &event.event_id, &m, None);
                if let Err(e) = store.turn_record(&route.session_id, vec![message], std::mem::take(&mut calls)).await {
                    tracing::warn!(error = %e, "could not store a tool message");
                }
                continue;
            }
            TurnEvent::CallUsage { model, usage } => {
                // Recorded with the next message the turn stores (one write instead of three).
                let cost_usd = services.cost_of(&model, &usage);
                calls.push(CallUsage { model, usage, cost_usd });
                continue;
            }
            TurnEvent::Compressed { tokens_before, tokens_after } => {
                tracing::info!(session_key, tokens_before, tokens_after, "compressed inside the turn");
                continue;
            }
            TurnEvent::FellBack { from, to, reason } => {
                tracing::warn!(%from, %to, %reason, session_key, "continuing on a fallback model");
                continue;
            }
            TurnEvent::Done(o) => break Ok(o),
            TurnEvent::Failed(e) => break Err(e),
        };
        if stream_events
            && !recipient_gone
            && let Err(SendError::Gone(_)) = stream_out(to_stream).await
        {
            recipient_gone = true;
        }
    };

    let answer = outcome
        .as_ref()
        .ok()
        .map(|o| new_message(&route.session_id, &event.event_id, &ChatMessage::assistant(o.text.clone()), Some(&o.finish_reason)));
    if let Err(e) = store.turn_record(&route.session_id, answer.into_iter().collect(), calls).await {
        tracing::error!(error = %e, "could not store the answer and the turn's usage");
    }
    match outcome {
        Ok(o) => {
            // Chat platforms stay quiet on a silence token; a request/response client still
            // needs its (empty) answer to finish.
            if is_silence(&o.text) && caps.supports_async_delivery {
                tracing::info!(event_id = %event.event_id, "silent answer stored, not delivered");
            } else {
                let text = if is_silence(&o.text) {
                    String::new()
                } else if o.text.trim().is_empty() {
                    "⚠️ The model returned an empty response. Try again or rephrase your message.".to_string()
                } else {
                    match &mode.answer_prefix {
                        Some(prefix) => format!("{prefix}{}", o.text),
                        None => o.text.clone(),
                    }
                };
                let streamed_already = match editor.as_mut() {
                    Some(ed) => {
                        // The streamed message shows the words; files named by `MEDIA:` tags follow
                        // it (a delivery whose text is only the tags sends just the files).
                        let (words, tags) = extract_media_tags(&text);
                        let streamed = ed.finish(&words).await;
                        if streamed && !tags.is_empty() {
                            let only_tags: String = tags.iter().map(|t| format!("{t}\n")).collect();
                            outbound::deliver(services, &target, None, &only_tags, &format!("{answer_key}:media"), None).await;
                        }
                        streamed
                    }
                    None => false,
                };
                if !streamed_already {
                    outbound::deliver(
                        services,
                        &target,
                        reply_to.as_deref(),
                        &text,
                        &answer_key,
                        Some(Finish { usage: o.usage, finish_reason: o.finish_reason.clone() }),
                    )
                    .await;
                }
            }
            if event.one_shot
                && let Err(e) = store.session_close(session_key, "one_shot_complete").await
            {
                tracing::warn!(error = %e, "could not close a one-shot session");
            }
            TurnEnd::Closed
        }
        Err(ProviderError::Cancelled) => {
            if services.turns_abort.is_cancelled() {
                return TurnEnd::Aborted;
            }
            if let Some(ed) = editor.as_mut()
                && !streamed.is_empty()
            {
                ed.finish(&streamed).await;
            }
            // A request/response client is waiting for this answer: end it.
            if !caps.supports_async_delivery {
                outbound::deliver(
                    services,
                    &target,
                    reply_to.as_deref(),
                    &streamed,
                    &answer_key,
                    Some(Finish { usage: Default::default(), finish_reason: "interrupted".into() }),
                )
                .await;
            }
            TurnEnd::Closed
        }
        Err(ProviderError::Crashed { incident }) => {
            // The agent panicked: parked, so a replay can never run into the same panic.
            let reason = format!("poisoned: the agent panicked (incident {incident})");
            if let Err(e) = store.inbox_mark_poisoned(&event.event_id, &reason).await {
                tracing::warn!(error = %e, "could not park the event");
            }
            fail(format!("⚠️ Internal error (incident {incident}). Your message was not processed; please try again or rephrase it."))
                .await;
            TurnEnd::Parked
        }
        Err(e) => {
            tracing::warn!(error = %e, session_key, "turn failed");
            // A provider's error body may echo a key or a token: never into the chat as is.
            let redacted = crate::observe::redact::redact_patterns(&services.tool_settings.secrets.scrub(&e.to_string()));
            let detail: String = redacted.chars().take(300).collect();
            fail(format!("Sorry, I encountered an error ({}).\n{detail}\nTry again or use /reset to start a fresh session.", e.kind()))
                .await;
            TurnEnd::Closed
        }
    }
}

/// The session's frozen system prompt: built and stored on the session's first turn, read back
/// on every later one.
pub async fn frozen_prompt(
    services: &Services,
    session_id: &str,
    source: &hermes_adapter::SessionSource,
    toolsets: &[String],
) -> Result<String, crate::store::StoreError> {
    if let Some(stored) = services.store.session_prompt(session_id).await? {
        return Ok(stored);
    }
    freeze_prompt(services, session_id, source, toolsets).await
}

/// Build the session's system prompt and store it, unless another turn stored one first (then
/// that one is returned).
async fn freeze_prompt(
    services: &Services,
    session_id: &str,
    source: &hermes_adapter::SessionSource,
    toolsets: &[String],
) -> Result<String, crate::store::StoreError> {
    let memory = services.config.memory.enabled.then(|| {
        MemoryStore::new(&services.paths.memories, services.config.memory.memory_char_limit, services.config.memory.user_char_limit)
    });
    let connected: Vec<String> =
        services.adapters.iter().filter(|(_, a)| a.capabilities().supports_async_delivery).map(|(n, _)| n.clone()).collect();
    let built = assemble(&PromptInputs {
        paths: &services.paths,
        operator_prompt: services.config.agent.system_prompt.as_deref(),
        source,
        memory: memory.as_ref(),
        toolsets,
        connected_platforms: &connected,
    });
    services.store.session_prompt_freeze(session_id, &built).await
}

fn aborted_or_closed(services: &Services) -> TurnEnd {
    if services.turns_abort.is_cancelled() { TurnEnd::Aborted } else { TurnEnd::Closed }
}

/// A message of a client-supplied earlier conversation (OpenAI-style roles; anything but
/// `assistant` counts as the user's).
fn seed_message(m: &hermes_adapter::ContextMessage) -> ChatMessage {
    let role = if m.role == "assistant" { Role::Assistant } else { Role::User };
    ChatMessage::new(role, m.content.clone())
}

pub fn new_message(session_id: &str, event_id: &str, m: &ChatMessage, finish_reason: Option<&str>) -> NewMessage {
    NewMessage {
        session_id: session_id.to_string(),
        role: m.role.as_str().to_string(),
        content: m.content.clone(),
        tool_call_id: m.tool_call_id.clone(),
        tool_calls: (!m.tool_calls.is_empty()).then(|| serde_json::to_string(&m.tool_calls).unwrap_or_default()),
        tool_name: m.tool_name.clone(),
        event_id: (!event_id.is_empty()).then(|| event_id.to_string()),
        finish_reason: finish_reason.map(str::to_string),
    }
}

pub fn to_chat_message(row: &MessageRow) -> Option<ChatMessage> {
    let role = Role::parse(&row.role)?;
    let mut m = ChatMessage::new(role, row.content.clone());
    m.tool_call_id = row.tool_call_id.clone();
    m.tool_name = row.tool_name.clone();
    if let Some(calls) = &row.tool_calls {
        m.tool_calls = serde_json::from_str::<Vec<ToolCallRequest>>(calls).unwrap_or_default();
    }
    Some(m)
}
