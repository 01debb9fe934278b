//! The answer to a delivery: written to the log or POSTed to the route's URL, with HTTP failures
//! classified into [`SendError`]s.

use crate::PLATFORM;
use crate::deliver::Deliver;
use crate::settings::Route;
use hermes_adapter::{OutboundMessage, SendError, SendReceipt};
use reqwest::{StatusCode, Url};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Used when a 429 carries no usable Retry-After.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(60);
/// How much of an error response goes into the error text.
const EXCERPT_CHARS: usize = 200;

/// The JSON POSTed to a `deliver` URL.
#[derive(Debug, Serialize)]
struct Payload<'a> {
    route: &'a str,
    delivery_id: &'a str,
    text: &'a str,
    idempotency_key: &'a str,
}

/// Splits `webhook:<route>:<key>`; route names contain no ':', keys may (a sender's id on an
/// unsigned route).
pub(crate) fn parse_chat_id(chat_id: &str) -> Option<(&str, &str)> {
    let rest = chat_id.strip_prefix(PLATFORM)?.strip_prefix(':')?;
    let (route, delivery) = rest.split_once(':')?;
    (!route.is_empty()).then_some((route, delivery))
}

pub(crate) async fn send(
    routes: &BTreeMap<String, Route>,
    client: &reqwest::Client,
    msg: &OutboundMessage,
) -> Result<SendReceipt, SendError> {
    let chat_id = msg.target.chat_id.as_str();
    let (route_name, key) =
        parse_chat_id(chat_id).ok_or_else(|| SendError::NotFound(format!("{chat_id:?} is not a webhook delivery chat")))?;
    // The answer names the delivery as its sender did (the event's message id), else by its key.
    let delivery_id = msg.reply_to.as_deref().unwrap_or(key);
    let route =
        routes.get(route_name).ok_or_else(|| SendError::NotFound(format!("no webhook route {route_name:?} (removed from the config?)")))?;
    match &route.deliver {
        Deliver::Log => {
            tracing::info!(route = %route.name, delivery_id = %delivery_id, text = %msg.text, "webhook answer");
            Ok(SendReceipt::default())
        }
        Deliver::Url(url) => {
            let payload = Payload { route: &route.name, delivery_id, text: &msg.text, idempotency_key: &msg.idempotency_key };
            post(client, url, &payload, &msg.idempotency_key).await
        }
        // The gateway sends such answers to the target platform; one arriving here is misrouted.
        Deliver::Chat(target) => Err(SendError::Other(format!(
            "route {} delivers to {}:{}; its answers do not go through the webhook adapter",
            route.name, target.platform, target.chat_id
        ))),
    }
}

async fn post(client: &reqwest::Client, url: &Url, payload: &Payload<'_>, key: &str) -> Result<SendReceipt, SendError> {
    let response = client
        .post(url.clone())
        .header("Idempotency-Key", key)
        .json(payload)
        .send()
        .await
        .map_err(|e| classify_transport(payload.route, e))?;
    let status = response.status();
    if status.is_success() {
        return Ok(SendReceipt::default());
    }
    let route = payload.route;
    if status == StatusCode::TOO_MANY_REQUESTS {
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(DEFAULT_RETRY_AFTER, Duration::from_secs);
        return Err(SendError::RateLimited { retry_after });
    }
    let excerpt = excerpt(response).await;
    Err(if status.is_server_error() {
        SendError::Transient(format!("route {route}: the delivery URL answered {status}: {excerpt}"))
    } else if status == StatusCode::NOT_FOUND {
        SendError::NotFound(format!("route {route}: the delivery URL answered 404: {excerpt}"))
    } else if status.is_client_error() {
        SendError::Forbidden(format!("route {route}: the delivery URL answered {status}: {excerpt}"))
    } else {
        // Redirects are not followed (a POST must not silently turn into a GET elsewhere).
        SendError::Other(format!("route {route}: the delivery URL answered {status}; redirects are not followed"))
    })
}

/// Connect failures happened before anything was sent; anything later (a timeout, a reset while
/// waiting for the answer) may have reached the receiver.
fn classify_transport(route: &str, error: reqwest::Error) -> SendError {
    // The URL may carry a token in its query; keep it out of errors and logs.
    let error = error.without_url();
    if error.is_connect() {
        SendError::Transient(format!("route {route}: cannot connect to the delivery URL: {error}"))
    } else if error.is_builder() {
        SendError::Other(format!("route {route}: cannot build the delivery request: {error}"))
    } else if error.is_timeout() {
        SendError::Ambiguous(format!("route {route}: the delivery URL did not answer in time: {error}"))
    } else {
        SendError::Ambiguous(format!("route {route}: the delivery request failed after it was sent: {error}"))
    }
}

/// The first characters of an error response, reading no more than needed.
async fn excerpt(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < EXCERPT_CHARS * 4 {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    String::from_utf8_lossy(&bytes).chars().take(EXCERPT_CHARS).collect::<String>().trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_ids() {
        assert_eq!(parse_chat_id("webhook:gh:abc-1"), Some(("gh", "abc-1")));
        assert_eq!(parse_chat_id("webhook:gh:a:b"), Some(("gh", "a:b")));
        assert_eq!(parse_chat_id("webhook:gh"), None);
        assert_eq!(parse_chat_id("webhook::x"), None);
        assert_eq!(parse_chat_id("telegram:gh:x"), None);
    }
}
