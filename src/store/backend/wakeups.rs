//! Inbox wake-ups: with a store that several replicas share, an event accepted by any of them
//! rings a bell in the replica that runs the turns, so it routes the new row at once instead of
//! finding it at its next poll. SQLite is one process's file: its bell never rings.
//!
//! A wake-up is a hint, never the record: the rows are. A bell that may have missed rings (its
//! connection to the store dropped, or too many rang at once) says so, and the listener then
//! reads the inbox instead of trusting the ids it heard.

use crate::store::StoreError;
use async_trait::async_trait;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Notify;

/// Event ids kept between two reads of the bell; past this many it only says "maybe missed",
/// so a listener that falls behind holds a bounded list.
const MOST_HEARD: usize = 4096;

#[async_trait]
pub trait InboxWakeups: Send + Sync {
    /// A bell that rings whenever an event is accepted into the inbox, by this replica or any
    /// other; it stays connected (reconnecting as needed) until it is dropped.
    async fn inbox_listen(&self) -> Result<InboxBell, StoreError>;
}

/// What rang since the bell was last read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Heard {
    /// The ids of the events accepted, in the order they rang.
    pub event_ids: Vec<String>,
    /// Some may have rung unheard (the listening connection was lost and made again, or too many
    /// rang at once): read the inbox rather than trust `event_ids`.
    pub maybe_missed: bool,
}

struct Shared {
    heard: Mutex<Heard>,
    rang: Notify,
}

/// The listening end: [`InboxBell::heard`] waits for the next ring.
pub struct InboxBell {
    shared: Arc<Shared>,
}

/// The ringing end, held by whatever listens to the store; it notices when the bell is dropped.
pub(in crate::store) struct Ringer {
    shared: Weak<Shared>,
}

impl InboxBell {
    /// A bell and the ringer that rings it.
    pub(in crate::store) fn pair() -> (InboxBell, Ringer) {
        let shared = Arc::new(Shared { heard: Mutex::new(Heard::default()), rang: Notify::new() });
        let ringer = Ringer { shared: Arc::downgrade(&shared) };
        (InboxBell { shared }, ringer)
    }

    /// Waits until something rang, and takes what did. Cancel-safe: what rings while nobody
    /// waits is kept for the next call.
    pub async fn heard(&self) -> Heard {
        loop {
            let rang = self.shared.rang.notified();
            let taken = std::mem::take(&mut *self.shared.heard.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
            if !taken.event_ids.is_empty() || taken.maybe_missed {
                return taken;
            }
            rang.await;
        }
    }
}

impl Ringer {
    /// `event_id` was accepted; `false` once the bell is gone (the listener should stop).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))] // only a shared store rings
    pub(in crate::store) fn ring(&self, event_id: &str) -> bool {
        self.update(|heard| {
            if event_id.is_empty() || heard.event_ids.len() >= MOST_HEARD {
                heard.maybe_missed = true;
            } else {
                heard.event_ids.push(event_id.to_string());
            }
        })
    }

    /// Events may have been accepted unheard; `false` once the bell is gone.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))] // only a shared store rings
    pub(in crate::store) fn missed(&self) -> bool {
        self.update(|heard| heard.maybe_missed = true)
    }

    /// Whether the bell was dropped.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))] // only a shared store rings
    pub(in crate::store) fn is_gone(&self) -> bool {
        self.shared.strong_count() == 0
    }

    fn update(&self, change: impl FnOnce(&mut Heard)) -> bool {
        let Some(shared) = self.shared.upgrade() else { return false };
        change(&mut shared.heard.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        shared.rang.notify_one();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn what_rings_while_nobody_waits_is_heard_next_and_only_once() {
        let (bell, ringer) = InboxBell::pair();
        assert!(ringer.ring("a") && ringer.ring("b"));
        assert_eq!(bell.heard().await, Heard { event_ids: vec!["a".into(), "b".into()], maybe_missed: false });
        assert!(ringer.missed());
        assert_eq!(bell.heard().await, Heard { event_ids: vec![], maybe_missed: true });
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), bell.heard()).await;
        assert!(waiting.is_err(), "nothing rang since: it waits");
        drop(bell);
        assert!(ringer.is_gone() && !ringer.ring("c"), "the ringer notices the bell is gone");
    }

    #[tokio::test]
    async fn a_flood_is_heard_as_maybe_missed_not_as_an_endless_list() {
        let (bell, ringer) = InboxBell::pair();
        for i in 0..MOST_HEARD + 10 {
            ringer.ring(&i.to_string());
        }
        let heard = bell.heard().await;
        assert_eq!(heard.event_ids.len(), MOST_HEARD);
        assert!(heard.maybe_missed);
    }
}
