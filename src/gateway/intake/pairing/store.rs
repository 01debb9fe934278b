//! The pairing store: the codes strangers are given in a DM, the users the operator approved, and
//! the limits that keep codes from being farmed or guessed — per platform, in files under
//! `HERMES_HOME/platforms/pairing/` that the CLI and the running gateway both write.
//!
//! - `<platform>-pending.json`: codes waiting for approval. A code is kept only as a salted
//!   SHA-256 hash, with the user's id and name and when it was issued; the code itself exists
//!   only in the chat it was sent to.
//! - `<platform>-approved.json`: approved users by id (`{id: {user_name, approved_at}}`, Hermes'
//!   own format, so an existing approval list keeps working).
//! - `_rate_limits.json`: when each user last asked for a code (`<platform>:<id>`), failed
//!   approvals (`_failures:<platform>`) and lockouts (`_lockout:<platform>`, until when).
//!
//! Every change is a read-modify-write under the folder's lock (an exclusive advisory lock on
//! `.lock`), so an approval from the CLI and a code issued by the gateway never lose each other's
//! update. Files are replaced atomically and are owner-only (0600, directory 0700); a reader that
//! only looks (the gateway's approved-user check) needs no lock, since a file is always whole.
//!
//! With a shared store (PostgreSQL) the same documents are rows of its pairing folder
//! (`store::folders`), changed in one transaction each, so every replica and the CLI see one set
//! of codes, approvals and limits.

use crate::store::folders::{FileFolder, Folder, FolderLock, LockWait, Revision};
use rand::TryRngCore;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

/// Codes avoid characters that read alike (0/O, 1/I); 32 symbols, so one random byte modulo 32
/// picks each without bias.
pub(crate) const ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
pub(crate) const CODE_LEN: usize = 8;
/// How long a code can be approved, in seconds.
pub(crate) const CODE_TTL_SECS: f64 = 3600.0;
/// A user gets at most one code in this many seconds; inside the window their DMs go unanswered.
pub(crate) const RATE_LIMIT_SECS: f64 = 600.0;
/// Pending codes per platform: a flood of strangers cannot fill the operator's list.
pub(crate) const MAX_PENDING: usize = 3;
/// Failed approvals before a platform's approvals (and new codes) are locked.
pub(crate) const MAX_FAILURES: u32 = 5;
pub(crate) const LOCKOUT_SECS: f64 = 3600.0;

const RATE_LIMITS_FILE: &str = "_rate_limits.json";
const LOCK_FILE: &str = ".lock";
const PENDING_SUFFIX: &str = "-pending.json";
const APPROVED_SUFFIX: &str = "-approved.json";
/// Names are shown to the operator; longer ones are cut.
const MAX_NAME_CHARS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub(crate) enum PairingError {
    #[error("`{0}` is not a platform name: use the platform's lower-case name, e.g. `telegram`")]
    BadPlatform(String),
    #[error("cannot use the pairing store at {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{} is not valid pairing data ({source}); fix it, or delete it (deleting an approved list un-approves its users)", path.display())]
    Corrupt { path: PathBuf, source: serde_json::Error },
    #[error("the system's random number source failed: {0}")]
    Random(String),
    #[error("`{code}` is not a pending pairing code for {platform}{}", after_failure(platform, *attempts_left))]
    WrongCode { platform: String, code: String, attempts_left: u32 },
    #[error(
        "pairing code `{code}` for {platform} has expired (codes last 1 hour); the user gets a new one by messaging the bot again{}",
        after_failure(platform, *attempts_left)
    )]
    Expired { platform: String, code: String, attempts_left: u32 },
    #[error(
        "pairing approvals for {platform} are locked for another {minutes} min after {MAX_FAILURES} failed attempts; no code is accepted until then"
    )]
    LockedOut { platform: String, minutes: u64 },
}

/// What follows a failed approval: how many tries are left before the lockout, or that it began.
fn after_failure(platform: &str, attempts_left: u32) -> String {
    if attempts_left == 0 {
        format!(". That was the {MAX_FAILURES}th failed attempt: approvals for {platform} are now locked for 1 hour")
    } else {
        format!(" (check the code the user was sent; {attempts_left} more failed attempt(s) lock {platform} approvals for 1 hour)")
    }
}

