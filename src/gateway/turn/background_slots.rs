//! How many `/background` tasks a session may have running at once: each is a full agent turn,
//! so a user (or a script posting as one) cannot start an unbounded number of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Background tasks one session may run at once.
pub(crate) const PER_SESSION: usize = 3;

#[derive(Debug, Default, Clone)]
pub(crate) struct BackgroundSlots {
    running: Arc<Mutex<HashMap<String, usize>>>,
}

/// A running background task of one session; its slot frees when this drops.
#[derive(Debug)]
pub(crate) struct Slot {
    running: Arc<Mutex<HashMap<String, usize>>>,
    session_key: String,
}

impl BackgroundSlots {
    /// A slot for one more task of `session_key`, or `None` when it already runs
    /// [`PER_SESSION`].
    pub(crate) fn try_take(&self, session_key: &str) -> Option<Slot> {
        let mut running = self.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = running.entry(session_key.to_string()).or_default();
        if *count >= PER_SESSION {
            return None;
        }
        *count += 1;
        Some(Slot { running: self.running.clone(), session_key: session_key.to_string() })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut running = self.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = running.get_mut(&self.session_key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                running.remove(&self.session_key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_runs_at_most_three_and_a_finished_task_frees_its_slot() {
        let slots = BackgroundSlots::default();
        let held: Vec<Slot> = (0..PER_SESSION).map(|_| slots.try_take("s1").unwrap()).collect();
        assert!(slots.try_take("s1").is_none());
        assert!(slots.try_take("s2").is_some(), "other sessions are not affected");
        drop(held);
        assert!(slots.try_take("s1").is_some());
    }
}
