//! `timezone:`: the IANA zone cron schedules are read in. Config owns the name's rule so that
//! validation needs no cron code; `cron::schedule::Zone::from_config` builds on [`parse_zone`].

/// A `timezone` that is not an IANA zone name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone '{name}' (expected an IANA name such as Europe/Paris)")]
pub struct UnknownZone {
    /// The name as configured, trimmed.
    pub name: String,
}

/// `None` or blank means host local time (`Ok(None)`); otherwise the named zone.
pub fn parse_zone(name: Option<&str>) -> Result<Option<chrono_tz::Tz>, UnknownZone> {
    let name = name.map(str::trim).unwrap_or_default();
    if name.is_empty() {
        return Ok(None);
    }
    name.parse::<chrono_tz::Tz>().map(Some).map_err(|_| UnknownZone { name: name.to_string() })
}
