//! Keeping glibc's malloc from holding on to freed heap (`gateway.memory.malloc_arenas`,
//! `gateway.memory.trim_heap_every_secs`). glibc gives threads up to eight arenas per core, and
//! keeps what a burst of turns freed inside them: since a later burst lands in other arenas and
//! other holes, the resident size creeps up for hours although what is live is bounded (the heap
//! profile of `benches/rss.rs`: the live heap levels off at 15 MB between waves, the resident
//! size kept rising). Fewer arenas bound the holes; `malloc_trim(0)` walks every arena and
//! returns its free pages. Elsewhere than glibc there is nothing to do.

use std::time::Duration;
use tokio::task::JoinHandle;

/// Trim every `every` until aborted; `None` when switched off (zero) or not on glibc.
pub(crate) fn spawn(every: Duration) -> Option<JoinHandle<()>> {
    if every.is_zero() || !SUPPORTED {
        return None;
    }
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tick.tick().await;
            // It takes each arena's lock in turn while it walks it: off the async threads.
            if let Err(e) = tokio::task::spawn_blocking(trim).await {
                tracing::warn!(error = %e, "the heap trim task failed");
            }
        }
    }))
}

const SUPPORTED: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

/// Let malloc make at most `arenas` arenas (0 = glibc's own default). Call it before the runtime
/// starts its threads: a thread that already has an arena keeps it.
pub(crate) fn limit_arenas(arenas: u32) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if arenas > 0 {
        let arenas = libc::c_int::try_from(arenas).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt(3) only sets a tunable of malloc; it reads no memory of ours.
        if unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) } != 1 {
            tracing::warn!(arenas, "malloc refused gateway.memory.malloc_arenas; its default applies");
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = arenas;
}

/// Return the free pages of every malloc arena to the system; whether any was returned.
fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim(3) only releases memory malloc itself holds as free; it takes the
        // arena locks it needs and touches no memory of ours.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// This process's anonymous resident memory, in KiB.
    fn rss_anon_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let line = status.lines().find(|l| l.starts_with("RssAnon:")).expect("RssAnon");
        line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("a number")
    }

    #[test]
    fn freed_holes_in_an_arena_go_back_to_the_system() {
        // A thread of its own gets an arena of its own, as a tokio worker does. 64 MiB in 4 KiB
        // blocks, all freed but the last: the free space sits below a live block, so free()
        // alone cannot give it back.
        let (before, after) = std::thread::spawn(|| {
            let mut blocks: Vec<Vec<u8>> = (0..16 * 1024).map(|i| vec![i as u8; 4096]).collect();
            let last = blocks.pop();
            drop(blocks);
            let before = rss_anon_kib();
            trim();
            let after = rss_anon_kib();
            drop(last);
            (before, after)
        })
        .join()
        .expect("the thread ran");
        // Other tests allocate meanwhile; half of the 64 MiB is a wide margin.
        assert!(before.saturating_sub(after) > 32 * 1024, "RssAnon went from {before} KiB to {after} KiB only");
    }

    #[tokio::test]
    async fn zero_switches_the_trim_off() {
        assert!(spawn(Duration::ZERO).is_none());
        let task = spawn(Duration::from_secs(3600)).expect("a trim task on glibc");
        task.abort();
    }
}
