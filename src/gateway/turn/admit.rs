//! Step 1, admit: wait for a turn slot (the gateway-wide concurrency limit) and resolve where the
//! answer goes — the platform adapter, the chat, the message it replies to — into an
//! [`AnswerTo`] every later step uses to reach the user.

use super::{TurnEnd, TurnError};
use crate::gateway::delivery::deliverer::Deliverer;
use crate::gateway::delivery::reply::Finish;
use crate::gateway::delivery::reply::{Reply, ReplyKey};
use crate::gateway::turn::limits::TurnLimits;
use hermes_adapter::{Capabilities, ChatTarget, InboundEvent, PlatformAdapter};
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

/// Where a turn's answer goes, and how that platform shows it.
pub(super) struct AnswerTo {
    pub target: ChatTarget,
    /// The message the answer replies to (none when it goes to another chat).
    pub reply_to: Option<String>,
    pub adapter: Arc<dyn PlatformAdapter>,
    pub caps: Capabilities,
    /// The event answered: the answer's outbox key and those of its progress lines derive from it.
    pub event_id: String,
    /// What every message of the turn leaves through.
    pub deliverer: Arc<Deliverer>,
}

impl AnswerTo {
    /// The outbox key of the answer.
    pub(super) fn key(&self) -> ReplyKey {
        ReplyKey::Answer(self.event_id.clone())
    }

    /// `markdown` to the answer's chat, replying where the answer replies.
    pub(super) fn reply(&self, markdown: impl Into<String>) -> Reply {
        Reply::markdown(self.target.clone(), markdown).replying_to(self.reply_to.clone())
    }

    /// Tell the user the turn failed (the reply names what to do), as the turn's answer.
    pub(super) async fn fail(&self, error: &TurnError) {
        let finish = Some(Finish { usage: Default::default(), finish_reason: "error".into() });
        self.deliverer.queue(self.reply(error.reply()).finishing(finish), self.key()).await;
    }
}

/// A turn that may run: its slot is held until the value is dropped.
pub(super) struct Admitted {
    pub answer: AnswerTo,
    _slot: Option<OwnedSemaphorePermit>,
}

/// Wait for a slot and resolve the answer's destination. `Err` ends the turn: stopped while
/// waiting, or the answer's platform is not running (nothing could ever deliver it).
pub(super) async fn admit(
    limits: &TurnLimits,
    deliverer: &Arc<Deliverer>,
    event: &InboundEvent,
    interrupt: &CancellationToken,
) -> Result<Admitted, TurnEnd> {
    let slot = match &limits.slots {
        Some(slots) => tokio::select! {
            permit = slots.clone().acquire_owned() => permit.ok(),
            _ = interrupt.cancelled() => return Err(TurnEnd::stopped(limits)),
        },
        None => None,
    };
    let target = event.answer_target();
    // A reply to another chat is not a reply to this message.
    let reply_to = event.answer_reply_to().map(str::to_string);
    let Some(adapter) = deliverer.adapter(target.platform.as_str()).cloned() else {
        tracing::error!(platform = %target.platform, event_id = %event.event_id, "the answer's platform is not enabled; dropping the turn");
        return Err(TurnEnd::Closed);
    };
    let caps = adapter.capabilities().clone();
    let answer = AnswerTo { target, reply_to, adapter, caps, event_id: event.event_id.clone(), deliverer: deliverer.clone() };
    Ok(Admitted { answer, _slot: slot })
}
