//! Intake: what happens to a platform event before any session sees it — the durable,
//! deduplicated [`inbox`] (acked to the platform only once written), the [`router`] that
//! hands it to its session's actor, [`auth`] (who may talk, by platform user id) and
//! [`pairing`] (how a stranger asks to), [`session_key`] (which conversation an event
//! belongs to) and the [`directory`] of sessions for HTTP surfaces.

pub mod auth;
pub mod directory;
pub mod inbox;
pub(crate) mod pairing;
pub mod session_key;
