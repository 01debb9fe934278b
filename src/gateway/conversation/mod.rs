//! Conversation: what a session has said and will say to the model — the stored transcript
//! and the history kept between turns ([`sessions`], [`history_cache`]), [`compaction`] when it
//! grows too long, the [`models`] a session talks to and what they cost, and the assembly of
//! stored [`messages`] and the system [`prompt`].

pub mod compaction;
pub mod history_cache;
pub mod messages;
pub mod models;
pub mod prompt;
pub mod sessions;