/// What a stranger's DM earns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CodeRequest {
    /// A new code, to be sent to them (and nowhere else).
    Issued(String),
    /// They asked recently: no answer at all, so the bot cannot be used to spam them.
    Silent,
    /// No code can be issued now (too many pending, or approvals locked); tell them once.
    TooMany,
}

/// A pending code as the operator sees it: who asked and when, never the code.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PendingRequest {
    pub platform: String,
    pub user_id: String,
    pub user_name: String,
    /// Unix seconds.
    pub created_at: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApprovedUser {
    pub platform: String,
    pub user_id: String,
    pub user_name: String,
    /// Unix seconds.
    pub approved_at: f64,
}

/// One pending code, keyed in its file by `sha256(salt + code)`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PendingEntry {
    salt: String,
    user_id: String,
    #[serde(default)]
    user_name: String,
    created_at: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ApprovedEntry {
    #[serde(default)]
    user_name: String,
    #[serde(default)]
    approved_at: f64,
}

type Pending = BTreeMap<String, PendingEntry>;
type Approved = BTreeMap<String, ApprovedEntry>;
type Limits = BTreeMap<String, f64>;

/// The pairing documents: HERMES_HOME's pairing directory, or a shared store's folder.
#[derive(Debug, Clone)]
pub(crate) struct PairingStore {
    folder: Arc<dyn Folder>,
}

/// Now, in Unix seconds (the files' time unit, as in Hermes).
pub(crate) fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// A code as typed by the operator: surrounding space and case do not matter.
pub(crate) fn normalize_code(code: &str) -> String {
    code.trim().trim_matches('`').trim().to_ascii_uppercase()
}

fn pending_name(platform: &str) -> String {
    format!("{platform}{PENDING_SUFFIX}")
}

/// The document of `platform`'s approved users.
fn approved_name(platform: &str) -> Result<String, PairingError> {
    Ok(format!("{}{APPROVED_SUFFIX}", platform_name(platform)?))
}

