//! The inbound attachment cache (`HERMES_HOME/cache`) kept private and bounded: made 0700 and
//! checked to be the gateway user's own before anything runs, pruned to `gateway.media_cache`'s
//! limits at start-up and then every [`SWEEP_EVERY`]. Adapters write into it
//! ([`hermes_adapter::media_cache`]); only the gateway deletes from it.

use crate::config::Home;
use hermes_adapter::{CacheLimits, MediaCache};
use std::time::{Duration, SystemTime};
use tokio::task::JoinHandle;

/// Often enough that a burst of downloads does not sit far over the size limit for long; a walk
/// of the cache costs little.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(600);

/// The cache, made private. An error (the folder is a symlink or another user's) stops the
/// gateway: attachments must not land where someone else can read or replace them.
pub(crate) fn open(home: &Home) -> Result<MediaCache, MediaCacheError> {
    let cache = MediaCache::new(home.cache_dir());
    let owner = cache.owner()?;
    // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot fail.
    let me = unsafe { libc::geteuid() };
    if owner != me {
        return Err(MediaCacheError::NotOurs { root: cache.root().to_path_buf(), owner, me });
    }
    Ok(cache)
}

/// Why the attachment cache cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MediaCacheError {
    #[error(transparent)]
    Unusable(#[from] hermes_adapter::media_cache::CacheError),
    #[error("{} belongs to user {owner}, not to the user running the gateway ({me}); remove it or fix its owner", root.display())]
    NotOurs { root: std::path::PathBuf, owner: u32, me: u32 },
}

/// Prune once, off the async threads; what was removed is logged.
pub(crate) async fn sweep(cache: &MediaCache, limits: CacheLimits) {
    let task = {
        let cache = cache.clone();
        tokio::task::spawn_blocking(move || cache.prune(limits, SystemTime::now()))
    };
    match task.await {
        Ok(Ok(report)) => {
            if report.removed_files > 0 {
                tracing::info!(
                    removed = report.removed_files,
                    freed_bytes = report.freed_bytes,
                    kept_bytes = report.kept_bytes,
                    "media cache pruned"
                );
            }
            if report.failed_removals > 0 {
                tracing::warn!(failed = report.failed_removals, "some media cache files could not be removed");
            }
        }
        Ok(Err(e)) => tracing::warn!(error = %e, "media cache sweep failed"),
        Err(e) => tracing::warn!(error = %e, "media cache sweep task failed"),
    }
}

/// Sweep every [`SWEEP_EVERY`] until aborted (the start-up sweep is the caller's).
pub(crate) fn spawn(cache: MediaCache, limits: CacheLimits) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + SWEEP_EVERY, SWEEP_EVERY);
        loop {
            tick.tick().await;
            sweep(&cache, limits).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, symlink};

    #[test]
    fn the_cache_is_made_private_and_a_symlinked_one_stops_the_gateway() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        home.ensure_dirs().unwrap();
        let cache = open(&home).unwrap();
        assert_eq!(std::fs::metadata(cache.root()).unwrap().mode() & 0o777, 0o700);

        let elsewhere = tempfile::tempdir().unwrap();
        let linked = tempfile::tempdir().unwrap();
        symlink(elsewhere.path(), linked.path().join("cache")).unwrap();
        let err = open(&Home::at(linked.path())).unwrap_err().to_string();
        assert!(err.contains("not a private folder"), "{err}");
    }

    #[tokio::test]
    async fn a_sweep_applies_the_configured_limits() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MediaCache::new(dir.path().join("cache"));
        let old = cache.folder("documents").unwrap().join("old.txt");
        std::fs::write(&old, "x").unwrap();
        let file = std::fs::File::options().write(true).open(&old).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(9 * 24 * 3600)).unwrap();
        let config = crate::config::MediaCacheConfig::default();
        sweep(&cache, config.limits()).await;
        assert!(!old.exists(), "a nine-day-old file is gone under the default week");
    }
}
