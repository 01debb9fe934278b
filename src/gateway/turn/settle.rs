//! Steps 4 and 5, answer and settle: store the answer with the turn's usage, compose what the
//! user sees (a silence token says nothing, an empty answer says so), hand it to the [`Output`],
//! and say how the turn ended so its inbox row is closed, kept for replay, or parked.

use super::TurnEnd;
use super::TurnError;
use super::TurnMode;
use super::admit::AnswerTo;
use super::agent_run::Ran;
use super::output::Output;
use crate::agent::{ChatMessage, ProviderError, is_silence};
use crate::gateway::conversation::messages::new_message;
use crate::gateway::delivery::reply::Finish;
use crate::gateway::delivery::spoken::{Voice, VoiceMode};
use crate::gateway::turn::limits::TurnLimits;
use crate::observe::secret_forms::SecretScrubber;
use crate::store::{CallUsage, Inbox, RouteEntry, Routes, StoreError, Turns};
use hermes_adapter::{Capabilities, InboundEvent};

const EMPTY_ANSWER: &str = "⚠️ The model returned an empty response. Try again or rephrase your message.";

/// What the user sees for the model's answer `text`; `None` when nothing is sent. Chats stay
/// quiet on a silence token; a request/response client still needs its (empty) answer to finish.
pub(super) fn answer_text(text: &str, mode: &TurnMode, caps: &Capabilities) -> Option<String> {
    if is_silence(text) {
        return (!caps.supports_async_delivery).then(String::new);
    }
    if text.trim().is_empty() {
        return Some(EMPTY_ANSWER.to_string());
    }
    Some(match &mode.answer_prefix {
        Some(prefix) => format!("{prefix}{text}"),
        None => text.to_string(),
    })
}

/// What a settled turn needs to know about itself.
pub(super) struct Settling<'a> {
    pub session_key: &'a str,
    pub event: &'a InboundEvent,
    pub mode: &'a TurnMode,
    pub route: &'a RouteEntry,
    /// The session's `/voice` mode and the engine that speaks.
    pub voice: (VoiceMode, &'a Voice),
}

/// What settling writes: the answer and the usage, a closed one-shot session, a parked event.
pub(super) struct Records<'a> {
    pub turns: &'a dyn Turns,
    pub routes: &'a dyn Routes,
    pub inbox: &'a dyn Inbox,
}

/// `secrets`: scrubbed from a provider's error before the user sees it.
pub(super) async fn settle(
    records: Records<'_>,
    limits: &TurnLimits,
    secrets: &SecretScrubber,
    turn: Settling<'_>,
    answer: &AnswerTo,
    output: &mut Output,
    ran: Ran,
) -> TurnEnd {
    let Ran { outcome, streamed, mut unrecorded } = ran;
    let session_id = &turn.route.session_id;
    // Spoken before anything is recorded, so what speaking cost is in the turn's usage.
    let sent = match &outcome {
        Ok(o) => match answer_text(&o.text, turn.mode, &answer.caps) {
            Some(text) => {
                let (mode, voice) = turn.voice;
                let spoken = voice.speak_answer(&text, mode, &answer.caps).await;
                if spoken.chars > 0 {
                    unrecorded.push(CallUsage { model: voice.label.clone(), usage: Default::default(), cost_usd: spoken.cost_usd });
                }
                Some(spoken.text)
            }
            None => None,
        },
        Err(_) => None,
    };
    let stored = outcome
        .as_ref()
        .ok()
        .map(|o| new_message(session_id, &turn.event.event_id, &ChatMessage::assistant(o.text.clone()), Some(&o.finish_reason)));
    match records.turns.turn_record(session_id, stored.into_iter().collect(), unrecorded).await {
        Ok(()) => {}
        Err(StoreError::LeaseLost) => {
            // The platform's new holder replays the event; an answer from here would be a
            // second one (or, under the answer's key, take the place of the new holder's).
            tracing::warn!(event_id = %turn.event.event_id, "this replica lost a lease: the answer is left to the platform's new holder");
            return TurnEnd::Aborted;
        }
        Err(e) => tracing::error!(error = %e, "could not store the answer and the turn's usage"),
    }
    match outcome {
        Ok(o) => {
            match sent {
                Some(text) => output.answer(answer, &text, Finish { usage: o.usage, finish_reason: o.finish_reason }).await,
                None => tracing::info!(event_id = %turn.event.event_id, "silent answer stored, not delivered"),
            }
            if turn.event.one_shot
                && let Err(e) = records.routes.session_close(turn.session_key, "one_shot_complete").await
            {
                tracing::warn!(error = %e, "could not close a one-shot session");
            }
            TurnEnd::Closed
        }
        Err(ProviderError::Cancelled) if limits.aborting() => TurnEnd::Aborted,
        Err(ProviderError::Cancelled) => {
            output.interrupted(answer, &streamed).await;
            TurnEnd::Closed
        }
        Err(ProviderError::Crashed { incident }) => {
            // The agent panicked: parked, so a replay can never run into the same panic.
            let reason = format!("poisoned: the agent panicked (incident {incident})");
            if let Err(e) = records.inbox.inbox_mark_poisoned(&turn.event.event_id, &reason).await {
                tracing::warn!(error = %e, "could not park the event");
            }
            answer.fail(&TurnError::Crashed { incident }).await;
            TurnEnd::Parked
        }
        Err(e) => {
            tracing::warn!(error = %e, session_key = turn.session_key, "turn failed");
            // A provider's error body may echo a key or a token: never into the chat as is.
            answer.fail(&TurnError::provider(&e, secrets)).await;
            TurnEnd::Closed
        }
    }
}
