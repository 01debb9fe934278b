//! matrix-sdk failures → what the gateway does next.
//!
//! Every message is sent with a transaction id derived from its idempotency key (see
//! [`crate::adapter::txn_id`]). The client-server API makes `PUT /send/{type}/{txnId}`
//! idempotent: the homeserver answers a repeated transaction id of the same device with the
//! event it already created instead of creating another (Synapse keeps these for 30 minutes;
//! the gateway's retries come within seconds to minutes). So a send that timed out after the
//! request went out, or that got a 5xx, is safe to resend *with the same key*: it is classified
//! [`SendError::Transient`], not `Ambiguous`. Sends without that protection (an attachment's
//! upload before its message) are not idempotent on the homeserver, but a duplicate upload is an
//! unreferenced blob, not a doubled message; the message itself still carries the txn id.

use hermes_adapter::{AdapterError, SendError};
use matrix_sdk::ruma::api::client::uiaa::UiaaResponse;
use matrix_sdk::ruma::api::error::{ErrorKind, FromHttpResponseError, RetryAfter};
use std::time::{Duration, SystemTime};

/// Waited out when a 429 comes without `retry_after_ms`.
pub(crate) const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// What a failed request (a send, an edit, a reaction) means for the gateway.
pub(crate) fn classify(error: &matrix_sdk::Error) -> SendError {
    match error {
        matrix_sdk::Error::Http(http) => classify_http(http),
        other => match other.client_api_error_kind() {
            Some(kind) => by_kind(kind, &other.to_string()),
            None => SendError::Other(other.to_string()),
        },
    }
}

pub(crate) fn classify_http(error: &matrix_sdk::HttpError) -> SendError {
    let status = http_status(error);
    if let Some(kind) = error.client_api_error_kind() {
        return match (kind, status) {
            (ErrorKind::LimitExceeded(_), _) => by_kind(kind, &error.to_string()),
            // The homeserver (or a proxy in front of it) failed, whatever code its body names:
            // the request is idempotent by transaction id, so it is retried.
            (_, Some(500..=599)) => SendError::Transient(format!("the homeserver failed: {error}")),
            _ => by_kind(kind, &error.to_string()),
        };
    }
    match error {
        matrix_sdk::HttpError::Reqwest(e) if e.is_connect() => SendError::Transient(format!("could not reach the homeserver: {e}")),
        // Idempotent by transaction id (see the module doc): resending is safe.
        matrix_sdk::HttpError::Reqwest(e) => SendError::Transient(format!("the request to the homeserver failed: {e}")),
        matrix_sdk::HttpError::Cached(inner) => classify_http(inner),
        matrix_sdk::HttpError::Api(e) => match status.or_else(|| status_of(&e.to_string())) {
            Some(500..=599) => SendError::Transient(format!("the homeserver failed: {e}")),
            _ => SendError::Other(format!("the homeserver refused the request: {e}")),
        },
        other => SendError::Other(other.to_string()),
    }
}

/// The HTTP status the homeserver (or a proxy in front of it) answered with, when it answered
/// with an error.
fn http_status(error: &matrix_sdk::HttpError) -> Option<u16> {
    match error {
        matrix_sdk::HttpError::Api(e) => match e.as_ref() {
            FromHttpResponseError::Server(UiaaResponse::MatrixError(m)) => Some(m.status_code.as_u16()),
            _ => None,
        },
        matrix_sdk::HttpError::Cached(inner) => http_status(inner),
        _ => None,
    }
}

/// The status in a ruma error's text (`[502] ...`, after any prefix), for errors whose status
/// is not at hand otherwise.
fn status_of(text: &str) -> Option<u16> {
    let start = text.find('[')?;
    text.get(start + 1..start + 4).and_then(|code| code.parse().ok())
}

fn by_kind(kind: &ErrorKind, text: &str) -> SendError {
    match kind {
        ErrorKind::LimitExceeded(data) => SendError::RateLimited {
            retry_after: match data.retry_after {
                Some(RetryAfter::Delay(delay)) => delay,
                Some(RetryAfter::DateTime(at)) => at.duration_since(SystemTime::now()).unwrap_or(DEFAULT_RETRY_AFTER),
                None => DEFAULT_RETRY_AFTER,
            },
        },
        ErrorKind::TooLarge => SendError::TooLong,
        ErrorKind::NotFound => SendError::NotFound(text.to_string()),
        ErrorKind::Forbidden | ErrorKind::UnknownToken(_) | ErrorKind::MissingToken | ErrorKind::UserDeactivated => {
            SendError::Forbidden(text.to_string())
        }
        ErrorKind::BadJson | ErrorKind::NotJson => SendError::BadFormat(text.to_string()),
        _ => SendError::Other(text.to_string()),
    }
}

/// Whether the homeserver says the credential is no good (`M_UNKNOWN_TOKEN`, `M_MISSING_TOKEN`,
/// a deactivated user): retrying cannot help until the owner acts.
pub(crate) fn is_auth_failure(error: &matrix_sdk::Error) -> bool {
    matches!(error.client_api_error_kind(), Some(ErrorKind::UnknownToken(_) | ErrorKind::MissingToken | ErrorKind::UserDeactivated))
}

/// How a sync failure ends the run: bad credentials park the adapter naming the variable to
/// fix; anything else is retried.
pub(crate) fn sync_failure(error: &matrix_sdk::Error, credential: &str) -> AdapterError {
    if is_auth_failure(error) {
        AdapterError::fatal(
            "unauthorized",
            format!("the homeserver rejected the bot's login ({error}); check {credential} and restart the gateway"),
        )
    } else {
        AdapterError::retryable("network", format!("sync with the homeserver failed: {error}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use matrix_sdk::ruma::api::error::LimitExceededErrorData;

    #[test]
    fn kinds_map_to_what_the_gateway_does_next() {
        let mut data = LimitExceededErrorData::new();
        data.retry_after = Some(RetryAfter::Delay(Duration::from_millis(1500)));
        let limited = ErrorKind::LimitExceeded(data);
        assert!(matches!(by_kind(&limited, ""), SendError::RateLimited { retry_after } if retry_after == Duration::from_millis(1500)));
        assert!(matches!(by_kind(&ErrorKind::Forbidden, ""), SendError::Forbidden(_)));
        assert!(matches!(by_kind(&ErrorKind::NotFound, ""), SendError::NotFound(_)));
        assert!(matches!(by_kind(&ErrorKind::TooLarge, ""), SendError::TooLong));
        assert_eq!(status_of("[502] <non-json bytes>"), Some(502));
        assert_eq!(status_of("the server returned an error: [502] <non-json bytes>"), Some(502), "after matrix-sdk's prefix");
        assert_eq!(status_of("no status here"), None);
    }
}
