//! Clock skew: this machine's clock against the `Date` of an HTTPS answer already received (the
//! provider's). A skewed clock breaks TLS certificate checks, TOTP codes and Slack's request
//! signatures (which refuse anything five minutes off), long before anything says why.

use super::report::Report;
use chrono::{DateTime, Utc};

/// Above this the owner is warned; `Date` has one-second resolution and the answer took a while.
const TOLERANCE_SECS: i64 = 60;

pub(super) fn check(report: &mut Report, server: Option<DateTime<Utc>>) {
    let Some(server) = server else {
        report.warn("clock skew not checked: no answer with a Date header (the provider check failed)");
        return;
    };
    let skew = Utc::now().signed_duration_since(server).num_seconds();
    if skew.abs() > TOLERANCE_SECS {
        let direction = if skew > 0 { "ahead of" } else { "behind" };
        report.warn(&format!(
            "this machine's clock is {}s {direction} the provider's: TLS, TOTP and Slack signatures fail on skew; \
             enable time sync (timedatectl set-ntp true)",
            skew.abs()
        ));
    } else {
        report.ok(&format!("clock within {TOLERANCE_SECS}s of the provider's ({skew:+}s)"));
    }
}
