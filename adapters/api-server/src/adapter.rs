//! [`ApiServerAdapter`]: the `PlatformAdapter` of the API server. `run` serves HTTP; `send` and
//! `stream` deliver the gateway's answers to the requests waiting for them.

use crate::conversation::PLATFORM;
use crate::guard::Guards;
use crate::pending::PendingReplies;
use crate::server::{self, AppState, unix_now};
use crate::settings::{ApiServerError, ApiServerSettings};
use async_trait::async_trait;
use hermes_adapter::{
    AdapterContext, AdapterError, Capabilities, ChatTarget, OutboundMessage, Platform, PlatformAdapter, SendError, SendReceipt,
    StreamEvent, StreamStyle,
};
use hermes_http_guard::{AuthThrottle, ThrottleLimits};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::net::TcpListener;

/// The OpenAI-compatible HTTP API and sessions REST API, as a gateway platform.
pub struct ApiServerAdapter {
    settings: Arc<ApiServerSettings>,
    guards: Arc<Guards>,
    platform: Platform,
    capabilities: Capabilities,
    pending: PendingReplies,
    local_addr: Mutex<Option<SocketAddr>>,
}

impl std::fmt::Debug for ApiServerAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServerAdapter").field("settings", &self.settings).field("local_addr", &self.local_addr()).finish_non_exhaustive()
    }
}

impl ApiServerAdapter {
    /// Validates security settings: without a key it refuses unless the host is loopback AND
    /// `allow_no_auth`; a non-loopback host without a key is always refused; a guessable key and
    /// an origin that is not `scheme://host[:port]` are refused. Errors name the settings to
    /// change (`API_SERVER_KEY` / `platforms.api_server.key`, `platforms.api_server.allow_no_auth`,
    /// `API_SERVER_HOST`, `platforms.api_server.cors_origins`).
    pub fn new(settings: ApiServerSettings) -> Result<Self, ApiServerError> {
        let origins = settings.validate()?;
        if settings.effective_key().is_none() {
            tracing::warn!(host = %settings.host, "api_server: serving without authentication (allow_no_auth)");
        }
        let guards = Guards { origins, hosts: settings.host_policy(), throttle: AuthThrottle::new(ThrottleLimits::default()) };
        Ok(Self {
            settings: Arc::new(settings),
            guards: Arc::new(guards),
            platform: Platform::new(PLATFORM),
            capabilities: Capabilities { streaming: StreamStyle::Events, ..Capabilities::http() },
            pending: PendingReplies::default(),
            local_addr: Mutex::new(None),
        })
    }

    /// The address actually bound once `run` is listening (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        // A poisoned lock still holds a valid `Option<SocketAddr>`.
        *self.local_addr.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_local_addr(&self, addr: Option<SocketAddr>) {
        *self.local_addr.lock().unwrap_or_else(PoisonError::into_inner) = addr;
    }
}

#[async_trait]
impl PlatformAdapter for ApiServerAdapter {
    fn platform(&self) -> &Platform {
        &self.platform
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn run(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
        let shown = format!("{}:{}", self.settings.host, self.settings.port);
        let listener = TcpListener::bind((self.settings.bind_host(), self.settings.port))
            .await
            .map_err(|e| AdapterError::retryable("bind", format!("cannot listen on {shown}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| AdapterError::retryable("bind", format!("cannot read the address bound for {shown}: {e}")))?;
        self.set_local_addr(Some(addr));
        ctx.health.mark_connected();
        tracing::info!(%addr, "api_server: listening");
        let health = ctx.health.clone();
        let state = AppState {
            ctx,
            pending: self.pending.clone(),
            settings: self.settings.clone(),
            guards: self.guards.clone(),
            started: unix_now(),
        };
        let served = server::serve(listener, state).await;
        health.mark_disconnected();
        self.set_local_addr(None);
        served.map_err(|e| AdapterError::retryable("serve", format!("the API server on {addr} failed: {e}")))
    }

    async fn send(&self, msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        self.pending.send(msg)?;
        Ok(SendReceipt::default())
    }

    /// Every replica behind a load balancer takes requests, and answers those it took, for as
    /// long as a request waits.
    fn answers_on_the_request(&self) -> Option<std::time::Duration> {
        Some(self.settings.request_timeout)
    }

    /// A part goes out where its request waits: another replica's request is its own to answer.
    fn delivers_here(&self, message: &OutboundMessage) -> bool {
        message.reply_to.as_deref().is_some_and(|request_id| self.pending.is_waiting(request_id))
    }

    async fn stream(&self, _target: &ChatTarget, reply_to: Option<&str>, event: &StreamEvent) -> Result<(), SendError> {
        let request_id = reply_to.ok_or_else(|| SendError::Gone("the API server only streams to requests; reply_to is empty".into()))?;
        self.pending.stream(request_id, event)
    }
}
