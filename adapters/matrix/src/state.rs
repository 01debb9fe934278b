//! The adapter's files in its private state folder (`HERMES_HOME/platforms/matrix`), each
//! written whole (temp file + rename) and readable by the owner only:
//!
//! * `session.json`: the login (user, device, access token) so a restart is the same device with
//!   the same encryption keys (a new device per restart would lock the bot out of its own rooms'
//!   history and make it unverifiable);
//! * `store-passphrase`: a random passphrase for matrix-sdk's SQLite stores (never the user's
//!   password, which may change or be absent);
//! * `store/`: matrix-sdk's state and crypto stores;
//! * `sync-token`: the `next_batch` to resume from, written only after every event of that sync
//!   went into the gateway's inbox;
//! * `prompts.json`: approval prompts the bot sent (event id → reaction keys and their commands),
//!   so a restart does not make pending prompts deaf;
//! * `undecryptable.json`: the (room, megolm session) pairs already reported as unreadable;
//! * `undecryptable-waiting.json`: unreadable messages kept until their key arrives.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The folder, created 0700 when missing (and made 0700 when it exists with wider rights).
pub(crate) fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

/// Write `bytes` to `path` atomically, 0600.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = fs::remove_file(&tmp);
    {
        let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)
}

pub(crate) fn read_json<T: DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    write_private(path, &bytes)
}

/// The saved login.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct SavedSession {
    pub homeserver: String,
    pub user_id: String,
    pub device_id: String,
    pub access_token: String,
}

/// The paths of the state folder.
#[derive(Clone, Debug)]
pub(crate) struct StateDir {
    root: PathBuf,
}

impl StateDir {
    pub(crate) fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }
    pub(crate) fn prepare(&self) -> io::Result<()> {
        ensure_private_dir(&self.root)?;
        ensure_private_dir(&self.store())
    }
    pub(crate) fn store(&self) -> PathBuf {
        self.root.join("store")
    }
    pub(crate) fn session_file(&self) -> PathBuf {
        self.root.join("session.json")
    }
    pub(crate) fn prompts_file(&self) -> PathBuf {
        self.root.join("prompts.json")
    }
    pub(crate) fn undecryptable_file(&self) -> PathBuf {
        self.root.join("undecryptable.json")
    }
    pub(crate) fn waiting_file(&self) -> PathBuf {
        self.root.join("undecryptable-waiting.json")
    }

    pub(crate) fn session(&self) -> io::Result<Option<SavedSession>> {
        read_json(&self.session_file())
    }
    pub(crate) fn save_session(&self, session: &SavedSession) -> io::Result<()> {
        write_json(&self.session_file(), session)
    }
    pub(crate) fn forget_session(&self) -> io::Result<()> {
        match fs::remove_file(self.session_file()) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// The store passphrase, made (32 random bytes, hex) on first use.
    pub(crate) fn store_passphrase(&self) -> io::Result<String> {
        let path = self.root.join("store-passphrase");
        match fs::read_to_string(&path) {
            Ok(text) if !text.trim().is_empty() => return Ok(text.trim().to_string()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let passphrase = hex::encode(rand::random::<[u8; 32]>());
        write_private(&path, passphrase.as_bytes())?;
        Ok(passphrase)
    }

    pub(crate) fn sync_token(&self) -> io::Result<Option<String>> {
        match fs::read_to_string(self.root.join("sync-token")) {
            Ok(token) if !token.trim().is_empty() => Ok(Some(token.trim().to_string())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
    pub(crate) fn save_sync_token(&self, token: &str) -> io::Result<()> {
        write_private(&self.root.join("sync-token"), token.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn secrets_are_private_and_the_passphrase_is_stable() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().join("matrix"));
        state.prepare().unwrap();
        let first = state.store_passphrase().unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(state.store_passphrase().unwrap(), first);
        state
            .save_session(&SavedSession { homeserver: "h".into(), user_id: "@b:x".into(), device_id: "D".into(), access_token: "t".into() })
            .unwrap();
        for file in ["store-passphrase", "session.json"] {
            assert_eq!(fs::metadata(dir.path().join("matrix").join(file)).unwrap().mode() & 0o777, 0o600, "{file}");
        }
        assert_eq!(fs::metadata(dir.path().join("matrix")).unwrap().mode() & 0o777, 0o700);
        assert_eq!(state.sync_token().unwrap(), None);
        state.save_sync_token("s72_1").unwrap();
        assert_eq!(state.sync_token().unwrap().as_deref(), Some("s72_1"));
    }
}
