//! Slack failures → what the gateway does next. Slack answers most refusals with HTTP 200 and
//! `{"ok":false,"error":"<code>"}`; the code decides. A request that may have reached Slack (a
//! cut connection, a timeout after sending, a 5xx, `internal_error`) is ambiguous and is never
//! resent blindly: [`crate::web`] first looks for the message by the key it carries.

use hermes_adapter::SendError;
use slack_morphism::errors::SlackClientError;
use std::time::Duration;

/// Waited out when a 429 arrives without `Retry-After`.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

pub fn classify(error: SlackClientError) -> SendError {
    match error {
        SlackClientError::RateLimitError(e) => SendError::RateLimited { retry_after: e.retry_after.unwrap_or(DEFAULT_RETRY_AFTER) },
        SlackClientError::ApiError(e) => by_code(&e.code),
        SlackClientError::HttpError(e) => {
            let status = e.status_code.as_u16();
            match status {
                429 => SendError::RateLimited { retry_after: DEFAULT_RETRY_AFTER },
                404 => SendError::NotFound(format!("Slack answered {status}")),
                401 | 403 => SendError::Forbidden(format!("Slack answered {status}")),
                // A 5xx may come after the work was done.
                500..=599 => SendError::Ambiguous(format!("Slack answered {status}")),
                _ => SendError::Other(format!("Slack answered {status}")),
            }
        }
        SlackClientError::HttpProtocolError(e) => {
            let connect = e
                .cause
                .as_deref()
                .and_then(|c| c.downcast_ref::<hyper_util::client::legacy::Error>())
                .is_some_and(hyper_util::client::legacy::Error::is_connect);
            if connect {
                SendError::Transient("could not reach Slack".to_string())
            } else {
                SendError::Ambiguous(format!("the request to Slack may have been delivered: {e}"))
            }
        }
        SlackClientError::ProtocolError(e) => SendError::Ambiguous(format!("Slack's answer could not be read: {e}")),
        SlackClientError::EndOfStream(_) => SendError::Ambiguous("Slack closed the connection before answering".to_string()),
        other => SendError::Other(other.to_string()),
    }
}

/// Slack's error codes (https://api.slack.com/methods/chat.postMessage#errors and friends).
fn by_code(code: &str) -> SendError {
    match code {
        "ratelimited" => SendError::RateLimited { retry_after: DEFAULT_RETRY_AFTER },
        "msg_too_long" => SendError::TooLong,
        "invalid_blocks" | "invalid_blocks_format" => SendError::BadFormat(code.to_string()),
        "channel_not_found" | "message_not_found" | "thread_not_found" | "user_not_found" => SendError::NotFound(code.to_string()),
        "not_in_channel"
        | "is_archived"
        | "restricted_action"
        | "cant_update_message"
        | "cant_delete_message"
        | "edit_window_closed"
        | "invalid_auth"
        | "not_authed"
        | "account_inactive"
        | "token_revoked"
        | "token_expired"
        | "missing_scope"
        | "not_allowed_token_type"
        | "ekm_access_denied"
        | "team_access_not_granted" => SendError::Forbidden(code.to_string()),
        // "It's possible some aspect of the operation succeeded before the error was raised."
        "internal_error" | "fatal_error" | "request_timeout" => SendError::Ambiguous(format!("Slack answered {code}")),
        "service_unavailable" => SendError::Transient(code.to_string()),
        other => SendError::Other(format!("Slack refused the request: {other}")),
    }
}

/// Whether a refusal says the tokens are wrong (not worth retrying until the owner fixes them).
pub fn is_auth_failure(error: &SlackClientError) -> bool {
    matches!(error, SlackClientError::ApiError(e) if matches!(e.code.as_str(),
        "invalid_auth" | "not_authed" | "account_inactive" | "token_revoked" | "token_expired" | "not_allowed_token_type"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_what_the_gateway_does_next() {
        assert!(matches!(by_code("msg_too_long"), SendError::TooLong));
        assert!(matches!(by_code("not_in_channel"), SendError::Forbidden(_)));
        assert!(matches!(by_code("channel_not_found"), SendError::NotFound(_)));
        assert!(matches!(by_code("internal_error"), SendError::Ambiguous(_)));
        assert!(matches!(by_code("ratelimited"), SendError::RateLimited { .. }));
        assert!(matches!(by_code("something_new"), SendError::Other(_)));
    }
}
