//! The store's time unit, milliseconds since the epoch, shared by every backend.

use chrono::{DateTime, TimeZone, Utc};

/// Now, in milliseconds since the epoch.
pub(super) fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// A stored time back as a `DateTime` (the epoch for a value out of range).
pub(super) fn to_time(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}
