//! How a turn fails where the user must hear of it: each [`TurnError`] knows the reply the chat
//! gets, so no step writes a failure's text out itself.

use crate::agent::ProviderError;
use crate::observe::secret_forms::SecretScrubber;

/// The most of a provider's error the user is shown.
const DETAIL_CHARS: usize = 300;

/// A turn that ended in a failure the user is told about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TurnError {
    /// The user's message could not be stored, so the turn never started.
    #[error("the user's message could not be stored")]
    MessageNotStored,
    /// The session store failed while the history or the prompt was read.
    #[error("the session store is unavailable")]
    StoreDown,
    /// The agent (or the turn) panicked; `incident` is logged with the panic.
    #[error("the turn panicked (incident {incident})")]
    Crashed { incident: String },
    /// The model provider failed. `detail` is already scrubbed of secrets and cut short.
    #[error("the provider failed ({kind}): {detail}")]
    Provider { kind: &'static str, detail: String },
}

impl TurnError {
    /// The provider's `error` as the user may see it: a key or a token its body echoes is
    /// scrubbed (the configured secrets, then anything shaped like one), and a long body is cut.
    pub(crate) fn provider(error: &ProviderError, secrets: &SecretScrubber) -> Self {
        let redacted = crate::observe::redact::redact_patterns(&secrets.scrub(&error.to_string()));
        Self::Provider { kind: error.kind(), detail: redacted.chars().take(DETAIL_CHARS).collect() }
    }

    /// What the chat is told; it says what to do next.
    pub(crate) fn reply(&self) -> String {
        match self {
            TurnError::MessageNotStored => {
                "Sorry, I encountered an error (StorageError).\nYour message could not be stored.\nTry again in a moment.".into()
            }
            TurnError::StoreDown => {
                "Sorry, I encountered an error (StorageError).\nThe session store is unavailable.\nTry again in a moment.".into()
            }
            TurnError::Crashed { incident } => {
                format!("⚠️ Internal error (incident {incident}). Your message was not processed; please try again or rephrase it.")
            }
            TurnError::Provider { kind, detail } => {
                format!("Sorry, I encountered an error ({kind}).\n{detail}\nTry again or use /reset to start a fresh session.")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_tells_the_user_what_to_do() {
        let cases = [
            (
                TurnError::MessageNotStored,
                "Sorry, I encountered an error (StorageError).\nYour message could not be stored.\nTry again in a moment.",
            ),
            (
                TurnError::StoreDown,
                "Sorry, I encountered an error (StorageError).\nThe session store is unavailable.\nTry again in a moment.",
            ),
            (
                TurnError::Crashed { incident: "1a2b3c4d".into() },
                "⚠️ Internal error (incident 1a2b3c4d). Your message was not processed; please try again or rephrase it.",
            ),
            (
                TurnError::Provider { kind: "RateLimited", detail: "slow down".into() },
                "Sorry, I encountered an error (RateLimited).\nslow down\nTry again or use /reset to start a fresh session.",
            ),
        ];
        for (error, reply) in cases {
            assert_eq!(error.reply(), reply, "{error:?}");
        }
    }

    #[test]
    fn a_provider_error_is_cut_short_for_the_chat() {
        let error = ProviderError::Fatal("x".repeat(1000));
        let TurnError::Provider { kind, detail } = TurnError::provider(&error, &SecretScrubber::default()) else {
            panic!("a provider error stays a provider error");
        };
        assert_eq!(kind, error.kind());
        assert_eq!(detail.chars().count(), DETAIL_CHARS);
    }
}
