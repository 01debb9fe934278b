//! Conversation: what a session has said and will say to the model — the stored transcript
//! and the history kept between turns ([`sessions`], [`history_cache`]), [`compaction`] when it
//! grows too long, the [`models`] a session talks to and what they cost, and the assembly of
//! stored [`messages`] and the system [`prompt`].

pub(crate) mod compaction;
pub(crate) mod history_cache;
pub(crate) mod messages;
pub(crate) mod models;
pub(crate) mod prompt;
pub(crate) mod sessions;
