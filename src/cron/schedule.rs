//! Cron schedules: what a user may type as a job's schedule, how it is stored in `jobs.json`, and when it runs.
//!
//! This module owns the schedule grammar of Hermes' `parse_schedule` (durations, `every` intervals, cron expressions,
//! ISO timestamps), the `{kind, run_at | minutes | expr, display}` record, the time zone schedules are read in, and the
//! time arithmetic on top of them: first and next runs (DST-correct, through croner), the on-time grace of an
//! occurrence and the 120 s tolerance for one-shots. It does no I/O and never reads the clock: `now` is always passed in.

use std::fmt;

use chrono::{DateTime, FixedOffset, Local, LocalResult, NaiveDate, NaiveDateTime, Offset, SecondsFormat, TimeDelta, TimeZone, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::{UnknownZone, parse_zone};

/// The accepted forms, for help texts (the "Use: ..." part of [`ScheduleError::Invalid`] without the zone suffix).
pub const ACCEPTED_FORMS: &str = "Duration '30m', '2h', '1d' (one-shot); Interval 'every 30m', 'every 2h' (recurring); \
     Cron '0 9 * * mon-fri' (5 fields, or 6 with seconds first); Timestamp '2026-02-03T14:00:00'";

/// How far in the past a one-shot may be and still be accepted (on create, update and resume) or re-armed: Hermes' 120 s.
pub const ONE_SHOT_TOLERANCE_SECS: i64 = 120;

/// The bounds of [`Schedule::grace`]: never stricter than the one-shot tolerance, never looser than two hours.
const MIN_GRACE_SECS: i64 = 120;
const MAX_GRACE_SECS: i64 = 7200;

/// A cron expression whose next match is further away than this is taken to never fire (`0 0 30 2 *`); five years
/// leaves room for `29 2` (leap days) and anything else a calendar repeats.
const NEVER_FIRES_HORIZON_DAYS: i64 = 5 * 366;

/// The zone naive timestamps and cron expressions are read in (config key `timezone`; unset = host local time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    Local,
    Named(chrono_tz::Tz),
}

impl Zone {
    /// `None` or empty → Local; an unknown IANA name → [`ScheduleError::UnknownZone`] naming it.
    pub fn from_config(name: Option<&str>) -> Result<Zone, ScheduleError> {
        Ok(parse_zone(name)?.map_or(Zone::Local, Zone::Named))
    }

    /// "Europe/Paris", or "local time".
    pub fn describe(&self) -> String {
        match self {
            Zone::Local => "local time".to_string(),
            Zone::Named(tz) => tz.name().to_string(),
        }
    }

    /// `at` shown in this zone as "YYYY-MM-DD HH:MM" (for displays and listings).
    pub fn show(&self, at: DateTime<Utc>) -> String {
        self.localize(at).format("%Y-%m-%d %H:%M").to_string()
    }

    /// `at` as an RFC 3339 string with this zone's offset, e.g. "2026-02-03T14:00:00+01:00" (what jobs.json stores).
    pub fn stamp(&self, at: DateTime<Utc>) -> String {
        Stamp::in_zone(at, *self).to_string()
    }

    /// `at` with the offset this zone has at that instant.
    fn localize(&self, at: DateTime<Utc>) -> DateTime<FixedOffset> {
        let offset = match self {
            Zone::Local => Local.offset_from_utc_datetime(&at.naive_utc()).fix(),
            Zone::Named(tz) => tz.offset_from_utc_datetime(&at.naive_utc()).fix(),
        };
        at.with_timezone(&offset)
    }

    /// The instant(s) a wall-clock time names in this zone: none in a spring-forward gap, two in a fall-back overlap.
    fn resolve(&self, wall_clock: &NaiveDateTime) -> LocalResult<DateTime<Utc>> {
        match self {
            Zone::Local => Local.from_local_datetime(wall_clock).map(|at| at.to_utc()),
            Zone::Named(tz) => tz.from_local_datetime(wall_clock).map(|at| at.to_utc()),
        }
    }

    /// The first match of `cron` strictly after `after`, matched against this zone's wall clock. croner does the DST
    /// handling (a fixed time in a gap runs at the first instant after it; in an overlap it runs once, on the earlier
    /// instant), which is why the search runs on a zoned time and not on UTC.
    fn next_match(&self, cron: &Cron, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Zone::Local => next_zoned_match(cron, &after.with_timezone(&Local)),
            Zone::Named(tz) => next_zoned_match(cron, &after.with_timezone(tz)),
        }
    }
}

