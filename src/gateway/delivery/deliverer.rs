//! [`Deliverer`]: everything a message needs to leave the gateway — the running adapters by
//! platform, the courier that queues each part in the outbox and delivers it, and the folders
//! files may be attached from. [`crate::gateway::delivery::outbound`] does the delivering with it; nothing else
//! reaches the adapters' send side.

use crate::config::Home;
use crate::gateway::delivery::courier::{Courier, RetryPolicy};
use crate::gateway::ops::health::HealthBoard;
use crate::store::Store;
use hermes_adapter::PlatformAdapter;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

pub struct Deliverer {
    adapters: HashMap<String, Arc<dyn PlatformAdapter>>,
    /// The outbox (and only the outbox) is used: the idempotency record of every send.
    pub(super) store: Store,
    /// Delivers every queued part, through outages and restarts.
    pub(super) courier: Arc<Courier>,
    /// Where `MEDIA:` files may come from besides the temp folder.
    pub(super) files: FileRoots,
}

/// The folders an answer may attach files from (see `outbound::attachable`).
pub struct FileRoots {
    /// `HERMES_HOME`: nothing under it is sent, apart from its cache.
    pub home: Home,
    /// The agent's working folder.
    pub workdir: PathBuf,
}

impl Deliverer {
    /// `health`: whose adapters are connected (a lane waits while its adapter is not); `None`
    /// assumes every adapter is up.
    pub fn new(
        adapters: &[Arc<dyn PlatformAdapter>],
        store: Store,
        files: FileRoots,
        health: Option<Arc<HealthBoard>>,
        policy: RetryPolicy,
    ) -> Self {
        let adapters: HashMap<String, Arc<dyn PlatformAdapter>> = adapters.iter().map(|a| (a.platform().to_string(), a.clone())).collect();
        let courier = Arc::new(Courier::new(adapters.clone(), store.clone(), health, policy));
        Self { adapters, store, courier, files }
    }

    /// The courier, to start its sweeper (which resumes what a restart left queued).
    pub fn courier(&self) -> &Arc<Courier> {
        &self.courier
    }

    /// The running adapter of `platform`, if it is enabled.
    pub fn adapter(&self, platform: &str) -> Option<&Arc<dyn PlatformAdapter>> {
        self.adapters.get(platform)
    }

    /// Whether `platform` is enabled and can receive messages outside a request (a chat, not a
    /// request/response client).
    pub fn reaches_later(&self, platform: &str) -> bool {
        self.adapter(platform).is_some_and(|a| a.capabilities().supports_async_delivery)
    }

    /// The platforms that can receive messages outside a request, for the prompt's hints.
    pub fn chat_platforms(&self) -> Vec<String> {
        self.adapters.iter().filter(|(_, a)| a.capabilities().supports_async_delivery).map(|(n, _)| n.clone()).collect()
    }
}
