//! Session: one actor per conversation, and the [`router`] that starts them — the [`actor`]
//! owns a session's live state between events and carries out what each incoming event means (a
//! command, an answer to a clarify question or an approval, a new turn, a message for the
//! running turn); [`decide`] is that meaning, as a pure function. The boards those answers go to
//! (clarify questions, approvals) and the session's queue belong to the turn that waits on them,
//! in [`crate::gateway::turn`], so the turn never reaches up here.

pub(crate) mod actor;
pub(crate) mod decide;
pub(crate) mod router;