impl PairingStore {
    /// The pairing directory `dir` of a HERMES_HOME.
    #[cfg(test)]
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self::in_folder(Arc::new(Self::file_folder(dir)))
    }

    /// The pairing directory `dir` as a folder, with Hermes' lock file.
    pub(crate) fn file_folder(dir: PathBuf) -> FileFolder {
        FileFolder::new(dir, LOCK_FILE)
    }

    /// The pairing documents in `folder`.
    pub(crate) fn in_folder(folder: Arc<dyn Folder>) -> Self {
        Self { folder }
    }

    /// The directory of a file folder (the tests look at the files themselves).
    #[cfg(test)]
    pub(crate) fn dir(&self) -> PathBuf {
        self.folder.locate("")
    }

    /// Where the pairing documents are, for people.
    pub(crate) fn location(&self) -> PathBuf {
        self.folder.locate("")
    }

    /// The revision of `platform`'s approved users (`None`: nobody was ever approved there).
    pub(crate) fn approved_revision(&self, platform: &str) -> Result<Option<Revision>, PairingError> {
        let name = approved_name(platform)?;
        self.folder.revision(&name).map_err(|source| self.io(&name, source))
    }

    /// Give `user_id` a code on `platform`, unless they asked within the rate-limit window (then
    /// silence) or none can be issued (then [`CodeRequest::TooMany`], once: the refusal starts a
    /// rate-limit window too). A new code replaces the user's older one.
    pub(crate) fn request_code(&self, platform: &str, user_id: &str, user_name: &str, now: f64) -> Result<CodeRequest, PairingError> {
        let platform = platform_name(platform)?;
        self.change(|docs| {
            let mut limits: Limits = docs.load(RATE_LIMITS_FILE)?;
            let asked_key = format!("{platform}:{user_id}");
            if limits.get(&asked_key).is_some_and(|at| now - at < RATE_LIMIT_SECS) {
                return Ok(CodeRequest::Silent);
            }
            let pending_name = pending_name(&platform);
            let mut pending = docs.load_pending(&pending_name)?;
            pending.retain(|_, e| !expired(e, now) && e.user_id != user_id);
            prune_limits(&mut limits, now);
            limits.insert(asked_key, now);
            let outcome = if lockout_until(&limits, &platform).is_some_and(|until| now < until) || pending.len() >= MAX_PENDING {
                CodeRequest::TooMany
            } else {
                let code = random_code()?;
                let salt = hex::encode(random_bytes::<16>()?);
                let entry = PendingEntry { salt, user_id: user_id.to_string(), user_name: clean_name(user_name), created_at: now };
                pending.insert(hash_code(&entry.salt, &code), entry);
                CodeRequest::Issued(code)
            };
            docs.save(&pending_name, &pending)?;
            docs.save(RATE_LIMITS_FILE, &limits)?;
            Ok(outcome)
        })
    }

    /// Approve the user who was sent `code` on `platform`. A wrong or expired code counts as a
    /// failed attempt; the [`MAX_FAILURES`]th locks the platform's approvals for an hour, during
    /// which even a right code is refused.
    pub(crate) fn approve(&self, platform: &str, code: &str, now: f64) -> Result<ApprovedUser, PairingError> {
        let platform = platform_name(platform)?;
        let code = normalize_code(code);
        self.change(|docs| {
            let mut limits: Limits = docs.load(RATE_LIMITS_FILE)?;
            if let Some(until) = lockout_until(&limits, &platform).filter(|until| now < *until) {
                return Err(PairingError::LockedOut { platform: platform.clone(), minutes: ((until - now) / 60.0).ceil() as u64 });
            }
            let pending_name = pending_name(&platform);
            let mut pending = docs.load_pending(&pending_name)?;
            let found = pending.iter().find(|(hash, e)| hash_code(&e.salt, &code) == **hash).map(|(hash, e)| (hash.clone(), e.clone()));
            let found_expired = found.as_ref().is_some_and(|(_, e)| expired(e, now));
            pending.retain(|_, e| !expired(e, now));
            let entry = match found {
                Some((hash, entry)) if !found_expired => {
                    pending.remove(&hash);
                    entry
                }
                _ => {
                    // Saved although the approval fails: the failure counts.
                    let attempts_left = record_failure(&mut limits, &platform, now);
                    docs.save(&pending_name, &pending)?;
                    docs.save(RATE_LIMITS_FILE, &limits)?;
                    let (platform, code) = (platform.clone(), code.clone());
                    return Err(if found_expired {
                        PairingError::Expired { platform, code, attempts_left }
                    } else {
                        PairingError::WrongCode { platform, code, attempts_left }
                    });
                }
            };
            let approved_name = approved_name(&platform)?;
            let mut approved: Approved = docs.load(&approved_name)?;
            approved.insert(entry.user_id.clone(), ApprovedEntry { user_name: entry.user_name.clone(), approved_at: now });
            // Approved before the code is consumed: a crash in between leaves a harmless stale code.
            docs.save(&approved_name, &approved)?;
            docs.save(&pending_name, &pending)?;
            limits.remove(&failures_key(&platform));
            docs.save(RATE_LIMITS_FILE, &limits)?;
            Ok(ApprovedUser { platform: platform.clone(), user_id: entry.user_id, user_name: entry.user_name, approved_at: now })
        })
    }

    /// Take `user_id`'s approval on `platform` away; false when they were not approved.
    pub(crate) fn revoke(&self, platform: &str, user_id: &str) -> Result<bool, PairingError> {
        let name = approved_name(platform)?;
        self.change(|docs| {
            let mut approved: Approved = docs.load(&name)?;
            if approved.remove(user_id).is_none() {
                return Ok(false);
            }
            docs.save(&name, &approved)?;
            Ok(true)
        })
    }

    /// Drop every pending code (of one platform, or of all); returns how many were dropped.
    pub(crate) fn clear_pending(&self, platform: Option<&str>) -> Result<usize, PairingError> {
        let platforms = match platform {
            Some(p) => vec![platform_name(p)?],
            None => self.platforms_with(PENDING_SUFFIX)?,
        };
        self.change(|docs| {
            let mut dropped = 0;
            for platform in platforms {
                let name = pending_name(&platform);
                let pending = docs.load_pending(&name)?;
                if !pending.is_empty() {
                    dropped += pending.len();
                    docs.save(&name, &Pending::new())?;
                }
            }
            Ok(dropped)
        })
    }

    /// Every code not yet expired, oldest first.
    pub(crate) fn pending(&self, now: f64) -> Result<Vec<PendingRequest>, PairingError> {
        let mut out = Vec::new();
        for platform in self.platforms_with(PENDING_SUFFIX)? {
            let name = pending_name(&platform);
            for entry in pending_only(&name, self.load(&name)?).into_values().filter(|e| !expired(e, now)) {
                out.push(PendingRequest {
                    platform: platform.clone(),
                    user_id: entry.user_id,
                    user_name: entry.user_name,
                    created_at: entry.created_at,
                });
            }
        }
        out.sort_by(|a, b| a.created_at.total_cmp(&b.created_at));
        Ok(out)
    }

    /// Every approved user, by platform.
    pub(crate) fn approved(&self) -> Result<Vec<ApprovedUser>, PairingError> {
        let mut out = Vec::new();
        for platform in self.platforms_with(APPROVED_SUFFIX)? {
            let approved: Approved = self.load(&approved_name(&platform)?)?;
            out.extend(approved.into_iter().map(|(user_id, e)| ApprovedUser {
                platform: platform.clone(),
                user_id,
                user_name: e.user_name,
                approved_at: e.approved_at,
            }));
        }
        Ok(out)
    }

    /// The ids approved on `platform`.
    pub(crate) fn approved_ids(&self, platform: &str) -> Result<HashSet<String>, PairingError> {
        let approved: Approved = self.load(&approved_name(platform)?)?;
        Ok(approved.into_keys().collect())
    }

    /// The platforms whose approvals are locked now, and until when.
    pub(crate) fn lockouts(&self, now: f64) -> Result<Vec<(String, f64)>, PairingError> {
        let limits: Limits = self.load(RATE_LIMITS_FILE)?;
        Ok(limits
            .into_iter()
            .filter_map(|(key, until)| Some((key.strip_prefix("_lockout:")?.to_string(), until)))
            .filter(|(_, until)| now < *until)
            .collect())
    }

    /// The platforms that have a document ending in `suffix`, sorted.
    fn platforms_with(&self, suffix: &str) -> Result<Vec<String>, PairingError> {
        let names = self.folder.names().map_err(|source| self.io("", source))?;
        Ok(names.iter().filter_map(|n| n.strip_suffix(suffix)).filter(|p| platform_name(p).is_ok()).map(str::to_string).collect())
    }

    /// One change under the folder's lock, waiting for another writer (the CLI, the gateway,
    /// another replica) to finish. What `change` saved is kept even when it fails: a refused
    /// approval still counts as a failed attempt.
    fn change<R>(&self, change: impl FnOnce(&mut Docs<'_>) -> Result<R, PairingError>) -> Result<R, PairingError> {
        let mut lock = self.folder.lock(LockWait::Forever).map_err(|source| self.io("", source))?;
        let outcome = change(&mut Docs { store: self, lock: lock.as_mut() });
        lock.commit().map_err(|source| self.io("", source))?;
        outcome
    }

    /// A document read without the lock (a document is always whole).
    fn load<T: DeserializeOwned + Default>(&self, name: &str) -> Result<T, PairingError> {
        let bytes = self.folder.read(name).map_err(|source| self.io(name, source))?;
        self.decode(name, bytes)
    }

    /// A missing or empty document is an empty map.
    fn decode<T: DeserializeOwned + Default>(&self, name: &str, bytes: Option<Vec<u8>>) -> Result<T, PairingError> {
        match bytes {
            Some(bytes) if !bytes.iter().all(u8::is_ascii_whitespace) => {
                serde_json::from_slice(&bytes).map_err(|source| PairingError::Corrupt { path: self.folder.locate(name), source })
            }
            _ => Ok(T::default()),
        }
    }

    fn io(&self, name: &str, source: std::io::Error) -> PairingError {
        PairingError::Io { path: self.folder.locate(name), source }
    }
}

