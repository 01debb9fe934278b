//! Webhook mode: Telegram POSTs each update to `webhook_url`, so any replica behind the load
//! balancer may take it and no poll lease is needed; a redelivery is recognised by the inbox's
//! event id (built from `update_id`), as in polling.
//!
//! * [`keys`]: the `webhook_*` settings, checked.
//! * `deliver`: one POST — secret token, update, inbox — to the status Telegram is answered.
//! * `listen`: the HTTP listener (axum, with the project's guards), handing each POST to
//!   [`run`]'s loop.
//!
//! The listener queues deliveries to the loop here instead of handling them itself, so that
//! handling borrows the adapter like the polling loop does.

mod deliver;
pub mod keys;
mod listen;

pub use deliver::Reply;

use crate::adapter::TelegramAdapter;
use crate::poll::{self, ALLOWED_UPDATES};
use crate::settings::WebhookSettings;
use deliver::Delivery;
use futures::StreamExt;
use hermes_adapter::{AdapterContext, AdapterError};
use std::net::SocketAddr;
use teloxide::payloads::SetWebhookSetters;
use teloxide::prelude::Requester;
use tokio::sync::mpsc;

/// Deliveries handled at once; Telegram opens up to 40 connections by default
/// (`max_connections`), and each delivery is one inbox write.
const CONCURRENT_DELIVERIES: usize = 16;

/// Listen, tell Telegram where to call, and store what it POSTs until the gateway stops.
pub async fn run(adapter: &TelegramAdapter, ctx: AdapterContext, hook: &WebhookSettings) -> Result<(), AdapterError> {
    let me = poll::identify(adapter.bot.clone()).await?;
    let gate = poll::gate(adapter);
    let (path, addr) = endpoint(hook)?;
    let (queue, deliveries) = mpsc::channel::<Delivery>(CONCURRENT_DELIVERIES);
    // Bound before setWebhook, so Telegram's first call finds someone listening.
    let server = listen::bind(addr, path, queue, ctx.clone()).await?;
    register(adapter, hook).await?;
    poll::publish_commands(adapter);
    ctx.health.mark_connected();
    let handled = futures::stream::unfold(deliveries, |mut rx| async move { rx.recv().await.map(|d| (d, rx)) })
        .for_each_concurrent(CONCURRENT_DELIVERIES, |delivery| deliver::handle(adapter, &ctx, &me, &gate, &hook.secret, delivery));
    tokio::select! {
        served = server => served,
        // Ends only once the listener has dropped its end of the queue.
        () = handled => Ok(()),
        () = ctx.shutdown.cancelled() => Ok(()),
    }
}

/// The route served (the path of the public URL) and the local address listened on.
fn endpoint(hook: &WebhookSettings) -> Result<(String, SocketAddr), AdapterError> {
    let bad = |what: String| AdapterError::fatal("telegram_webhook", what);
    let url = url::Url::parse(&hook.url).map_err(|e| bad(format!("webhook_url is not a URL: {e}")))?;
    let ip: std::net::IpAddr =
        hook.host.trim_matches(['[', ']']).parse().map_err(|_| bad(format!("webhook_host `{}` is not an IP address", hook.host)))?;
    Ok((url.path().to_string(), SocketAddr::new(ip, hook.port)))
}

/// `setWebhook`: the URL, the secret Telegram sends back, the updates polling asks for, and the
/// pending ones kept (they were never stored).
async fn register(adapter: &TelegramAdapter, hook: &WebhookSettings) -> Result<(), AdapterError> {
    let url = url::Url::parse(&hook.url).map_err(|e| AdapterError::fatal("telegram_webhook", format!("webhook_url: {e}")))?;
    let request = adapter
        .bot
        .set_webhook(url)
        .secret_token(hook.secret.expose().to_string())
        .allowed_updates(ALLOWED_UPDATES)
        .drop_pending_updates(false);
    match request.await {
        Ok(_) => Ok(()),
        Err(teloxide::RequestError::Api(teloxide::ApiError::InvalidToken)) => {
            Err(AdapterError::fatal("telegram_token", "Telegram rejected the bot token; check TELEGRAM_BOT_TOKEN"))
        }
        Err(e) => Err(AdapterError::retryable("telegram_webhook", format!("setWebhook failed: {e}"))),
    }
}
