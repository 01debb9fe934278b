//! `hermes-webhook`: signed HTTP webhooks as a hermes platform (`webhook`).
//!
//! Each configured route is `POST /webhooks/<route>`. A delivery that passes its checks becomes
//! one [`InboundEvent`](hermes_adapter::InboundEvent): the route's prompt template filled from the JSON body
//! ([`render_prompt`]), run by the agent in a one-shot session whose chat id is
//! `webhook:<route>:<key>`, where the key is derived from the signed body ([`content_key`]). The answer goes to the route's `deliver`: the log, a URL
//! (POSTed by [`PlatformAdapter::send`]) or a chat on another platform (set as the event's
//! `reply_target`; the gateway sends it there). `GET /health` answers
//! `{"status":"ok","platform":"webhook"}`.
//!
//! # Checks, in order
//!
//! 1. Senders are servers, never web pages: a request with an `Origin` header is refused (403);
//!    while a route takes unsigned deliveries (`INSECURE_NO_AUTH`, loopback only), the `Host`
//!    must name this machine (421), against DNS rebinding.
//! 2. Unknown route: 404. A peer locked out for failing signatures (10 failures in a minute lock
//!    it out for a minute, correct signature or not): 429 with Retry-After. A body that is not
//!    declared `Content-Type: application/json`: 415. Body over 1 MiB: 413 (by Content-Length
//!    before reading, and while reading).
//! 3. Signature (below), unless the secret is `INSECURE_NO_AUTH`: 401 `{"error": …}`, counted
//!    against the peer, and nothing reaches the gateway.
//! 4. Rate limit per route, `rate_limit_per_minute` authenticated deliveries per fixed minute:
//!    429 with Retry-After.
//! 5. The body must be JSON: 400.
//! 6. Event filter: with a non-empty `events`, the event type (`X-GitHub-Event`,
//!    `X-Gitlab-Event`, `X-Event-Type`, else the body's `event` or `type`) must be listed, or the
//!    answer is 200 `{"status":"ignored","reason":…}`.
//! 7. The gateway's durable inbox takes the event: 202 `{"status":"accepted","delivery_id":…}`,
//!    or 200 `{"status":"duplicate",…}` for a redelivery, 503 while shutting down, 500 if it
//!    cannot be stored. A redelivery is the same signed body on the same route ([`content_key`]):
//!    a captured delivery replayed with a fresh `X-GitHub-Delivery` / `X-Request-ID` is still a
//!    duplicate, since those headers are not signed (they are only logged and echoed as
//!    `delivery_id`); so is a sender's retry signed with a new V2 timestamp. Unsigned routes have
//!    nothing signed and deduplicate on the sender's id.
//!
//! Route secrets, like the API key, must not be guessable: at least 16 characters and no
//! placeholder (`hermes_http_guard::check_secret`).
//!
//! # Signatures
//!
//! All HMACs are HMAC-SHA256 keyed with the route's secret, over the raw body bytes as sent,
//! written as hex (either case) and compared in constant time. The first header present decides:
//!
//! - **GitHub**: `X-Hub-Signature-256: sha256=<hex HMAC(body)>`.
//! - **Generic (V2)**: `X-Webhook-Timestamp: <unix seconds>` and
//!   `X-Webhook-Signature-V2: <hex>` (an optional `sha256=` prefix is accepted), where the HMAC
//!   is over the timestamp header's text, a `.`, then the body:
//!   `HMAC(secret, "<X-Webhook-Timestamp>.<raw body>")`. The timestamp must be within 300 s of
//!   the server's clock either way, which bounds replays. For example, in a shell:
//!
//!   ```text
//!   ts=$(date +%s)
//!   sig=$(printf '%s.%s' "$ts" "$body" | openssl dgst -sha256 -hmac "$secret" -r | cut -d' ' -f1)
//!   curl -H "X-Webhook-Timestamp: $ts" -H "X-Webhook-Signature-V2: $sig" \
//!        -H 'Content-Type: application/json' -d "$body" http://host:8644/webhooks/<route>
//!   ```
//! - **GitLab**: `X-Gitlab-Token: <secret>`.
//! - **Legacy (V1)**: `X-Webhook-Signature: <hex HMAC(body)>`; accepted, but it can be replayed,
//!   so each use logs a deprecation warning.
//!
//! # URL delivery
//!
//! The answer is POSTed as `{"route","delivery_id","text","idempotency_key"}` with an
//! `Idempotency-Key` header that is stable across retries, so the receiver can drop repeats.
//! Redirects are not followed, so neither the answer nor credentials in the URL ever reach
//! another host.
//!
//! Modules: [`config`] (the `platforms.webhook` block and the [`REGISTRATION`]), [`settings`]
//! (the listener's resolved settings and their validation), [`signature`], [`payload`] (the body
//! and event type), `dedupe` ([`content_key`]), `template` ([`render_prompt`]), `rate_limit`,
//! `server` (HTTP handlers), `outbound` (answers), `deliver` (the `deliver` setting), `ids`
//! (fresh ids for unsigned deliveries). `signature`, `payload`, `content_key` and
//! `render_prompt` are pure and public for the fuzz target.

