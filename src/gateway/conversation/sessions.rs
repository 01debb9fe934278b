//! [`Sessions`]: a session's stored conversation as a turn and the commands use it — the
//! store concerns it reads and writes (turns, messages, routes), the recent history kept between
//! turns, the frozen system prompt and compaction.

use super::prompt::Prompts;
use crate::gateway::conversation::compaction::Compactor;
use crate::gateway::conversation::history_cache::HistoryCache;
use crate::store::{Routes, SessionLog, Turns};
use std::sync::Arc;

pub(crate) struct Sessions {
    /// Turns opened, and their messages and usage recorded, one write each.
    pub turns: Arc<dyn Turns>,
    /// The sessions' stored messages and titles.
    pub log: Arc<dyn SessionLog>,
    /// Which session a key talks to: a one-shot session is closed after its turn.
    pub routes: Arc<dyn Routes>,
    /// Recent history of the sessions that talked last, so a turn reads only what is new.
    pub history: HistoryCache,
    pub prompts: Prompts,
    pub compactor: Compactor,
}