/// The documents as one change under the lock sees them.
struct Docs<'a> {
    store: &'a PairingStore,
    lock: &'a mut dyn FolderLock,
}

impl Docs<'_> {
    fn load<T: DeserializeOwned + Default>(&mut self, name: &str) -> Result<T, PairingError> {
        let bytes = self.lock.read(name).map_err(|source| self.store.io(name, source))?;
        self.store.decode(name, bytes)
    }

    fn load_pending(&mut self, name: &str) -> Result<Pending, PairingError> {
        Ok(pending_only(name, self.load(name)?))
    }

    fn save<T: Serialize>(&mut self, name: &str, value: &T) -> Result<(), PairingError> {
        let path = || self.store.folder.locate(name);
        let bytes = serde_json::to_vec_pretty(value).map_err(|source| PairingError::Corrupt { path: path(), source })?;
        self.lock.write(name, &bytes).map_err(|source| PairingError::Io { path: path(), source })
    }
}

/// Pending codes; entries that are not salted hashes (Hermes kept codes in plain text) are
/// dropped, since accepting them would make a code readable on disk approvable.
fn pending_only(name: &str, raw: BTreeMap<String, serde_json::Value>) -> Pending {
    let total = raw.len();
    let pending: Pending = raw.into_iter().filter_map(|(k, v)| Some((k, serde_json::from_value(v).ok()?))).collect();
    if pending.len() < total {
        tracing::warn!(document = name, dropped = total - pending.len(), "pending pairing codes in an old, unhashed format were dropped");
    }
    pending
}

