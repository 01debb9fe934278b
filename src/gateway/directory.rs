//! Conversations addressed by source, for HTTP surfaces that expose sessions to their clients.

use super::services::Services;
use super::session_key::session_key;
use async_trait::async_trait;
use hermes_adapter::{SessionDirectory, SessionDirectoryError, SessionSource, StoredMessage};
use std::sync::{Arc, Weak};

/// Holds the services weakly: the services own the adapters, which own this directory.
pub struct StoreDirectory {
    services: std::sync::OnceLock<Weak<Services>>,
}

impl StoreDirectory {
    pub fn new() -> Self {
        Self { services: std::sync::OnceLock::new() }
    }

    pub fn bind(&self, services: &Arc<Services>) {
        // Bound once at start-up; a second bind would be a wiring bug and is ignored.
        let _ = self.services.set(Arc::downgrade(services));
    }

    fn services(&self) -> Result<Arc<Services>, SessionDirectoryError> {
        self.services.get().and_then(Weak::upgrade).ok_or_else(|| SessionDirectoryError::Storage("the gateway is not running".into()))
    }
}

impl Default for StoreDirectory {
    fn default() -> Self {
        Self::new()
    }
}

fn storage(e: crate::store::StoreError) -> SessionDirectoryError {
    SessionDirectoryError::Storage(e.to_string())
}

#[async_trait]
impl SessionDirectory for StoreDirectory {
    async fn open(&self, source: &SessionSource) -> Result<String, SessionDirectoryError> {
        let services = self.services()?;
        let key = session_key(source, services.key_policy);
        let model = services.default_model();
        let route = services.store.route_get_or_create(&key, source, &model.model).await.map_err(storage)?;
        Ok(route.session_id)
    }

    async fn history(&self, source: &SessionSource, limit: usize) -> Result<Option<Vec<StoredMessage>>, SessionDirectoryError> {
        let services = self.services()?;
        let key = session_key(source, services.key_policy);
        let Some(route) = services.store.route_get(&key).await.map_err(storage)? else {
            return Ok(None);
        };
        let rows = services.store.messages(&route.session_id, Some(limit)).await.map_err(storage)?;
        Ok(Some(
            rows.into_iter()
                .map(|m| StoredMessage { role: m.role, content: m.content, tool_name: m.tool_name, timestamp: m.timestamp })
                .collect(),
        ))
    }

    async fn close(&self, source: &SessionSource) -> Result<bool, SessionDirectoryError> {
        let services = self.services()?;
        let key = session_key(source, services.key_policy);
        services.store.session_close(&key, "closed_by_client").await.map_err(storage)
    }
}
