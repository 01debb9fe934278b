//! [`Sessions`]: a session's stored conversation as a turn and the commands use it — the
//! store, the recent history kept between turns, the frozen system prompt and compaction.

use super::prompt::Prompts;
use crate::gateway::conversation::compaction::Compactor;
use crate::gateway::conversation::history_cache::HistoryCache;
use crate::store::Store;

pub struct Sessions {
    pub store: Store,
    /// Recent history of the sessions that talked last, so a turn reads only what is new.
    pub history: HistoryCache,
    pub prompts: Prompts,
    pub compactor: Compactor,
}
