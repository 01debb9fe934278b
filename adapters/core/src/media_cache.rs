//! The private folder inbound attachments are saved in (`HERMES_HOME/cache`). What people send
//! the bot lands on the gateway's disk, so the folder is private and bounded:
//!
//! - the folder and its sub-folders are 0700 and real folders (a symlink in their place is
//!   refused rather than written through); sub-folders must belong to the cache folder's owner,
//!   and the gateway checks at start-up that the cache folder is its own ([`MediaCache::owner`]);
//! - files are created 0600 and never through an existing path (`create_new`), so a planted
//!   symlink cannot redirect a download;
//! - [`MediaCache::prune`] removes files older than the age limit, then the oldest ones until the
//!   rest fits the size limit. The gateway runs it at start-up and periodically.
//!
//! Adapters download into [`MediaCache::folder`]s; the gateway owns the limits.

use std::fs::{self, DirBuilder, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const PRIVATE_DIR_MODE: u32 = 0o700;
const PRIVATE_FILE_MODE: u32 = 0o600;

/// How much the cache may keep. A zero limit is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// Total size of the kept files; the oldest go first when it is exceeded.
    pub max_bytes: u64,
    /// Files older than this are removed.
    pub max_age: Duration,
}

impl Default for CacheLimits {
    /// 500 MB, kept at most a week.
    fn default() -> Self {
        Self { max_bytes: 500 * 1024 * 1024, max_age: Duration::from_secs(7 * 24 * 3600) }
    }
}

/// Why the cache folder could not be prepared or written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A filesystem call failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder the call was about.
        path: PathBuf,
        /// What the filesystem said.
        source: io::Error,
    },
    /// The folder exists but others could read it or swap it, so attachments are not put there.
    #[error("{} is not a private folder (a symlink, a file, or another user's folder); attachments are not kept there", path.display())]
    NotPrivate {
        /// The folder that failed the check.
        path: PathBuf,
    },
}

/// What one [`MediaCache::prune`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Files removed for age or size.
    pub removed_files: usize,
    /// Bytes those files took.
    pub freed_bytes: u64,
    /// Bytes still in the cache afterwards.
    pub kept_bytes: u64,
    /// Files that should have gone but could not be removed.
    pub failed_removals: usize,
}

/// The cache folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaCache {
    root: PathBuf,
}

impl MediaCache {
    /// The cache at `root`; nothing is created until it is first prepared.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The folder attachments are saved in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Create the folder if missing and make sure it is a real folder, 0700.
    pub fn ensure(&self) -> Result<(), CacheError> {
        private_dir(&self.root, None).map(|_| ())
    }

    /// The user id owning the folder (created if missing); the gateway compares it with its own.
    pub fn owner(&self) -> Result<u32, CacheError> {
        private_dir(&self.root, None)
    }

    /// The private sub-folder `name` (`images`, `documents`), created if missing; it must belong to
    /// whoever owns the cache folder.
    pub fn folder(&self, name: &str) -> Result<PathBuf, CacheError> {
        let owner = self.owner()?;
        let path = self.root.join(name);
        private_dir(&path, Some(owner))?;
        Ok(path)
    }

    /// Remove every file older than `limits.max_age` (by modification time, against `now`), then
    /// the oldest files until the rest fits `limits.max_bytes`. Sub-folders are walked; symlinks
    /// are removed as links, never followed.
    pub fn prune(&self, limits: CacheLimits, now: SystemTime) -> Result<PruneReport, CacheError> {
        let mut files = Vec::new();
        match fs::symlink_metadata(&self.root) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(PruneReport::default()),
            Err(source) => return Err(CacheError::Io { path: self.root.clone(), source }),
            Ok(meta) if !meta.is_dir() => return Err(CacheError::NotPrivate { path: self.root.clone() }),
            Ok(_) => collect_files(&self.root, &mut files)?,
        }
        // Oldest first: the age pass and the size pass both take from the front.
        files.sort_by(|a, b| a.modified.cmp(&b.modified).then_with(|| a.path.cmp(&b.path)));
        let mut report = PruneReport::default();
        let mut total: u64 = files.iter().map(|f| f.len).sum();
        for file in files {
            let too_old = !limits.max_age.is_zero() && now.duration_since(file.modified).is_ok_and(|age| age > limits.max_age);
            let too_much = limits.max_bytes > 0 && total > limits.max_bytes;
            if !(too_old || too_much) {
                continue;
            }
            match fs::remove_file(&file.path) {
                Ok(()) => {
                    report.removed_files += 1;
                    report.freed_bytes += file.len;
                    total -= file.len;
                }
                // Gone meanwhile (a download renamed over it, another sweep): it no longer counts.
                Err(e) if e.kind() == io::ErrorKind::NotFound => total -= file.len,
                Err(_) => report.failed_removals += 1,
            }
        }
        report.kept_bytes = total;
        Ok(report)
    }
}