fn next_zoned_match<Z: TimeZone>(cron: &Cron, after: &DateTime<Z>) -> Option<DateTime<Utc>> {
    cron.find_next_occurrence(after, false).ok().map(|at| at.to_utc())
}

/// A job's schedule as stored in Hermes' jobs.json: `{"kind":"once","run_at":"<iso>","display":"once at 2026-02-03 14:00"}`,
/// `{"kind":"interval","minutes":30,"display":"every 30m"}`, `{"kind":"cron","expr":"0 9 * * mon-fri","display":"0 9 * * mon-fri"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    #[serde(flatten)]
    pub kind: ScheduleKind,
    #[serde(default)]
    pub display: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ScheduleKind {
    Once { run_at: Stamp },
    Interval { minutes: u64 },
    Cron { expr: String },
}

/// A point in time as jobs.json writes it. Deserializes leniently: RFC 3339 with offset or `Z`, with or without
/// fractional seconds (Python's isoformat writes microseconds: "2026-02-03T14:00:00.123456+01:00"); a naive
/// "2026-02-03T14:00:00" (or with a space instead of T) is taken as UTC (Hermes always writes an offset; this only
/// keeps a hand-edited file readable). Serializes as RFC 3339 keeping the stored offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(pub DateTime<FixedOffset>);

impl Stamp {
    pub fn utc(&self) -> DateTime<Utc> {
        self.0.to_utc()
    }

    /// `at` with `zone`'s offset at that instant.
    pub fn in_zone(at: DateTime<Utc>, zone: Zone) -> Stamp {
        Stamp(zone.localize(at))
    }

    /// Reads a stored timestamp; `None` when it is not one (see the type's doc for what is accepted).
    pub fn parse(text: &str) -> Option<Stamp> {
        let written = read_timestamp(text)?;
        let offset = written.offset.unwrap_or(Utc.fix());
        offset.from_local_datetime(&written.wall_clock).single().map(Stamp)
    }
}

impl fmt::Display for Stamp {
    /// RFC 3339 with the stored offset, `+00:00` rather than `Z` and fractional seconds only when there are some:
    /// the shape Python's `isoformat` gives Hermes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_rfc3339_opts(SecondsFormat::AutoSi, false))
    }
}

impl Serialize for Stamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Stamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Stamp::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("invalid timestamp '{text}': expected RFC 3339 such as 2026-02-03T14:00:00+01:00"))
        })
    }
}

/// What a schedule could not be read as, shown to the user who typed it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    #[error("Invalid schedule '{input}': {reason}. Use: {forms} (in {zone})", forms = ACCEPTED_FORMS)]
    Invalid { input: String, reason: InvalidSchedule, zone: String },
    #[error("'{input}' is more than 120s in the past and cannot be scheduled.")]
    Past { input: String },
    #[error(transparent)]
    UnknownZone(#[from] UnknownZone),
}

/// Why a schedule was refused: the reason part of [`ScheduleError::Invalid`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidSchedule {
    #[error("'every' needs a duration such as 'every 30m'")]
    EveryWithoutPeriod,
    #[error("'{period}' is not a duration (a number and m, h or d)")]
    PeriodNotADuration { period: String },
    #[error(transparent)]
    Duration(#[from] DurationError),
    /// croner's explanation, without its final period.
    #[error("not a valid cron expression ({detail})")]
    NotCron { detail: String },
    #[error("the expression never matches a date (no run within 5 years)")]
    CronNeverMatches,
    #[error("not an ISO timestamp such as 2026-02-03T14:00:00")]
    NotATimestamp,
    #[error("the timestamp is out of range")]
    TimestampOutOfRange,
    #[error("{} does not exist in {zone} (the clocks jump forward); pick another time", wall_clock.format("%Y-%m-%d %H:%M"))]
    SkippedByClocks { wall_clock: NaiveDateTime, zone: String },
    #[error("not a duration, an 'every' interval, a cron expression or a timestamp")]
    Unrecognised,
    /// A schedule that parsed but has no first run.
    #[error("it never runs")]
    NeverRuns,
}

