//! [`Deliverer`]: everything a message needs to leave the gateway — the running adapters by
//! platform, the courier that queues each part in the outbox and delivers it, and the folders
//! files may be attached from — and [`Deliverer::send`], the one way a [`Reply`] leaves: planned
//! into parts ([`plan`]), queued under its [`ReplyKey`], delivered by the courier. Nothing else
//! reaches the adapters' send side.

use crate::gateway::delivery::courier::{Courier, RetryPolicy};
use crate::gateway::delivery::outbound::{self, Delivery, FileRoots, Terms};
use crate::gateway::delivery::plan::plan;
use crate::gateway::delivery::reply::{Reply, ReplyKey};
use crate::gateway::ops::health::HealthBoard;
use crate::store::Outbox;
use hermes_adapter::PlatformAdapter;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct Deliverer {
    adapters: HashMap<String, Arc<dyn PlatformAdapter>>,
    /// The idempotency record of every send (what a streamed message's platform id is read from).
    pub(super) outbox: Arc<dyn Outbox>,
    /// Delivers every queued part, through outages and restarts.
    pub(super) courier: Arc<Courier>,
    /// Where `MEDIA:` files may come from besides the temp folder.
    pub(super) files: FileRoots,
}

impl Deliverer {
    /// `health`: whose adapters are connected (a lane waits while its adapter is not); `None`
    /// assumes every adapter is up.
    pub(crate) fn new(
        adapters: &[Arc<dyn PlatformAdapter>],
        outbox: Arc<dyn Outbox>,
        files: FileRoots,
        health: Option<Arc<HealthBoard>>,
        policy: RetryPolicy,
    ) -> Self {
        let adapters: HashMap<String, Arc<dyn PlatformAdapter>> = adapters.iter().map(|a| (a.platform().to_string(), a.clone())).collect();
        let courier = Arc::new(Courier::new(adapters.clone(), outbox.clone(), health, policy));
        Self { adapters, outbox, courier, files }
    }

    /// Send `reply` under `key` and wait (at most a few seconds) for the platform's first
    /// answer. `key` must be stable for the same logical message, so that a replay after a crash
    /// finds its parts already sent.
    pub(crate) async fn send(&self, reply: Reply, key: ReplyKey) -> Delivery {
        self.dispatch(reply, &key, Terms::WAIT).await
    }

    /// [`Deliverer::send`] without waiting for the platform: the parts are queued (durably) and
    /// the courier delivers them. For replies sent by someone with other work to do (a session's
    /// actor, a turn), which must not wait out a platform's outage.
    pub(crate) async fn queue(&self, reply: Reply, key: ReplyKey) -> Delivery {
        self.dispatch(reply, &key, Terms::QUEUE_ONLY).await
    }

    /// [`Deliverer::send`] for a prompt that is worthless after `expires_in`: never shown later
    /// than that.
    pub(crate) async fn send_prompt(&self, reply: Reply, key: ReplyKey, expires_in: Duration) -> Delivery {
        self.dispatch(reply, &key, Terms { expiry: Some(expires_in), ..Terms::WAIT }).await
    }

    async fn dispatch(&self, reply: Reply, key: &ReplyKey, terms: Terms) -> Delivery {
        let platform = reply.target.platform.clone();
        let Some(adapter) = self.adapter(platform.as_str()) else {
            tracing::error!(platform = %platform, "cannot deliver: platform `{platform}` is not enabled");
            return Delivery::Failed;
        };
        let caps = adapter.capabilities();
        let reply = outbound::with_attachments(&self.files, reply, caps.supports_files);
        let messages = plan(&reply, caps, key);
        let mut window = terms.expiry.unwrap_or(self.courier.policy().window);
        let request_waits = adapter.answers_on_the_request();
        if let Some(waits) = request_waits {
            // Nobody receives an answer after its request stopped waiting.
            window = window.min(waits);
        }
        let rows = outbound::queue_rows(&reply.target, messages, window, terms.expiry.is_none(), request_waits.is_some());
        outbound::summarize(&self.courier.dispatch(rows, terms.patience).await)
    }

    /// The courier, to start its sweeper (which resumes what a restart left queued).
    pub(crate) fn courier(&self) -> &Arc<Courier> {
        &self.courier
    }

    /// The running adapter of `platform`, if it is enabled.
    pub(crate) fn adapter(&self, platform: &str) -> Option<&Arc<dyn PlatformAdapter>> {
        self.adapters.get(platform)
    }

    /// Whether `platform` is enabled and can receive messages outside a request (a chat, not a
    /// request/response client).
    pub(crate) fn reaches_later(&self, platform: &str) -> bool {
        self.adapter(platform).is_some_and(|a| a.capabilities().supports_async_delivery)
    }

    /// The platforms that can receive messages outside a request, for the prompt's hints.
    pub(crate) fn chat_platforms(&self) -> Vec<String> {
        self.adapters.iter().filter(|(_, a)| a.capabilities().supports_async_delivery).map(|(n, _)| n.clone()).collect()
    }
}
