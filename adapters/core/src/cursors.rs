//! Fenced cursors: where an adapter that holds a connection only one process may hold (Telegram
//! long polling, Matrix sync, IMAP) records how far it has read, so that the replica taking the
//! connection over continues from there, and a replica whose tenure is over (paused,
//! partitioned) can move no cursor at all.
//!
//! The gateway hands each run a [`Cursors`] handle on its [`AdapterContext`](crate::AdapterContext).
//! With a store shared by replicas, every [`Cursors::save`] is conditional on the run's lease:
//! [`CursorWrite::Fenced`] means another replica holds the connection now, and the adapter must
//! stop reading at once (return from `run`) without acknowledging anything to the platform.
//! Without a shared store (one process, [`Cursors::local`]) nothing is stored here: `load` finds
//! nothing and `save` always succeeds, and the adapter's own state file stays its cursor.
//!
//! The limits on names and values are checked here, once for every store, so an adapter learns
//! of a bad cursor the same way whichever store the gateway runs on.

use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The longest cursor name, in bytes.
pub const MAX_CURSOR_NAME_BYTES: usize = 128;
/// The longest cursor value, in bytes. A sync token or a small JSON record fits many times over;
/// anything larger is a bug (or an attack through a platform's token), not a position.
pub const MAX_CURSOR_VALUE_BYTES: usize = 16 * 1024;

/// What became of a [`Cursors::save`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorWrite {
    /// Stored (or, without a shared store, nothing to store): go on, acknowledge the platform.
    Saved,
    /// The tenure this run was started under is over: another replica holds the connection.
    /// Nothing was stored. Acknowledge nothing and return from `run` at once.
    Fenced,
}

/// Why a cursor could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CursorError {
    /// The name or value breaks a limit every store keeps; nothing was read or written.
    #[error("cursor `{name}` refused: {why}")]
    Refused {
        /// The name, cut to [`MAX_CURSOR_NAME_BYTES`] for the message.
        name: String,
        /// Which limit.
        why: String,
    },
    /// The store failed (its own error, as text); the cursor did not move.
    #[error("the cursor store failed: {0}")]
    Storage(String),
}

/// Where cursors are kept, as the gateway implements it. Names and values reaching it have
/// passed [`Cursors`]' checks.
#[async_trait]
pub trait CursorStore: Send + Sync + 'static {
    /// The value last stored under `name`.
    async fn load(&self, name: &str) -> Result<Option<String>, CursorError>;
    /// Store `value` under `name` if this run's tenure is still current.
    async fn save(&self, name: &str, value: &str) -> Result<CursorWrite, CursorError>;
}

/// The handle an adapter's run reads and moves its cursors through (see the module docs).
#[derive(Clone)]
pub struct Cursors {
    /// `None`: no shared store; the adapter's own files are its cursors.
    store: Option<Arc<dyn CursorStore>>,
}

impl Default for Cursors {
    fn default() -> Self {
        Self::local()
    }
}

impl std::fmt::Debug for Cursors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursors").field("shared", &self.is_shared()).finish()
    }
}

impl Cursors {
    /// No shared store (one process): `load` finds nothing, `save` always succeeds.
    pub fn local() -> Self {
        Self { store: None }
    }

    /// Cursors kept in `store`, each write fenced by whatever the store checks.
    pub fn shared(store: Arc<dyn CursorStore>) -> Self {
        Self { store: Some(store) }
    }

    /// Whether cursors are kept beyond this process (then a stored cursor wins over the
    /// adapter's own file on start).
    pub fn is_shared(&self) -> bool {
        self.store.is_some()
    }

    /// The cursor stored under `name`; `None` when there is none, or no shared store.
    pub async fn load(&self, name: &str) -> Result<Option<String>, CursorError> {
        check_name(name)?;
        match &self.store {
            Some(store) => store.load(name).await,
            None => Ok(None),
        }
    }

    /// Record `value` as cursor `name` before acknowledging the platform up to it. On
    /// [`CursorWrite::Fenced`] acknowledge nothing and return from `run`.
    pub async fn save(&self, name: &str, value: &str) -> Result<CursorWrite, CursorError> {
        check_name(name)?;
        check_value(name, value)?;
        match &self.store {
            Some(store) => store.save(name, value).await,
            None => Ok(CursorWrite::Saved),
        }
    }
}

impl crate::AdapterError {
    /// How `run` ends after [`CursorWrite::Fenced`]: retryable, so the supervisor stands by for
    /// the connection's lease again instead of parking the adapter.
    pub fn fenced() -> Self {
        crate::AdapterError::retryable("fenced", "another replica holds this connection now; stopped reading, acknowledged nothing")
    }
}

fn refused(name: &str, why: String) -> CursorError {
    let mut shown = name.to_string();
    if shown.len() > MAX_CURSOR_NAME_BYTES {
        let mut cut = MAX_CURSOR_NAME_BYTES;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push('…');
    }
    CursorError::Refused { name: shown, why }
}

