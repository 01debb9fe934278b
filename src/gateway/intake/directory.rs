//! Conversations addressed by source, for HTTP surfaces that expose sessions to their clients.
//!
//! The directory is handed to the adapters when they start, so it must not reach them back: it
//! holds the routes and the session log, the session-key policy and the [`Models`] (for a new session's model), which
//! are all built before the adapters run.

use crate::gateway::conversation::models::Models;
use crate::gateway::intake::session_key::{KeyPolicy, session_key};
use crate::store::{Routes, SessionLog, StoreError};
use async_trait::async_trait;
use hermes_adapter::{SessionDirectory, SessionDirectoryError, SessionSource, StoredMessage};
use std::sync::Arc;

pub(crate) struct StoreDirectory {
    /// Which session a conversation's key points at (opened, looked up, closed).
    routes: Arc<dyn Routes>,
    /// The messages of that session, for its history.
    log: Arc<dyn SessionLog>,
    key_policy: KeyPolicy,
    models: Arc<Models>,
}

impl StoreDirectory {
    pub(crate) fn new(routes: Arc<dyn Routes>, log: Arc<dyn SessionLog>, key_policy: KeyPolicy, models: Arc<Models>) -> Self {
        Self { routes, log, key_policy, models }
    }
}

fn storage(e: StoreError) -> SessionDirectoryError {
    SessionDirectoryError::Storage(e.to_string())
}

#[async_trait]
impl SessionDirectory for StoreDirectory {
    async fn open(&self, source: &SessionSource) -> Result<String, SessionDirectoryError> {
        let key = session_key(source, self.key_policy);
        let model = self.models.default_model();
        let route = self.routes.route_get_or_create(&key, source, &model.model).await.map_err(storage)?;
        Ok(route.session_id)
    }

    async fn history(&self, source: &SessionSource, limit: usize) -> Result<Option<Vec<StoredMessage>>, SessionDirectoryError> {
        let key = session_key(source, self.key_policy);
        let Some(route) = self.routes.route_get(&key).await.map_err(storage)? else {
            return Ok(None);
        };
        let rows = self.log.messages(&route.session_id, Some(limit)).await.map_err(storage)?;
        Ok(Some(
            rows.into_iter()
                .map(|m| StoredMessage { role: m.role, content: m.content, tool_name: m.tool_name, timestamp: m.timestamp })
                .collect(),
        ))
    }

    async fn close(&self, source: &SessionSource) -> Result<bool, SessionDirectoryError> {
        let key = session_key(source, self.key_policy);
        self.routes.session_close(&key, "closed_by_client").await.map_err(storage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::store::{NewMessage, SessionLog, SqliteStore};
    use hermes_adapter::{ChatType, Platform};

    async fn directory() -> (tempfile::TempDir, Arc<SqliteStore>, StoreDirectory) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let models = Arc::new(Models::new(Arc::new(Config::default()), dir.path().join("config.yaml")));
        let directory = StoreDirectory::new(store.clone(), store.clone(), KeyPolicy::default(), models);
        (dir, store, directory)
    }

    fn said(messages: Option<Vec<StoredMessage>>) -> Vec<(String, String)> {
        messages.expect("the conversation is open").into_iter().map(|m| (m.role, m.content)).collect()
    }

    #[tokio::test]
    async fn a_client_opens_reads_and_closes_its_conversation() {
        let (_dir, store, directory) = directory().await;
        let source = SessionSource::new(Platform::new("api"), "c1", ChatType::Dm);
        assert_eq!(directory.history(&source, 10).await.unwrap(), None, "no conversation before it is opened");
        let session_id = directory.open(&source).await.unwrap();
        assert_eq!(directory.open(&source).await.unwrap(), session_id, "opening again finds the same session");
        for (role, content) in [("user", "hi"), ("assistant", "hello"), ("user", "bye")] {
            let message = NewMessage { session_id: session_id.clone(), role: role.into(), content: content.into(), ..Default::default() };
            store.message_append(message).await.unwrap();
        }
        let last_two = [("assistant".to_string(), "hello".to_string()), ("user".to_string(), "bye".to_string())];
        assert_eq!(said(directory.history(&source, 2).await.unwrap()), last_two, "the latest messages, oldest first");
        assert!(directory.close(&source).await.unwrap());
        assert!(!directory.close(&source).await.unwrap(), "nothing left to close");
        assert_eq!(directory.history(&source, 10).await.unwrap(), None, "a closed conversation is no longer addressed");
        assert_ne!(directory.open(&source).await.unwrap(), session_id, "opening after a close starts a new session");
    }
}
