//! Intake: what happens to a platform event before a session sees it — the durable,
//! deduplicated [`inbox`] (acked to the platform only once written), [`auth`] (who may talk, by
//! platform user id) and [`pairing`] (how a stranger asks to), [`session_key`] (which
//! conversation an event belongs to) and the [`directory`] of sessions for HTTP surfaces; with
//! replicas, [`follow`] routes what other replicas accepted into the shared inbox, and
//! [`accepted_here`] keeps an event answered on its request in the replica that took it. The
//! router that hands an admitted event to its session lives with the actors, in
//! the session wing: it starts them, so it stands above them.

pub(crate) mod accepted_here;
pub(crate) mod access;
pub(crate) mod auth;
pub(crate) mod directory;
pub(crate) mod follow;
pub(crate) mod inbox;
pub(crate) mod pairing;
pub(crate) mod session_key;