/// Parse what a user typed. Tried in this order, case-insensitive, surrounding whitespace and one pair of surrounding
/// quotes ('...' or "...") ignored:
/// 1. `every <duration>` → Interval, display `every {minutes}m` (so `every 2h` shows as `every 120m`, as in Hermes).
/// 2. 5 or 6 whitespace-separated fields (6 = seconds first), or a croner alias such as `@daily` → Cron, display = the
///    expression as typed. croner validates it, and an expression with no match within 5 years (`0 0 30 2 *`) is refused.
/// 3. Something starting with `YYYY-MM-DD` → Once at that ISO timestamp: with an offset or `Z` it is absolute, naive it
///    is read in `zone`, a bare date is midnight in `zone`; a space may replace the `T` and seconds may be left out.
///    A wall-clock time the clocks skip is refused; one they repeat takes the earlier instant. Display "once at …".
/// 4. A bare duration → Once at `now` + duration, display "once in 30m" (the input, lowercased).
/// 5. Otherwise [`ScheduleError::Invalid`].
///
/// Duration grammar: integer ≥ 1 + optional spaces + unit ∈ {m, min, mins, minute, minutes, h, hr, hrs, hour, hours,
/// d, day, days}; no seconds, weeks or compound forms. A Once more than 120 s before `now` → [`ScheduleError::Past`].
pub fn parse(input: &str, now: DateTime<Utc>, zone: Zone) -> Result<Schedule, ScheduleError> {
    let text = strip_quotes(input.trim()).trim();
    let lowered = text.to_lowercase();
    let invalid = |reason: InvalidSchedule| ScheduleError::Invalid { input: text.to_string(), reason, zone: zone.describe() };
    if let Some(period) = strip_every(&lowered) {
        return interval(period, now).map_err(invalid);
    }
    if looks_like_cron(text) {
        return cron(text, now, zone).map_err(invalid);
    }
    if starts_with_date(text) {
        let run_at = timestamp(text, zone).map_err(invalid)?;
        return once(run_at, format!("once at {}", zone.show(run_at)), text, now, zone);
    }
    match parse_duration(&lowered) {
        Ok(minutes) => match later_by(now, minutes) {
            Some(run_at) => once(run_at, format!("once in {lowered}"), text, now, zone),
            None => Err(invalid(DurationError::TooLong.into())),
        },
        Err(DurationError::NotADuration) => Err(invalid(InvalidSchedule::Unrecognised)),
        Err(error) => Err(invalid(error.into())),
    }
}

/// One pair of matching quotes around the whole input, as a chat user or a model may add them.
fn strip_quotes(text: &str) -> &str {
    ['"', '\''].iter().find_map(|quote| text.strip_prefix(*quote)?.strip_suffix(*quote)).unwrap_or(text)
}

/// The part after a leading `every` word (`every30m` is not an interval).
fn strip_every(lowered: &str) -> Option<&str> {
    let rest = lowered.strip_prefix("every")?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then_some(rest.trim())
}

fn interval(period: &str, now: DateTime<Utc>) -> Result<Schedule, InvalidSchedule> {
    if period.is_empty() {
        return Err(InvalidSchedule::EveryWithoutPeriod);
    }
    let minutes = parse_duration(period).map_err(|error| match error {
        DurationError::NotADuration => InvalidSchedule::PeriodNotADuration { period: period.to_string() },
        other => other.into(),
    })?;
    // A period too long to add to today could never be rescheduled; refuse it now rather than fail at the first run.
    later_by(now, minutes).ok_or(DurationError::TooLong)?;
    Ok(Schedule { kind: ScheduleKind::Interval { minutes }, display: format!("every {minutes}m") })
}

/// Five or six fields is cron's shape (dates, durations and intervals have at most three); a lone `@word` is one of
/// croner's aliases (`@daily`, `@hourly`, …) or a mistyped one, for croner to judge.
fn looks_like_cron(text: &str) -> bool {
    let fields = text.split_whitespace().count();
    fields == 5 || fields == 6 || (fields == 1 && text.starts_with('@'))
}

fn cron(expr: &str, now: DateTime<Utc>, zone: Zone) -> Result<Schedule, InvalidSchedule> {
    let cron =
        parse_cron(expr).map_err(|error| InvalidSchedule::NotCron { detail: error.to_string().trim_end_matches('.').to_string() })?;
    // Near the end of chrono's calendar there is no horizon to hold the expression to; any match then will do.
    let horizon = now.checked_add_signed(TimeDelta::days(NEVER_FIRES_HORIZON_DAYS));
    match zone.next_match(&cron, now) {
        Some(next) if horizon.is_none_or(|horizon| next <= horizon) => {
            Ok(Schedule { kind: ScheduleKind::Cron { expr: expr.to_string() }, display: expr.to_string() })
        }
        _ => Err(InvalidSchedule::CronNeverMatches),
    }
}

