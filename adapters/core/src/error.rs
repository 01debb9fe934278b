//! How an adapter's `run` ends, which tells the supervisor to retry or to park it.

/// The end of an adapter's connection.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// Worth retrying with backoff (network down, platform 5xx, conflict).
    #[error("{code}: {message}")]
    Retryable {
        /// A short stable identifier of the cause, for logs and status (`network`, `conflict`).
        code: String,
        /// What happened, for people.
        message: String,
    },
    /// Retrying cannot help (revoked token, invalid settings); the adapter is parked with this
    /// reason until an operator acts. A port in use is retryable: the holder may go away.
    #[error("{code}: {message}")]
    Fatal {
        /// A short stable identifier of the cause, for logs and status (`unauthorized`).
        code: String,
        /// What happened and what the operator should do, for people.
        message: String,
    },
}

impl AdapterError {
    /// A [`AdapterError::Retryable`] from any strings.
    pub fn retryable(code: impl Into<String>, message: impl Into<String>) -> Self {
        AdapterError::Retryable { code: code.into(), message: message.into() }
    }
    /// A [`AdapterError::Fatal`] from any strings.
    pub fn fatal(code: impl Into<String>, message: impl Into<String>) -> Self {
        AdapterError::Fatal { code: code.into(), message: message.into() }
    }
    /// Whether the supervisor should reconnect (with backoff) rather than park the adapter.
    pub fn is_retryable(&self) -> bool {
        matches!(self, AdapterError::Retryable { .. })
    }
}
