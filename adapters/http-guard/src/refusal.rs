//! [`Refusal`]: a request turned away by a guard, before any handler saw it.

use http::StatusCode;

/// Why a request is refused, for the listener to answer in its own error shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    /// A stable, machine-readable reason (`origin_not_allowed`, `unsupported_media_type`, …).
    pub code: &'static str,
    /// What was wrong and what to do instead, for the client's developer.
    pub message: String,
}

impl Refusal {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
    }
}
