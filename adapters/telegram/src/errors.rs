//! Telegram failures sorted into what the gateway does next ([`SendError`]). The distinction that
//! matters most: a request that may have reached Telegram is `Ambiguous` and never resent, one
//! that certainly did not (refused connection, 429, 5xx) is safe to retry.

use hermes_adapter::SendError;
use std::time::Duration;
use teloxide::{ApiError, RequestError};

/// Telegram's 5xx answers arrive as JSON errors whose description is the HTTP reason.
fn is_server_error(description: &str) -> bool {
    const REASONS: [&str; 4] = ["Internal Server Error", "Bad Gateway", "Service Unavailable", "Gateway Timeout"];
    REASONS.iter().any(|r| description.starts_with(r))
}

pub fn is_thread_not_found(error: &RequestError) -> bool {
    matches!(error, RequestError::Api(ApiError::Unknown(d)) if d.contains("message thread not found"))
}

/// `getUpdates` refused because a webhook is set. teloxide recognises only the bare phrase
/// ([`ApiError::CantGetUpdates`]); Telegram words it "Conflict: can't use getUpdates method while
/// webhook is active; use deleteWebhook to delete the webhook first", which teloxide leaves
/// `Unknown`.
pub fn is_webhook_active(error: &RequestError) -> bool {
    match error {
        RequestError::Api(ApiError::CantGetUpdates) => true,
        RequestError::Api(ApiError::Unknown(d)) => d.contains("can't use getUpdates method while webhook is active"),
        _ => false,
    }
}

pub fn classify(error: RequestError) -> SendError {
    match error {
        RequestError::RetryAfter(wait) => SendError::RateLimited { retry_after: wait.duration() },
        RequestError::Api(api) => match api {
            ApiError::MessageIsTooLong | ApiError::EditedMessageIsTooLong => SendError::TooLong,
            ApiError::CantParseEntities(detail) => SendError::BadFormat(detail),
            ApiError::BotBlocked
            | ApiError::BotKicked
            | ApiError::BotKickedFromSupergroup
            | ApiError::BotKickedFromChannel
            | ApiError::NotEnoughRightsToPostMessages
            | ApiError::UserDeactivated
            | ApiError::CantInitiateConversation
            | ApiError::CantTalkWithBots => SendError::Forbidden(api.to_string()),
            ApiError::InvalidToken => SendError::Forbidden("Telegram rejected the bot token".to_string()),
            ApiError::ChatNotFound
            | ApiError::UserNotFound
            | ApiError::MessageToEditNotFound
            | ApiError::MessageToDeleteNotFound
            | ApiError::MessageToReplyNotFound => SendError::NotFound(api.to_string()),
            ApiError::Unknown(detail) if is_server_error(&detail) => SendError::Transient(format!("Telegram answered {detail}")),
            ApiError::Unknown(detail) if detail.contains("message thread not found") => SendError::NotFound(detail),
            other => SendError::Other(other.to_string()),
        },
        RequestError::MigrateToChatId(id) => SendError::NotFound(format!("the group became supergroup {id}; use that chat id")),
        // teloxide strips the URL (and so the token) from reqwest errors before we see them.
        RequestError::Network(e) if e.is_connect() => SendError::Transient(format!("cannot reach Telegram: {e}")),
        RequestError::Network(e) if e.is_builder() => SendError::Other(format!("bad request: {e}")),
        RequestError::Network(e) => SendError::Ambiguous(format!("the connection to Telegram failed mid-request: {e}")),
        // Something answered, but not with Telegram's JSON (a proxy's error page): it may have
        // been forwarded, so do not resend.
        RequestError::InvalidJson { .. } => SendError::Ambiguous("Telegram's answer was not JSON".to_string()),
        RequestError::Io(e) => SendError::Transient(format!("reading the file to upload failed: {e}")),
    }
}

/// How long to wait, if Telegram asked us to.
pub fn retry_after(error: &RequestError) -> Option<Duration> {
    match error {
        RequestError::RetryAfter(wait) => Some(wait.duration()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_are_retryable_and_formatting_errors_are_not() {
        assert!(classify(RequestError::Api(ApiError::Unknown("Internal Server Error".into()))).is_retryable());
        assert!(classify(RequestError::Api(ApiError::Unknown("Bad Gateway".into()))).is_retryable());
        assert!(matches!(classify(RequestError::Api(ApiError::CantParseEntities("x".into()))), SendError::BadFormat(_)));
        assert!(matches!(classify(RequestError::Api(ApiError::MessageIsTooLong)), SendError::TooLong));
        assert!(matches!(classify(RequestError::Api(ApiError::BotBlocked)), SendError::Forbidden(_)));
        assert!(matches!(
            classify(RequestError::InvalidJson {
                source: std::sync::Arc::new(serde_json::from_str::<u8>("x").unwrap_err()),
                raw: "<html>".into()
            }),
            SendError::Ambiguous(_)
        ));
    }
}