/// Platform names become file names: lower-case letters, digits and `_` only.
pub(crate) fn platform_name(platform: &str) -> Result<String, PairingError> {
    let name = platform.trim().to_ascii_lowercase();
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        return Err(PairingError::BadPlatform(platform.to_string()));
    }
    Ok(name)
}

fn expired(entry: &PendingEntry, now: f64) -> bool {
    now - entry.created_at >= CODE_TTL_SECS
}

fn failures_key(platform: &str) -> String {
    format!("_failures:{platform}")
}

fn lockout_key(platform: &str) -> String {
    format!("_lockout:{platform}")
}

fn lockout_until(limits: &Limits, platform: &str) -> Option<f64> {
    limits.get(&lockout_key(platform)).copied()
}

/// Count a failed approval; returns how many remain before the lockout (0: it just began).
fn record_failure(limits: &mut Limits, platform: &str, now: f64) -> u32 {
    let failures = limits.get(&failures_key(platform)).copied().unwrap_or(0.0) as u32 + 1;
    if failures >= MAX_FAILURES {
        limits.insert(lockout_key(platform), now + LOCKOUT_SECS);
        limits.remove(&failures_key(platform));
        return 0;
    }
    limits.insert(failures_key(platform), f64::from(failures));
    MAX_FAILURES - failures
}

/// Forget request times and lockouts that no longer limit anything (failure counts stay).
fn prune_limits(limits: &mut Limits, now: f64) {
    limits.retain(|key, value| {
        if key.starts_with("_failures:") {
            true
        } else if key.starts_with("_lockout:") {
            now < *value
        } else {
            now - *value < RATE_LIMIT_SECS
        }
    });
}

fn hash_code(salt: &str, code: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(salt.as_bytes());
    hasher.update(code.as_bytes());
    hex::encode(hasher.finalize())
}

fn random_bytes<const N: usize>() -> Result<[u8; N], PairingError> {
    let mut bytes = [0u8; N];
    rand::rngs::OsRng.try_fill_bytes(&mut bytes).map_err(|e| PairingError::Random(e.to_string()))?;
    Ok(bytes)
}

/// Eight symbols of [`ALPHABET`] from the operating system's CSPRNG.
pub(crate) fn random_code() -> Result<String, PairingError> {
    Ok(random_bytes::<CODE_LEN>()?.iter().map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()])).collect())
}

/// A name a stranger chose, made safe to print in the operator's terminal.
fn clean_name(name: &str) -> String {
    name.chars().filter(|c| !c.is_control()).take(MAX_NAME_CHARS).collect::<String>().trim().to_string()
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
