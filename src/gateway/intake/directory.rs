//! Conversations addressed by source, for HTTP surfaces that expose sessions to their clients.
//!
//! The directory is handed to the adapters when they start, so it must not reach them back: it
//! holds the store, the session-key policy and the [`Models`] (for a new session's model), which
//! are all built before the adapters run.

use crate::gateway::conversation::models::Models;
use crate::gateway::intake::session_key::{KeyPolicy, session_key};
use crate::store::Store;
use async_trait::async_trait;
use hermes_adapter::{SessionDirectory, SessionDirectoryError, SessionSource, StoredMessage};
use std::sync::Arc;

pub struct StoreDirectory {
    store: Store,
    key_policy: KeyPolicy,
    models: Arc<Models>,
}

impl StoreDirectory {
    pub fn new(store: Store, key_policy: KeyPolicy, models: Arc<Models>) -> Self {
        Self { store, key_policy, models }
    }
}

fn storage(e: crate::store::StoreError) -> SessionDirectoryError {
    SessionDirectoryError::Storage(e.to_string())
}

#[async_trait]
impl SessionDirectory for StoreDirectory {
    async fn open(&self, source: &SessionSource) -> Result<String, SessionDirectoryError> {
        let key = session_key(source, self.key_policy);
        let model = self.models.default_model();
        let route = self.store.route_get_or_create(&key, source, &model.model).await.map_err(storage)?;
        Ok(route.session_id)
    }

    async fn history(&self, source: &SessionSource, limit: usize) -> Result<Option<Vec<StoredMessage>>, SessionDirectoryError> {
        let key = session_key(source, self.key_policy);
        let Some(route) = self.store.route_get(&key).await.map_err(storage)? else {
            return Ok(None);
        };
        let rows = self.store.messages(&route.session_id, Some(limit)).await.map_err(storage)?;
        Ok(Some(
            rows.into_iter()
                .map(|m| StoredMessage { role: m.role, content: m.content, tool_name: m.tool_name, timestamp: m.timestamp })
                .collect(),
        ))
    }

    async fn close(&self, source: &SessionSource) -> Result<bool, SessionDirectoryError> {
        let key = session_key(source, self.key_policy);
        self.store.session_close(&key, "closed_by_client").await.map_err(storage)
    }
}
