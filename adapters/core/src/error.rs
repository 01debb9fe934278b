//! How an adapter's `run` ends, which tells the supervisor to retry or to park it.

/// The end of an adapter's connection.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// Worth retrying with backoff (network down, platform 5xx, conflict).
    #[error("{code}: {message}")]
    Retryable { code: String, message: String },
    /// Retrying cannot help (revoked token, invalid settings); the adapter is parked with this
    /// reason until an operator acts. A port in use is retryable: the holder may go away.
    #[error("{code}: {message}")]
    Fatal { code: String, message: String },
}

impl AdapterError {
    pub fn retryable(code: impl Into<String>, message: impl Into<String>) -> Self {
        AdapterError::Retryable { code: code.into(), message: message.into() }
    }
    pub fn fatal(code: impl Into<String>, message: impl Into<String>) -> Self {
        AdapterError::Fatal { code: code.into(), message: message.into() }
    }
    pub fn is_retryable(&self) -> bool {
        matches!(self, AdapterError::Retryable { .. })
    }
}
