//! Fresh ids for unsigned deliveries whose sender gives none (signed ones are keyed by content).
//!
//! Built from std only (the crate may not add `uuid`): SipHash under `RandomState`'s per-process
//! random keys over the time and a process-wide counter. The counter makes ids unique within a
//! process, the time across restarts; nothing depends on them being unguessable.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// 32 lower-case hex digits, unique within the process and very likely across processes.
pub(crate) fn fresh_id() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let keys = RandomState::new();
    let high = keys.hash_one((nanos, n, 0u8));
    let low = keys.hash_one((nanos, n, 1u8));
    format!("{high:016x}{low:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_distinct() {
        let ids: HashSet<String> = (0..10_000).map(|_| fresh_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids.iter().all(|id| id.len() == 32));
    }
}
