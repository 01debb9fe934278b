//! Wake-ups: with a store that several replicas share, an event accepted by any of them rings a
//! bell in the replica serving its platform, so it routes the new row at once instead of finding
//! it at its next poll; a part queued in the outbox by any of them (a cron delivery, a message
//! sent to another platform) rings the couriers, so the replica serving its platform sends it at
//! once. SQLite is one process's file: its bells never ring.
//!
//! A wake-up is a hint, never the record: the rows are. A bell that may have missed rings (its
//! connection to the store dropped, or too many rang at once) says so, and the listener then
//! reads the rows instead of trusting the ids it heard.

use crate::store::StoreError;
use async_trait::async_trait;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Notify;

/// Ids kept between two reads of the bell; past this many it only says "maybe missed",
/// so a listener that falls behind holds a bounded list.
const MOST_HEARD: usize = 4096;

#[async_trait]
pub trait Wakeups: Send + Sync {
    /// A bell that rings with the platform and the id of every event accepted into the inbox
    /// ([`Heard::accepted`]), by this replica or any other; it stays connected (reconnecting as
    /// needed) until it is dropped.
    async fn inbox_listen(&self) -> Result<Bell, StoreError>;

    /// A bell that rings with the lane of every part queued in the outbox, by this replica or
    /// any other; it stays connected (reconnecting as needed) until it is dropped.
    async fn outbox_listen(&self) -> Result<Bell, StoreError>;
}

/// What rang since the bell was last read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Heard {
    /// What rang, in order: the ids of the events accepted, or the lanes of the parts queued.
    pub ids: Vec<String>,
    /// Some may have rung unheard (the listening connection was lost and made again, or too many
    /// rang at once): read the rows rather than trust `ids`.
    pub maybe_missed: bool,
}

/// Between the platform and the event id in an inbox bell's ring (a ring from an older
/// replica names the id alone: [`Heard::accepted`] reads it as naming nothing).
pub(in crate::store) const ACCEPTED_SEPARATOR: char = '\t';

impl Heard {
    /// For an inbox bell: each event accepted, as its platform and id; `None` for a ring that
    /// names none (read the inbox to know).
    pub fn accepted(&self) -> impl Iterator<Item = Option<(&str, &str)>> + '_ {
        self.ids.iter().map(|ring| ring.split_once(ACCEPTED_SEPARATOR))
    }
}

struct Shared {
    heard: Mutex<Heard>,
    rang: Notify,
}

/// The listening end: [`Bell::heard`] waits for the next ring.
pub struct Bell {
    shared: Arc<Shared>,
}

/// The ringing end, held by whatever listens to the store; it notices when the bell is dropped.
pub(in crate::store) struct Ringer {
    shared: Weak<Shared>,
}

impl Bell {
    /// A bell and the ringer that rings it.
    pub(in crate::store) fn pair() -> (Bell, Ringer) {
        let shared = Arc::new(Shared { heard: Mutex::new(Heard::default()), rang: Notify::new() });
        let ringer = Ringer { shared: Arc::downgrade(&shared) };
        (Bell { shared }, ringer)
    }

    /// Waits until something rang, and takes what did. Cancel-safe: what rings while nobody
    /// waits is kept for the next call.
    pub async fn heard(&self) -> Heard {
        loop {
            let rang = self.shared.rang.notified();
            let taken = std::mem::take(&mut *self.shared.heard.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
            if !taken.ids.is_empty() || taken.maybe_missed {
                return taken;
            }
            rang.await;
        }
    }
}

impl Ringer {
    /// `id` rang (an empty one: something did, unnamed); `false` once the bell is gone (the
    /// listener should stop).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))] // only a shared store rings
    pub(in crate::store) fn ring(&self, id: &str) -> bool {
        self.update(|heard| {
            if id.is_empty() || heard.ids.len() >= MOST_HEARD {
                heard.maybe_missed = true;
            } else {
                heard.ids.push(id.to_string());
            }
        })
    }

    /// Something may have rung unheard; `false` once the bell is gone.
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
        let (bell, ringer) = Bell::pair();
        assert!(ringer.ring("a") && ringer.ring("b"));
        assert_eq!(bell.heard().await, Heard { ids: vec!["a".into(), "b".into()], maybe_missed: false });
        assert!(ringer.missed());
        assert_eq!(bell.heard().await, Heard { ids: vec![], maybe_missed: true });
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), bell.heard()).await;
        assert!(waiting.is_err(), "nothing rang since: it waits");
        drop(bell);
        assert!(ringer.is_gone() && !ringer.ring("c"), "the ringer notices the bell is gone");
    }

    #[tokio::test]
    async fn a_flood_is_heard_as_maybe_missed_not_as_an_endless_list() {
        let (bell, ringer) = Bell::pair();
        for i in 0..MOST_HEARD + 10 {
            ringer.ring(&i.to_string());
        }
        let heard = bell.heard().await;
        assert_eq!(heard.ids.len(), MOST_HEARD);
        assert!(heard.maybe_missed);
    }
}