/// The one cron dialect used for validating and for running: 5 fields, or 6 with seconds first, no year field.
/// `5/15`-style steps are allowed because croniter (which Hermes validates with) accepts them, so jobs.json may hold them.
fn parse_cron(expr: &str) -> Result<Cron, croner::errors::CronError> {
    CronParser::builder().seconds(Seconds::Optional).year(Year::Disallowed).sloppy_ranges(true).build().parse(expr)
}

/// `YYYY-MM-DD` by shape only, so that `2026-02-30` is refused as a bad timestamp rather than as no schedule at all.
fn starts_with_date(text: &str) -> bool {
    let head = text.as_bytes().get(..10);
    head.is_some_and(|head| {
        head.iter().enumerate().all(|(at, byte)| if at == 4 || at == 7 { *byte == b'-' } else { byte.is_ascii_digit() })
    })
}

/// The instant an ISO timestamp names: as written when it has an offset, else read in `zone`.
fn timestamp(text: &str, zone: Zone) -> Result<DateTime<Utc>, InvalidSchedule> {
    let written = read_timestamp(text).ok_or(InvalidSchedule::NotATimestamp)?;
    if let Some(offset) = written.offset {
        let absolute = offset.from_local_datetime(&written.wall_clock).single();
        return absolute.map(|at| at.to_utc()).ok_or(InvalidSchedule::TimestampOutOfRange);
    }
    match zone.resolve(&written.wall_clock) {
        LocalResult::Single(at) => Ok(at),
        // The clocks go back: the first pass of that wall-clock time is the one a user means by it.
        LocalResult::Ambiguous(earlier, _) => Ok(earlier),
        LocalResult::None => Err(InvalidSchedule::SkippedByClocks { wall_clock: written.wall_clock, zone: zone.describe() }),
    }
}

fn once(run_at: DateTime<Utc>, display: String, text: &str, now: DateTime<Utc>, zone: Zone) -> Result<Schedule, ScheduleError> {
    let schedule = Schedule { kind: ScheduleKind::Once { run_at: Stamp::in_zone(run_at, zone) }, display };
    if schedule.is_past(now) {
        return Err(ScheduleError::Past { input: text.to_string() });
    }
    Ok(schedule)
}

/// An ISO timestamp split into what the clock showed and the offset it was written with, if any.
struct WrittenTimestamp {
    wall_clock: NaiveDateTime,
    offset: Option<FixedOffset>,
}

/// Reads `YYYY-MM-DD`, optionally followed by `T` or a space, `HH:MM`, optional `:SS` and fraction, and an optional
/// `Z` or `±HH:MM` / `±HHMM` / `±HH` offset: what Python's `fromisoformat` reads and `isoformat` writes.
fn read_timestamp(text: &str) -> Option<WrittenTimestamp> {
    let text = text.trim().to_ascii_uppercase();
    if let Ok(date) = NaiveDate::parse_from_str(&text, "%Y-%m-%d") {
        return Some(WrittenTimestamp { wall_clock: date.and_time(chrono::NaiveTime::MIN), offset: None });
    }
    let (date, time) = (text.get(..10)?, text.get(11..)?);
    if !matches!(text.as_bytes().get(10), Some(b'T' | b' ')) {
        return None;
    }
    let (time, offset) = split_offset(time)?;
    let joined = format!("{date}T{time}");
    let wall_clock = NaiveDateTime::parse_from_str(&joined, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(&joined, "%Y-%m-%dT%H:%M"))
        .ok()?;
    Some(WrittenTimestamp { wall_clock, offset })
}

/// Splits `14:00:00+01:00` into the time and its offset; `None` when an offset is there but malformed.
fn split_offset(time: &str) -> Option<(&str, Option<FixedOffset>)> {
    if let Some(time) = time.strip_suffix('Z') {
        return Some((time, Some(Utc.fix())));
    }
    match time.find(['+', '-']) {
        None => Some((time, None)),
        Some(sign_at) => Some((&time[..sign_at], Some(read_offset(&time[sign_at..])?))),
    }
}

/// `+01:00`, `+0100` or `+01` (and the same with `-`).
fn read_offset(text: &str) -> Option<FixedOffset> {
    let (sign, digits) = (text.get(..1)?, text.get(1..)?.replace(':', ""));
    if !digits.bytes().all(|byte| byte.is_ascii_digit()) || !matches!(digits.len(), 2 | 4) {
        return None;
    }
    let hours: i32 = digits.get(..2)?.parse().ok()?;
    let minutes: i32 = digits.get(2..).filter(|rest| !rest.is_empty()).map_or(Some(0), |rest| rest.parse().ok())?;
    if hours > 23 || minutes > 59 {
        return None;
    }
    let seconds = (hours * 60 + minutes) * 60;
    FixedOffset::east_opt(if sign == "-" { -seconds } else { seconds })
}

