//! Session: one conversation's live state between events — the [`actor`] that owns it and
//! decides what each incoming event means (a command, a clarify answer, a new turn, a message
//! for the running turn), the open [`clarify`] questions, and the [`approvals`] board where a
//! risky command waits for `/approve` or `/deny`.

pub mod actor;
pub mod router;