/// Open a new file at `path` for writing, mode 0600. Fails if anything (a file, a symlink) is
/// already there.
pub async fn create_private_file(path: &Path) -> io::Result<tokio::fs::File> {
    tokio::fs::OpenOptions::new().write(true).create_new(true).mode(PRIVATE_FILE_MODE).open(path).await
}

struct CachedFile {
    path: PathBuf,
    len: u64,
    modified: SystemTime,
}

fn collect_files(dir: &Path, out: &mut Vec<CachedFile>) -> Result<(), CacheError> {
    let io_error = |source| CacheError::Io { path: dir.to_path_buf(), source };
    for entry in fs::read_dir(dir).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        // `DirEntry::metadata` does not follow symlinks: a link is one small file here.
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => return Err(CacheError::Io { path: entry.path(), source }),
        };
        if meta.is_dir() {
            collect_files(&entry.path(), out)?;
        } else {
            out.push(CachedFile { path: entry.path(), len: meta.len(), modified: meta.modified().unwrap_or(UNIX_EPOCH) });
        }
    }
    Ok(())
}

/// Create `path` (and missing parents) 0700 if needed; then it must be a real folder (of `owner`,
/// when given), and it is made 0700 if it was looser. Returns its owner's user id.
fn private_dir(path: &Path, owner: Option<u32>) -> Result<u32, CacheError> {
    let io_error = |source| CacheError::Io { path: path.to_path_buf(), source };
    if let Err(e) = fs::symlink_metadata(path) {
        if e.kind() != io::ErrorKind::NotFound {
            return Err(io_error(e));
        }
        DirBuilder::new().recursive(true).mode(PRIVATE_DIR_MODE).create(path).map_err(io_error)?;
    }
    let meta = fs::symlink_metadata(path).map_err(io_error)?;
    if !meta.is_dir() || owner.is_some_and(|uid| uid != meta.uid()) {
        return Err(CacheError::NotPrivate { path: path.to_path_buf() });
    }
    if meta.mode() & 0o777 != PRIVATE_DIR_MODE {
        // Only the owner may change the mode: another user's folder fails here.
        fs::set_permissions(path, Permissions::from_mode(PRIVATE_DIR_MODE)).map_err(io_error)?;
    }
    Ok(meta.uid())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    const HOUR: Duration = Duration::from_secs(3600);

    /// A file of `len` bytes last written `age` before `now`.
    fn file(dir: &Path, name: &str, len: usize, now: SystemTime, age: Duration) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, vec![b'x'; len]).unwrap();
        fs::File::options().write(true).open(&path).unwrap().set_modified(now - age).unwrap();
        path
    }

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().mode() & 0o777
    }

    #[test]
    fn files_older_than_the_age_limit_go_and_younger_ones_stay() {
        let home = tempfile::tempdir().unwrap();
        let cache = MediaCache::new(home.path().join("cache"));
        let images = cache.folder("images").unwrap();
        let now = SystemTime::now();
        let stale = file(&images, "old.jpg", 10, now, 8 * 24 * HOUR);
        let fresh = file(&images, "new.jpg", 10, now, HOUR);
        let report = cache.prune(CacheLimits { max_bytes: 0, max_age: 7 * 24 * HOUR }, now).unwrap();
        assert!(!stale.exists(), "a file older than a week is removed");
        assert!(fresh.exists(), "an hour-old file stays");
        assert_eq!(report, PruneReport { removed_files: 1, freed_bytes: 10, kept_bytes: 10, failed_removals: 0 });
    }

    #[test]
    fn the_oldest_files_go_first_until_the_rest_fits_the_size_limit() {
        let home = tempfile::tempdir().unwrap();
        let cache = MediaCache::new(home.path().join("cache"));
        let (images, documents) = (cache.folder("images").unwrap(), cache.folder("documents").unwrap());
        let now = SystemTime::now();
        let oldest = file(&documents, "a.pdf", 40, now, 3 * HOUR);
        let middle = file(&images, "b.jpg", 30, now, 2 * HOUR);
        let newest = file(&images, "c.jpg", 50, now, HOUR);
        let report = cache.prune(CacheLimits { max_bytes: 90, max_age: Duration::ZERO }, now).unwrap();
        assert!(!oldest.exists(), "120 bytes over a 90-byte limit: the oldest file goes, in whichever sub-folder");
        assert!(middle.exists() && newest.exists(), "80 bytes fit: nothing newer is touched");
        assert_eq!((report.removed_files, report.kept_bytes), (1, 80));

        cache.prune(CacheLimits { max_bytes: 55, max_age: Duration::ZERO }, now).unwrap();
        assert!(!middle.exists() && newest.exists(), "still too much: the next oldest goes, the newest stays");
    }

    #[test]
    fn zero_limits_keep_everything_and_a_missing_cache_is_empty() {
        let home = tempfile::tempdir().unwrap();
        let cache = MediaCache::new(home.path().join("cache"));
        assert_eq!(cache.prune(CacheLimits::default(), SystemTime::now()).unwrap(), PruneReport::default());
        let now = SystemTime::now();
        let kept = file(&cache.folder("documents").unwrap(), "year-old.txt", 1000, now, 365 * 24 * HOUR);
        cache.prune(CacheLimits { max_bytes: 0, max_age: Duration::ZERO }, now).unwrap();
        assert!(kept.exists());
    }

    #[test]
    fn a_symlink_in_the_cache_is_removed_as_a_link_and_its_target_is_untouched() {
        let home = tempfile::tempdir().unwrap();
        let cache = MediaCache::new(home.path().join("cache"));
        let outside = home.path().join("precious.txt");
        fs::write(&outside, "keep me").unwrap();
        let link = cache.folder("documents").unwrap().join("link");
        symlink(&outside, &link).unwrap();
        // Far in the future: the link is older than any age limit.
        let later = SystemTime::now() + 400 * 24 * HOUR;
        cache.prune(CacheLimits::default(), later).unwrap();
        assert!(fs::symlink_metadata(&link).is_err(), "the link went");
        assert_eq!(fs::read_to_string(&outside).unwrap(), "keep me");
    }

    #[tokio::test]
    async fn folders_are_0700_files_0600_and_an_existing_path_is_never_written_through() {
        let home = tempfile::tempdir().unwrap();
        let cache = MediaCache::new(home.path().join("cache"));
        let images = cache.folder("images").unwrap();
        assert_eq!((mode(cache.root()), mode(&images)), (0o700, 0o700));
        assert_eq!(cache.owner().unwrap(), fs::metadata(home.path()).unwrap().uid(), "the folder is the creating user's");
        let path = images.join("photo.jpg");
        drop(create_private_file(&path).await.unwrap());
        assert_eq!(mode(&path), 0o600);

        let target = home.path().join("target.txt");
        fs::write(&target, "original").unwrap();
        let planted = images.join("planted.jpg");
        symlink(&target, &planted).unwrap();
        assert!(create_private_file(&planted).await.is_err(), "a symlink at the path is refused");
        assert_eq!(fs::read_to_string(&target).unwrap(), "original");
    }

    #[test]
    fn a_loose_cache_folder_is_tightened_and_a_symlinked_one_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let loose = home.path().join("cache");
        fs::create_dir(&loose).unwrap();
        fs::set_permissions(&loose, Permissions::from_mode(0o777)).unwrap();
        MediaCache::new(&loose).ensure().unwrap();
        assert_eq!(mode(&loose), 0o700, "a world-writable cache is made private");

        let shared = home.path().join("shared-tmp");
        fs::create_dir(&shared).unwrap();
        let linked = home.path().join("linked-cache");
        symlink(&shared, &linked).unwrap();
        assert!(matches!(MediaCache::new(&linked).ensure(), Err(CacheError::NotPrivate { .. })));
        assert!(matches!(MediaCache::new(&loose).folder("../linked-cache"), Err(CacheError::NotPrivate { .. })));
    }
}