/// Why a duration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("not a duration (a number and m, h or d)")]
    NotADuration,
    #[error("a duration must be at least 1 minute")]
    Zero,
    #[error("the duration is too long")]
    TooLong,
}

/// Hermes' duration grammar, `<integer ≥ 1><spaces?><unit>` with unit one of the minute, hour or day spellings, read
/// as a number of minutes.
fn parse_duration(lowered: &str) -> Result<u64, DurationError> {
    let digits_end = lowered.find(|c: char| !c.is_ascii_digit()).unwrap_or(lowered.len());
    let (number, unit) = lowered.split_at(digits_end);
    let minutes_per_unit: u64 = match unit.trim_start() {
        "m" | "min" | "mins" | "minute" | "minutes" => 1,
        "h" | "hr" | "hrs" | "hour" | "hours" => 60,
        "d" | "day" | "days" => 24 * 60,
        _ => return Err(DurationError::NotADuration),
    };
    if number.is_empty() {
        return Err(DurationError::NotADuration);
    }
    // Digits that do not fit a u64 are a number too long, not something other than a duration.
    let count: u64 = number.parse().map_err(|_| DurationError::TooLong)?;
    if count == 0 {
        return Err(DurationError::Zero);
    }
    let minutes = count.checked_mul(minutes_per_unit).ok_or(DurationError::TooLong)?;
    minutes_delta(minutes).map(|_| minutes).ok_or(DurationError::TooLong)
}

/// `minutes` as a chrono duration; `None` past what chrono can hold.
fn minutes_delta(minutes: u64) -> Option<TimeDelta> {
    TimeDelta::try_minutes(i64::try_from(minutes).ok()?)
}

/// `at` + `minutes`; `None` when that is past the end of chrono's calendar.
fn later_by(at: DateTime<Utc>, minutes: u64) -> Option<DateTime<Utc>> {
    at.checked_add_signed(minutes_delta(minutes)?)
}

impl Schedule {
    pub fn is_recurring(&self) -> bool {
        !matches!(self.kind, ScheduleKind::Once { .. })
    }

    /// The first run of a job created at `created`: once → run_at; interval → created + minutes; cron → next match
    /// strictly after created.
    pub fn first_run(&self, created: DateTime<Utc>, zone: Zone) -> Option<DateTime<Utc>> {
        match &self.kind {
            ScheduleKind::Once { run_at } => Some(run_at.utc()),
            _ => self.next_after(created, zone),
        }
    }

    /// The next occurrence strictly after `after`: interval → after + minutes; cron → next match in `zone`
    /// (DST-correct); once → None. `None` also when a cron expression cannot be parsed (a hand-edited file) or the
    /// next time is past the end of the calendar — callers record that as an error.
    pub fn next_after(&self, after: DateTime<Utc>, zone: Zone) -> Option<DateTime<Utc>> {
        match &self.kind {
            ScheduleKind::Once { .. } => None,
            ScheduleKind::Interval { minutes } => later_by(after, *minutes),
            ScheduleKind::Cron { expr } => zone.next_match(&parse_cron(expr).ok()?, after),
        }
    }

    /// How late an occurrence may start and still be on time: half the period (interval: minutes; cron: gap between
    /// the next two matches after `around`), clamped to [120 s, 7200 s]; once → 120 s. A cron expression that cannot
    /// be evaluated gets the minimum.
    pub fn grace(&self, around: DateTime<Utc>, zone: Zone) -> chrono::Duration {
        let period = match &self.kind {
            ScheduleKind::Once { .. } => None,
            ScheduleKind::Interval { minutes } => minutes_delta(*minutes),
            ScheduleKind::Cron { .. } => self.next_after(around, zone).and_then(|first| Some(self.next_after(first, zone)? - first)),
        };
        let half_period_secs = period.map_or(0, |period| period.num_seconds() / 2);
        TimeDelta::seconds(half_period_secs.clamp(MIN_GRACE_SECS, MAX_GRACE_SECS))
    }

    /// Whether this one-shot is more than 120 s in the past at `now` (always false for recurring ones); used on
    /// create, update and resume.
    pub fn is_past(&self, now: DateTime<Utc>) -> bool {
        match &self.kind {
            ScheduleKind::Once { run_at } => now.signed_duration_since(run_at.utc()) > TimeDelta::seconds(ONE_SHOT_TOLERANCE_SECS),
            _ => false,
        }
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
