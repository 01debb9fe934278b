//! Discord failures → what the gateway does next. A request that may have reached Discord (a cut
//! connection, a timeout after sending) is ambiguous and never resent blindly; message creates
//! carry a nonce Discord deduplicates on, which is what lets the adapter retry those itself.

use hermes_adapter::SendError;
use serenity::http::HttpError;
use std::time::Duration;

/// Discord's JSON error codes the gateway acts on.
const UNKNOWN_CHANNEL: isize = 10003;
const UNKNOWN_MESSAGE: isize = 10008;
const MISSING_ACCESS: isize = 50001;
const CANNOT_DM: isize = 50007;
const MISSING_PERMISSIONS: isize = 50013;
const INVALID_FORM_BODY: isize = 50035;

/// Waited out when a 429 arrives without its `retry_after` (serenity drops it when its own
/// rate limiter is off).
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

pub fn classify(error: serenity::Error) -> SendError {
    match error {
        serenity::Error::Http(HttpError::UnsuccessfulRequest(response)) => {
            let status = response.status_code.as_u16();
            let code = response.error.code;
            let message = response.error.message.clone();
            let fields: Vec<String> = response.error.errors.iter().map(|e| format!("{}: {}", e.path, e.message)).collect();
            match (status, code) {
                (429, _) => SendError::RateLimited { retry_after: DEFAULT_RETRY_AFTER },
                (_, UNKNOWN_CHANNEL | UNKNOWN_MESSAGE) | (404, _) => SendError::NotFound(message),
                (_, MISSING_ACCESS | MISSING_PERMISSIONS | CANNOT_DM) | (403, _) => SendError::Forbidden(message),
                (_, INVALID_FORM_BODY) if fields.iter().any(|f| f.contains("content") && f.contains("length")) => SendError::TooLong,
                (500..=599, _) => SendError::Transient(format!("Discord answered {status}")),
                _ if fields.is_empty() => SendError::Other(format!("Discord refused the request ({status}, code {code}): {message}")),
                _ => SendError::Other(format!("Discord refused the request ({status}, code {code}): {message} ({})", fields.join("; "))),
            }
        }
        serenity::Error::Http(HttpError::Request(e)) => {
            if e.is_connect() {
                SendError::Transient(format!("could not reach Discord: {}", without_url(&e)))
            } else {
                SendError::Ambiguous(format!("the request to Discord may have been delivered: {}", without_url(&e)))
            }
        }
        serenity::Error::Model(serenity::model::ModelError::MessageTooLong(_)) => SendError::TooLong,
        serenity::Error::Json(e) => SendError::Ambiguous(format!("Discord's answer could not be read: {e}")),
        other => SendError::Other(other.to_string()),
    }
}

/// reqwest errors name the URL; the base may be a private proxy, and it says nothing useful.
fn without_url(e: &reqwest012::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), "<discord>");
    }
    text
}