/// Names are made by adapter code; control characters in one are a bug, and a NUL cannot be
/// stored by PostgreSQL at all.
fn check_name(name: &str) -> Result<(), CursorError> {
    if name.is_empty() {
        return Err(refused(name, "a cursor needs a name".into()));
    }
    if name.len() > MAX_CURSOR_NAME_BYTES {
        return Err(refused(name, format!("the name is {} bytes, more than {MAX_CURSOR_NAME_BYTES}", name.len())));
    }
    if name.chars().any(char::is_control) {
        return Err(refused(name, "the name contains a control character".into()));
    }
    Ok(())
}

/// Values may be anything printable or not, JSON included, except a NUL (PostgreSQL's text
/// refuses it, so refusing it everywhere keeps SQLite and PostgreSQL alike).
fn check_value(name: &str, value: &str) -> Result<(), CursorError> {
    if value.len() > MAX_CURSOR_VALUE_BYTES {
        return Err(refused(name, format!("the value is {} bytes, more than {MAX_CURSOR_VALUE_BYTES}", value.len())));
    }
    if value.contains('\0') {
        return Err(refused(name, "the value contains a NUL character".into()));
    }
    Ok(())
}

/// Cursors in memory, for adapter tests: a store that can be told its tenure is over.
#[derive(Debug, Default)]
pub struct MemoryCursors {
    values: Mutex<BTreeMap<String, String>>,
    fenced: AtomicBool,
}

impl MemoryCursors {
    /// An empty store whose tenure is current.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// End the tenure: every later `save` is [`CursorWrite::Fenced`] and stores nothing.
    pub fn fence(&self) {
        self.fenced.store(true, Ordering::SeqCst);
    }

    /// Put `value` under `name` directly (what another replica stored).
    pub fn put(&self, name: &str, value: &str) {
        self.values.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(name.to_string(), value.to_string());
    }

    /// The value stored under `name`.
    pub fn get(&self, name: &str) -> Option<String> {
        self.values.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get(name).cloned()
    }
}

#[async_trait]
impl CursorStore for MemoryCursors {
    async fn load(&self, name: &str) -> Result<Option<String>, CursorError> {
        Ok(self.get(name))
    }

    async fn save(&self, name: &str, value: &str) -> Result<CursorWrite, CursorError> {
        if self.fenced.load(Ordering::SeqCst) {
            return Ok(CursorWrite::Fenced);
        }
        self.put(name, value);
        Ok(CursorWrite::Saved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_a_shared_store_nothing_is_found_and_every_save_succeeds() {
        let cursors = Cursors::local();
        assert!(!cursors.is_shared());
        assert_eq!(cursors.save("offset", "42").await.unwrap(), CursorWrite::Saved);
        assert_eq!(cursors.load("offset").await.unwrap(), None, "the adapter's own file is its cursor");
    }

    #[tokio::test]
    async fn a_fenced_store_refuses_the_write_and_keeps_the_old_value() {
        let store = MemoryCursors::new();
        let cursors = Cursors::shared(store.clone());
        assert_eq!(cursors.save("offset", "10").await.unwrap(), CursorWrite::Saved);
        store.fence();
        assert_eq!(cursors.save("offset", "11").await.unwrap(), CursorWrite::Fenced);
        assert_eq!(cursors.load("offset").await.unwrap().as_deref(), Some("10"));
    }

    #[tokio::test]
    async fn hostile_values_are_data_but_huge_or_nul_ones_are_refused_by_name() {
        let store = MemoryCursors::new();
        let cursors = Cursors::shared(store.clone());
        let quoted = "'; DROP TABLE cursors; -- \"\\ $1 ?1 \u{202e}ﬁ😀\r\n";
        assert_eq!(cursors.save("it's \"odd\"", quoted).await.unwrap(), CursorWrite::Saved);
        assert_eq!(cursors.load("it's \"odd\"").await.unwrap().as_deref(), Some(quoted));
        let largest = "x".repeat(MAX_CURSOR_VALUE_BYTES);
        assert_eq!(cursors.save("big", &largest).await.unwrap(), CursorWrite::Saved);

        let huge = "x".repeat(MAX_CURSOR_VALUE_BYTES + 1);
        let error = cursors.save("next_batch", &huge).await.unwrap_err().to_string();
        assert_eq!(error, format!("cursor `next_batch` refused: the value is {} bytes, more than 16384", MAX_CURSOR_VALUE_BYTES + 1));
        assert!(cursors.save("uid", "1\u{0}2").await.unwrap_err().to_string().contains("NUL"));
        assert_eq!(store.get("next_batch"), None, "a refused value is not stored");

        let long_name = "n".repeat(10_000);
        let error = cursors.save(&long_name, "1").await.unwrap_err().to_string();
        assert!(error.len() < 400, "the message does not repeat a huge name: {error}");
        assert!(error.contains("the name is 10000 bytes"), "{error}");
        assert!(cursors.load("").await.is_err());
        assert!(cursors.load("a\nb").await.is_err(), "no control characters in names");
        // Refused the same way without a shared store: a bug shows up on one machine too.
        assert!(Cursors::local().save("next_batch", &huge).await.is_err());
    }
}