pub mod config;
mod dedupe;
mod deliver;
mod ids;
mod outbound;
pub mod payload;
mod rate_limit;
mod server;
pub mod settings;
pub mod signature;
mod template;

pub use config::{DEFAULT_ROUTE_PROMPT, REGISTRATION, WebhookConfig, WebhookExtra, WebhookRoute};
pub use dedupe::content_key;
pub use server::MAX_BODY_BYTES;
pub use settings::{INSECURE_NO_AUTH, RouteSettings, WebhookError, WebhookSettings};
pub use signature::REPLAY_WINDOW_SECS;
pub use template::{RAW_LIMIT_CHARS, render_prompt};

use async_trait::async_trait;
use hermes_adapter::{AdapterContext, AdapterError, Capabilities, OutboundMessage, Platform, PlatformAdapter, SendError, SendReceipt};
use hermes_http_guard::{AuthThrottle, HostPolicy, ThrottleLimits};
use rate_limit::FixedWindow;
use server::Shared;
use settings::RouteSecret;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;

/// The platform name of this adapter.
pub const PLATFORM: &str = "webhook";

/// The webhook platform adapter.
pub struct WebhookAdapter {
    platform: Platform,
    capabilities: Capabilities,
    host: String,
    port: u16,
    shared: Arc<Shared>,
    client: reqwest::Client,
    local_addr: Mutex<Option<SocketAddr>>,
}

impl std::fmt::Debug for WebhookAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookAdapter")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("routes", &self.shared.routes.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl WebhookAdapter {
    /// Validates the settings: every route has a secret (its own or the global one) that is not
    /// guessable; route names are `[A-Za-z0-9_-]+`; `deliver` is `log`, an http(s) URL or
    /// `platform:chat_id[:thread_id]`; `INSECURE_NO_AUTH` only on a loopback host. Errors name the
    /// config key and the fix.
    pub fn new(settings: WebhookSettings) -> Result<Self, WebhookError> {
        let routes = settings::validate(&settings)?;
        if routes.is_empty() {
            tracing::warn!("the webhook platform is enabled but has no routes; only /health will answer");
        }
        let client = reqwest::Client::builder()
            .timeout(settings.delivery_timeout)
            .connect_timeout(settings.delivery_timeout)
            // A redirected POST may turn into a GET elsewhere, and a redirect to another host would
            // carry the answer (and any credentials in the URL) there; report it instead.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(WebhookError::HttpClient)?;
        let mut capabilities = Capabilities::http();
        capabilities.supports_async_delivery = true;
        // Unsigned routes exist only on loopback hosts; the Host check keeps rebinding pages out.
        let unsigned = routes.values().any(|r| matches!(r.secret, RouteSecret::None));
        let hosts = if unsigned { HostPolicy::loopback(&settings.host) } else { HostPolicy::Any };
        Ok(Self {
            platform: Platform::new(PLATFORM),
            capabilities,
            host: settings.host,
            port: settings.port,
            shared: Arc::new(Shared {
                routes,
                limiter: FixedWindow::new(settings.rate_limit_per_minute, Duration::from_secs(60)),
                throttle: AuthThrottle::new(ThrottleLimits::default()),
                hosts,
            }),
            client,
            local_addr: Mutex::new(None),
        })
    }

    /// The address the server listens on while `run` is serving (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        *self.local_addr.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn set_local_addr(&self, addr: Option<SocketAddr>) {
        *self.local_addr.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = addr;
    }

    /// `host:port` as an operator would write it (IPv6 in brackets).
    fn display_addr(&self) -> String {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        if host.contains(':') { format!("[{host}]:{}", self.port) } else { format!("{host}:{}", self.port) }
    }
}

#[async_trait]
impl PlatformAdapter for WebhookAdapter {
    fn platform(&self) -> &Platform {
        &self.platform
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// A delivery is answered 202 once stored; its turn runs wherever the gateway runs turns.
    fn takes_events_on_any_replica(&self) -> bool {
        true
    }

    async fn run(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
        let addr = self.display_addr();
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let listener = TcpListener::bind((host, self.port))
            .await
            .map_err(|e| AdapterError::retryable("webhook_bind", format!("cannot listen on {addr} (platforms.webhook.host/port): {e}")))?;
        let local = listener.local_addr().ok();
        self.set_local_addr(local);
        ctx.health.mark_connected();
        tracing::info!(addr = %local.map_or(addr.clone(), |a| a.to_string()), routes = self.shared.routes.len(), "webhook server listening");

        let shutdown = ctx.shutdown.clone();
        let health = ctx.health.clone();
        // The peer's address is what signature failures are counted by.
        let app = server::router(Arc::clone(&self.shared), ctx).into_make_service_with_connect_info::<SocketAddr>();
        let served = axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await;
        health.mark_disconnected();
        self.set_local_addr(None);
        served.map_err(|e| AdapterError::retryable("webhook_serve", format!("the webhook server on {addr} stopped: {e}")))
    }

    async fn send(&self, msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        outbound::send(&self.shared.routes, &self.client, msg).await
    }
}
