use super::*;

const UTC: Zone = Zone::Named(chrono_tz::UTC);
const PARIS: Zone = Zone::Named(chrono_tz::Europe::Paris);
const NEW_YORK: Zone = Zone::Named(chrono_tz::America::New_York);

/// A Tuesday, in winter (Paris is +01:00, New York -05:00).
const NOW: &str = "2026-02-03T12:00:00Z";

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

/// The stored part of a schedule in one line, offsets included (`Stamp`'s equality compares instants only).
fn stored(kind: &ScheduleKind) -> String {
    match kind {
        ScheduleKind::Once { run_at } => format!("once {run_at}"),
        ScheduleKind::Interval { minutes } => format!("interval {minutes}"),
        ScheduleKind::Cron { expr } => format!("cron {expr}"),
    }
}

struct Valid {
    input: &'static str,
    zone: Zone,
    now: &'static str,
    stored: &'static str,
    display: &'static str,
    first_run: &'static str,
}

const fn ok(input: &'static str, zone: Zone, stored: &'static str, display: &'static str, first_run: &'static str) -> Valid {
    Valid { input, zone, now: NOW, stored, display, first_run }
}

const fn ok_at(
    now: &'static str,
    input: &'static str,
    zone: Zone,
    stored: &'static str,
    display: &'static str,
    first: &'static str,
) -> Valid {
    Valid { input, zone, now, stored, display, first_run: first }
}

const VALID: &[Valid] = &[
    // Durations: every unit spelling, with and without spaces, any case; display is the input lowercased.
    ok("30m", UTC, "once 2026-02-03T12:30:00+00:00", "once in 30m", "2026-02-03T12:30:00Z"),
    ok("1 min", UTC, "once 2026-02-03T12:01:00+00:00", "once in 1 min", "2026-02-03T12:01:00Z"),
    ok("2mins", UTC, "once 2026-02-03T12:02:00+00:00", "once in 2mins", "2026-02-03T12:02:00Z"),
    ok("5 minute", UTC, "once 2026-02-03T12:05:00+00:00", "once in 5 minute", "2026-02-03T12:05:00Z"),
    ok("10   minutes", UTC, "once 2026-02-03T12:10:00+00:00", "once in 10   minutes", "2026-02-03T12:10:00Z"),
    ok("1h", UTC, "once 2026-02-03T13:00:00+00:00", "once in 1h", "2026-02-03T13:00:00Z"),
    ok("2 hr", UTC, "once 2026-02-03T14:00:00+00:00", "once in 2 hr", "2026-02-03T14:00:00Z"),
    ok("3hrs", UTC, "once 2026-02-03T15:00:00+00:00", "once in 3hrs", "2026-02-03T15:00:00Z"),
    ok("1 hour", UTC, "once 2026-02-03T13:00:00+00:00", "once in 1 hour", "2026-02-03T13:00:00Z"),
    ok("4 HOURS", UTC, "once 2026-02-03T16:00:00+00:00", "once in 4 hours", "2026-02-03T16:00:00Z"),
    ok("1d", UTC, "once 2026-02-04T12:00:00+00:00", "once in 1d", "2026-02-04T12:00:00Z"),
    ok("2 day", UTC, "once 2026-02-05T12:00:00+00:00", "once in 2 day", "2026-02-05T12:00:00Z"),
    ok("  3 Days  ", UTC, "once 2026-02-06T12:00:00+00:00", "once in 3 days", "2026-02-06T12:00:00Z"),
    // A relative one-shot is stored with the configured zone's offset.
    ok("30m", PARIS, "once 2026-02-03T13:30:00+01:00", "once in 30m", "2026-02-03T12:30:00Z"),
    // Intervals: always stored and shown in minutes, as Hermes does.
    ok("every 30m", UTC, "interval 30", "every 30m", "2026-02-03T12:30:00Z"),
    ok("every 2h", UTC, "interval 120", "every 120m", "2026-02-03T14:00:00Z"),
    ok("EVERY   1 Day", PARIS, "interval 1440", "every 1440m", "2026-02-04T12:00:00Z"),
    ok("every 45 mins", NEW_YORK, "interval 45", "every 45m", "2026-02-03T12:45:00Z"),
    // Cron: names, case kept in the display, read in the zone; 6 fields put seconds first.
    ok("0 9 * * mon-fri", UTC, "cron 0 9 * * mon-fri", "0 9 * * mon-fri", "2026-02-04T09:00:00Z"),
    ok("30 9 * * Mon-Fri", PARIS, "cron 30 9 * * Mon-Fri", "30 9 * * Mon-Fri", "2026-02-04T08:30:00Z"),
    ok("0 9 * * 1-5", NEW_YORK, "cron 0 9 * * 1-5", "0 9 * * 1-5", "2026-02-03T14:00:00Z"),
    ok("0 9 * * sat", UTC, "cron 0 9 * * sat", "0 9 * * sat", "2026-02-07T09:00:00Z"),
    ok("0 9 1 jan,mar *", UTC, "cron 0 9 1 jan,mar *", "0 9 1 jan,mar *", "2026-03-01T09:00:00Z"),
    ok("*/15 * * * *", UTC, "cron */15 * * * *", "*/15 * * * *", "2026-02-03T12:15:00Z"),
    ok("30 0 9 * * *", UTC, "cron 30 0 9 * * *", "30 0 9 * * *", "2026-02-04T09:00:30Z"),
    ok("@daily", PARIS, "cron @daily", "@daily", "2026-02-03T23:00:00Z"),
    ok("@hourly", UTC, "cron @hourly", "@hourly", "2026-02-03T13:00:00Z"),
    // croniter's `start/step` form (Hermes may have stored it) is accepted.
    ok("5/15 * * * *", UTC, "cron 5/15 * * * *", "5/15 * * * *", "2026-02-03T12:05:00Z"),
    // Leap days come round within the five-year horizon.
    ok("0 0 29 2 *", UTC, "cron 0 0 29 2 *", "0 0 29 2 *", "2028-02-29T00:00:00Z"),
    // Timestamps: `Z` and offsets are absolute; they are stored and shown in the configured zone.
    ok("2026-02-03T14:00:00Z", UTC, "once 2026-02-03T14:00:00+00:00", "once at 2026-02-03 14:00", "2026-02-03T14:00:00Z"),
    ok("2026-02-03T14:00:00Z", PARIS, "once 2026-02-03T15:00:00+01:00", "once at 2026-02-03 15:00", "2026-02-03T14:00:00Z"),
    ok("2026-02-03T14:00:00+01:00", NEW_YORK, "once 2026-02-03T08:00:00-05:00", "once at 2026-02-03 08:00", "2026-02-03T13:00:00Z"),
    ok("2026-02-03T18:00:00+0530", UTC, "once 2026-02-03T12:30:00+00:00", "once at 2026-02-03 12:30", "2026-02-03T12:30:00Z"),
    ok("2026-02-03t14:00:00z", UTC, "once 2026-02-03T14:00:00+00:00", "once at 2026-02-03 14:00", "2026-02-03T14:00:00Z"),
    // Python's isoformat writes microseconds; they are kept.
    ok(
        "2026-02-03T14:00:00.123456+01:00",
        PARIS,
        "once 2026-02-03T14:00:00.123456+01:00",
        "once at 2026-02-03 14:00",
        "2026-02-03T13:00:00.123456Z",
    ),
    // Naive timestamps are read in the configured zone, with the offset of that date (summer time in July).
    ok("2026-02-03T14:00:00", PARIS, "once 2026-02-03T14:00:00+01:00", "once at 2026-02-03 14:00", "2026-02-03T13:00:00Z"),
    ok("2026-02-03T14:00:00", NEW_YORK, "once 2026-02-03T14:00:00-05:00", "once at 2026-02-03 14:00", "2026-02-03T19:00:00Z"),
    ok("2026-07-01T09:00", PARIS, "once 2026-07-01T09:00:00+02:00", "once at 2026-07-01 09:00", "2026-07-01T07:00:00Z"),
    ok("2026-02-03 14:00", PARIS, "once 2026-02-03T14:00:00+01:00", "once at 2026-02-03 14:00", "2026-02-03T13:00:00Z"),
    ok("2026-02-04", PARIS, "once 2026-02-04T00:00:00+01:00", "once at 2026-02-04 00:00", "2026-02-03T23:00:00Z"),
    ok("2026-02-04", NEW_YORK, "once 2026-02-04T00:00:00-05:00", "once at 2026-02-04 00:00", "2026-02-04T05:00:00Z"),
    // Fall-back: 02:30 happens twice in Paris on 2026-10-25; the earlier pass (still +02:00) is taken.
    ok_at(
        "2026-10-01T00:00:00Z",
        "2026-10-25T02:30:00",
        PARIS,
        "once 2026-10-25T02:30:00+02:00",
        "once at 2026-10-25 02:30",
        "2026-10-25T00:30:00Z",
    ),
    // The 120 s tolerance: 119 s and exactly 120 s in the past are still accepted.
    ok_at(
        "2026-02-03T14:01:59Z",
        "2026-02-03T14:00:00Z",
        UTC,
        "once 2026-02-03T14:00:00+00:00",
        "once at 2026-02-03 14:00",
        "2026-02-03T14:00:00Z",
    ),
    ok_at(
        "2026-02-03T14:02:00Z",
        "2026-02-03T14:00:00Z",
        UTC,
        "once 2026-02-03T14:00:00+00:00",
        "once at 2026-02-03 14:00",
        "2026-02-03T14:00:00Z",
    ),
    // One pair of surrounding quotes is ignored.
    ok("'every 30m'", UTC, "interval 30", "every 30m", "2026-02-03T12:30:00Z"),
    ok("\"0 9 * * mon-fri\"", UTC, "cron 0 9 * * mon-fri", "0 9 * * mon-fri", "2026-02-04T09:00:00Z"),
    ok("  ' 30m '  ", UTC, "once 2026-02-03T12:30:00+00:00", "once in 30m", "2026-02-03T12:30:00Z"),
];

#[test]
fn valid_inputs_parse_to_their_schedule_display_and_first_run() {
    for case in VALID {
        let now = utc(case.now);
        let schedule = parse(case.input, now, case.zone).unwrap_or_else(|error| panic!("{:?}: {error}", case.input));
        assert_eq!(stored(&schedule.kind), case.stored, "stored form of {:?}", case.input);
        assert_eq!(schedule.display, case.display, "display of {:?}", case.input);
        assert_eq!(schedule.first_run(now, case.zone), Some(utc(case.first_run)), "first run of {:?}", case.input);
    }
}

struct Invalid {
    input: &'static str,
    zone: Zone,
    now: &'static str,
    fragment: &'static str,
}

const fn bad(input: &'static str, fragment: &'static str) -> Invalid {
    Invalid { input, zone: UTC, now: NOW, fragment }
}

const fn bad_in(input: &'static str, zone: Zone, fragment: &'static str) -> Invalid {
    Invalid { input, zone, now: NOW, fragment }
}

const INVALID: &[Invalid] = &[
    bad("tomorrow", "Invalid schedule 'tomorrow': not a duration, an 'every' interval, a cron expression or a timestamp. Use: "),
    bad("every monday", "Invalid schedule 'every monday': 'monday' is not a duration (a number and m, h or d). Use: "),
    bad("every", "'every' needs a duration such as 'every 30m'"),
    bad("every30m", "not a duration, an 'every' interval"),
    bad("1h30m", "Invalid schedule '1h30m': not a duration, an 'every' interval"),
    bad("30s", "Invalid schedule '30s': not a duration"),
    bad("2w", "Invalid schedule '2w': not a duration"),
    bad("1 week", "Invalid schedule '1 week': not a duration"),
    bad("m", "Invalid schedule 'm': not a duration"),
    bad("-5m", "Invalid schedule '-5m': not a duration"),
    bad("1.5h", "Invalid schedule '1.5h': not a duration"),
    bad("every 1d at 09:00", "'1d at 09:00' is not a duration"),
    bad("", "Invalid schedule '': not a duration"),
    bad("\"\"", "Invalid schedule '': not a duration"),
    bad("0m", "Invalid schedule '0m': a duration must be at least 1 minute. Use: "),
    bad("every 0h", "Invalid schedule 'every 0h': a duration must be at least 1 minute"),
    bad("99999999999999999999m", "the duration is too long"),
    bad("999999999999999999h", "the duration is too long"),
    bad("9999999999999d", "the duration is too long"),
    bad("every 9999999999999 days", "the duration is too long"),
    // Cron: croner's message is passed on; an expression that never fires is refused.
    bad("0 9 * * blah", "Invalid schedule '0 9 * * blah': not a valid cron expression (Pattern contains illegal characters"),
    bad("61 * * * *", "Invalid schedule '61 * * * *': not a valid cron expression (Component error: Number out of bounds). Use: "),
    bad("0 25 * * *", "not a valid cron expression (Component error"),
    bad("0 9 * * monday", "not a valid cron expression (Pattern contains illegal characters"),
    bad("@reboot", "Invalid schedule '@reboot': not a valid cron expression ("),
    bad("0 0 30 2 *", "Invalid schedule '0 0 30 2 *': the expression never matches a date (no run within 5 years). Use: "),
    bad("0 0 31 4 *", "the expression never matches a date"),
    // Seven fields (croner's year field) are not part of the grammar.
    bad("0 0 9 * * * 2026", "Invalid schedule '0 0 9 * * * 2026': not a duration"),
    // Timestamps.
    bad("2026-02-30T10:00:00", "Invalid schedule '2026-02-30T10:00:00': not an ISO timestamp such as 2026-02-03T14:00:00"),
    bad("2026-02-03T25:00:00", "not an ISO timestamp"),
    bad("2026-02-03T14:00:00+25:00", "not an ISO timestamp"),
    bad("2026-02-03 at noon", "not an ISO timestamp"),
    bad_in(
        "2026-03-29T02:30:00",
        PARIS,
        "Invalid schedule '2026-03-29T02:30:00': 2026-03-29 02:30 does not exist in Europe/Paris (the clocks jump forward); pick another time. Use: ",
    ),
    bad_in("2026-03-08T02:30", NEW_YORK, "2026-03-08 02:30 does not exist in America/New_York (the clocks jump forward)"),
    // The zone is named in the help; a one-shot in the past is its own error.
    bad_in("nonsense", PARIS, "(in Europe/Paris)"),
    Invalid {
        input: "2026-02-03T14:00:00Z",
        zone: UTC,
        now: "2026-02-03T14:02:01Z",
        fragment: "'2026-02-03T14:00:00Z' is more than 120s in the past",
    },
    Invalid {
        input: "'2026-02-03'",
        zone: PARIS,
        now: NOW,
        fragment: "'2026-02-03' is more than 120s in the past and cannot be scheduled.",
    },
];

#[test]
fn invalid_inputs_are_refused_with_a_reason() {
    for case in INVALID {
        let error = parse(case.input, utc(case.now), case.zone).expect_err(case.input);
        let message = error.to_string();
        assert!(message.contains(case.fragment), "{:?} gave {message:?}", case.input);
    }
}

#[test]
fn an_invalid_schedule_names_every_accepted_form_and_the_zone() {
    let error = parse("tomorrow", utc(NOW), PARIS).unwrap_err();
    assert_eq!(
        error.to_string(),
        "Invalid schedule 'tomorrow': not a duration, an 'every' interval, a cron expression or a timestamp. \
         Use: Duration '30m', '2h', '1d' (one-shot); Interval 'every 30m', 'every 2h' (recurring); \
         Cron '0 9 * * mon-fri' (5 fields, or 6 with seconds first); Timestamp '2026-02-03T14:00:00' (in Europe/Paris)"
    );
    let local = parse("tomorrow", utc(NOW), Zone::Local).unwrap_err();
    assert!(local.to_string().ends_with(&format!("Use: {ACCEPTED_FORMS} (in local time)")));
}

#[test]
fn a_one_shot_121_seconds_old_is_past_and_one_119_seconds_old_is_not() {
    let input = "2026-02-03T14:00:00Z";
    let past = parse(input, utc("2026-02-03T14:02:01Z"), UTC);
    assert_eq!(past, Err(ScheduleError::Past { input: input.to_string() }));
    assert_eq!(past.unwrap_err().to_string(), "'2026-02-03T14:00:00Z' is more than 120s in the past and cannot be scheduled.");

    let recent = parse(input, utc("2026-02-03T14:01:59Z"), UTC).unwrap();
    assert!(!recent.is_past(utc("2026-02-03T14:02:00Z")));
    assert!(recent.is_past(utc("2026-02-03T14:02:01Z")));
}

#[test]
fn recurring_schedules_are_never_past() {
    let long_after = utc("2036-01-01T00:00:00Z");
    for input in ["every 30m", "0 9 * * *"] {
        let schedule = parse(input, utc(NOW), UTC).unwrap();
        assert!(schedule.is_recurring(), "{input}");
        assert!(!schedule.is_past(long_after), "{input}");
    }
    assert!(!parse("30m", utc(NOW), UTC).unwrap().is_recurring());
}

// --- Zones ---

#[test]
fn zone_from_config_reads_iana_names_and_defaults_to_local_time() {
    assert_eq!(Zone::from_config(None), Ok(Zone::Local));
    assert_eq!(Zone::from_config(Some("")), Ok(Zone::Local));
    assert_eq!(Zone::from_config(Some("  ")), Ok(Zone::Local));
    assert_eq!(Zone::from_config(Some("Europe/Paris")), Ok(PARIS));
    assert_eq!(Zone::from_config(Some(" America/New_York ")), Ok(NEW_YORK));
    assert_eq!(Zone::from_config(Some("UTC")), Ok(UTC));
    let unknown = Zone::from_config(Some("Mars/Olympus_Mons")).unwrap_err();
    assert_eq!(unknown, ScheduleError::UnknownZone(crate::config::UnknownZone { name: "Mars/Olympus_Mons".to_string() }));
    assert_eq!(unknown.to_string(), "unknown time zone 'Mars/Olympus_Mons' (expected an IANA name such as Europe/Paris)");
}

#[test]
fn zones_describe_show_and_stamp_with_the_offset_of_the_instant() {
    assert_eq!(PARIS.describe(), "Europe/Paris");
    assert_eq!(Zone::Local.describe(), "local time");
    let winter = utc("2026-02-03T13:00:00Z");
    let summer = utc("2026-07-01T07:00:00.5Z");
    assert_eq!(PARIS.show(winter), "2026-02-03 14:00");
    assert_eq!(PARIS.stamp(winter), "2026-02-03T14:00:00+01:00");
    assert_eq!(PARIS.show(summer), "2026-07-01 09:00");
    assert_eq!(PARIS.stamp(summer), "2026-07-01T09:00:00.500+02:00");
    assert_eq!(NEW_YORK.stamp(winter), "2026-02-03T08:00:00-05:00");
    assert_eq!(UTC.stamp(winter), "2026-02-03T13:00:00+00:00");
}

#[test]
fn local_time_stamps_name_the_same_instant() {
    let at = utc("2026-07-01T07:00:00Z");
    let stamp = Zone::Local.stamp(at);
    assert_eq!(Stamp::parse(&stamp).map(|stamp| stamp.utc()), Some(at), "{stamp}");
    assert_eq!(Stamp::in_zone(at, Zone::Local).utc(), at);
}

// --- Next runs, first runs, DST ---

/// The first `count` runs of `schedule` after `from`, each strictly after the one before.
fn runs(schedule: &Schedule, zone: Zone, from: &str, count: usize) -> Vec<DateTime<Utc>> {
    std::iter::successors(schedule.next_after(utc(from), zone), |last| schedule.next_after(*last, zone)).take(count).collect()
}

fn cron_schedule(expr: &str) -> Schedule {
    Schedule { kind: ScheduleKind::Cron { expr: expr.to_string() }, display: expr.to_string() }
}

fn utcs(texts: &[&str]) -> Vec<DateTime<Utc>> {
    texts.iter().map(|text| utc(text)).collect()
}

#[test]
fn a_daily_cron_keeps_its_wall_clock_time_across_spring_forward() {
    let nine = cron_schedule("0 9 * * *");
    assert_eq!(
        runs(&nine, PARIS, "2026-03-27T12:00:00Z", 3),
        utcs(&["2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z", "2026-03-30T07:00:00Z"])
    );
}

/// croner's answer for a fixed time the clocks skip: it runs once that day, at the first instant after the gap
/// (03:00 CEST, 01:00Z), and is back at 02:30 the next day.
#[test]
fn a_daily_cron_inside_the_spring_forward_gap_runs_once_right_after_the_gap() {
    let half_past_two = cron_schedule("30 2 * * *");
    assert_eq!(
        runs(&half_past_two, PARIS, "2026-03-28T00:00:00Z", 3),
        utcs(&["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"])
    );
}

#[test]
fn a_daily_cron_inside_the_fall_back_overlap_runs_once_on_the_first_pass() {
    let half_past_two = cron_schedule("30 2 * * *");
    assert_eq!(runs(&half_past_two, PARIS, "2026-10-24T12:00:00Z", 2), utcs(&["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]));
    // Asked from between the two passes, it does not fire on the second one.
    assert_eq!(half_past_two.next_after(utc("2026-10-25T01:00:00Z"), PARIS), Some(utc("2026-10-26T01:30:00Z")));
}

#[test]
fn a_half_hourly_cron_keeps_real_time_spacing_through_the_fall_back_overlap() {
    // 02:00 and 02:30 happen twice; a job that is not tied to one hour runs in both passes.
    let half_hourly = cron_schedule("*/30 * * * *");
    assert_eq!(
        runs(&half_hourly, PARIS, "2026-10-24T23:45:00Z", 5),
        utcs(&["2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z"])
    );
}

#[test]
fn cron_expressions_are_read_in_the_zone() {
    let nine = cron_schedule("0 9 * * *");
    let after = utc(NOW);
    assert_eq!(nine.next_after(after, UTC), Some(utc("2026-02-04T09:00:00Z")));
    assert_eq!(nine.next_after(after, PARIS), Some(utc("2026-02-04T08:00:00Z")));
    assert_eq!(nine.next_after(after, NEW_YORK), Some(utc("2026-02-03T14:00:00Z")));
}

#[test]
fn next_after_is_strictly_after() {
    let nine = cron_schedule("0 9 * * *");
    assert_eq!(nine.next_after(utc("2026-02-04T09:00:00Z"), UTC), Some(utc("2026-02-05T09:00:00Z")));
    assert_eq!(nine.next_after(utc("2026-02-04T08:59:59.5Z"), UTC), Some(utc("2026-02-04T09:00:00Z")));
    let every_30 = Schedule { kind: ScheduleKind::Interval { minutes: 30 }, display: "every 30m".to_string() };
    assert_eq!(every_30.next_after(utc("2026-02-04T09:10:00Z"), UTC), Some(utc("2026-02-04T09:40:00Z")));
}

#[test]
fn next_after_is_none_for_one_shots_and_unreadable_cron() {
    let once = parse("2026-02-03T14:00:00Z", utc(NOW), UTC).unwrap();
    assert_eq!(once.next_after(utc(NOW), UTC), None);
    assert_eq!(cron_schedule("0 9 * * blah").next_after(utc(NOW), UTC), None);
    assert_eq!(cron_schedule("0 0 30 2 *").next_after(utc(NOW), UTC), None);
    let huge = Schedule { kind: ScheduleKind::Interval { minutes: u64::MAX }, display: String::new() };
    assert_eq!(huge.next_after(utc(NOW), UTC), None);
}

#[test]
fn first_run_of_a_one_shot_is_its_time_whenever_it_was_created() {
    let once = parse("2026-02-03T14:00:00+01:00", utc(NOW), UTC).unwrap();
    assert_eq!(once.first_run(utc("2020-01-01T00:00:00Z"), PARIS), Some(utc("2026-02-03T13:00:00Z")));
    assert_eq!(once.first_run(utc("2030-01-01T00:00:00Z"), PARIS), Some(utc("2026-02-03T13:00:00Z")));
}

#[test]
fn first_run_of_a_recurring_schedule_follows_its_creation() {
    let every_2h = parse("every 2h", utc(NOW), UTC).unwrap();
    assert_eq!(every_2h.first_run(utc("2026-02-05T10:15:00Z"), UTC), Some(utc("2026-02-05T12:15:00Z")));
    let nine = parse("0 9 * * *", utc(NOW), PARIS).unwrap();
    // Created on a match: the first run is the next one, not that instant.
    assert_eq!(nine.first_run(utc("2026-02-05T08:00:00Z"), PARIS), Some(utc("2026-02-06T08:00:00Z")));
}

// --- Grace ---

fn grace_secs(input: &str, zone: Zone) -> i64 {
    parse(input, utc(NOW), zone).unwrap().grace(utc(NOW), zone).num_seconds()
}

#[test]
fn grace_is_half_the_period_clamped_to_two_minutes_and_two_hours() {
    assert_eq!(grace_secs("every 1m", UTC), 120);
    assert_eq!(grace_secs("every 4m", UTC), 120);
    assert_eq!(grace_secs("every 5m", UTC), 150);
    assert_eq!(grace_secs("every 60m", UTC), 1800);
    assert_eq!(grace_secs("every 10h", UTC), 7200);
    assert_eq!(grace_secs("*/10 * * * *", UTC), 300);
    assert_eq!(grace_secs("* * * * * *", UTC), 120);
    assert_eq!(grace_secs("0 9 * * *", PARIS), 7200);
    assert_eq!(grace_secs("30m", UTC), 120);
    assert_eq!(grace_secs("2026-02-04T12:00:00Z", UTC), 120);
}

#[test]
fn cron_grace_uses_the_gap_between_the_next_two_matches() {
    // From Tuesday noon the next two matches are 09:00 and 09:30 on Wednesday: 15 minutes, not the 24 h that follow.
    let uneven = cron_schedule("0,30 9 * * *");
    assert_eq!(uneven.grace(utc(NOW), UTC).num_seconds(), 900);
    assert_eq!(cron_schedule("not cron").grace(utc(NOW), UTC).num_seconds(), 120);
}

// --- Serde ---

fn round_trip(schedule: &Schedule, json: &str) {
    assert_eq!(serde_json::to_string(schedule).unwrap(), json);
    assert_eq!(&serde_json::from_str::<Schedule>(json).unwrap(), schedule);
}

#[test]
fn schedules_serialize_in_hermes_jobs_json_shapes() {
    let once = parse("2026-02-03T14:00:00", utc(NOW), PARIS).unwrap();
    round_trip(&once, r#"{"kind":"once","run_at":"2026-02-03T14:00:00+01:00","display":"once at 2026-02-03 14:00"}"#);
    let interval = parse("every 30m", utc(NOW), PARIS).unwrap();
    round_trip(&interval, r#"{"kind":"interval","minutes":30,"display":"every 30m"}"#);
    let cron = parse("0 9 * * mon-fri", utc(NOW), PARIS).unwrap();
    round_trip(&cron, r#"{"kind":"cron","expr":"0 9 * * mon-fri","display":"0 9 * * mon-fri"}"#);
}

#[test]
fn a_python_written_schedule_keeps_its_microseconds_and_offset() {
    let json = r#"{"display": "once at 2026-02-03 14:00", "run_at": "2026-02-03T14:00:00.123456+01:00", "kind": "once"}"#;
    let schedule: Schedule = serde_json::from_str(json).unwrap();
    let ScheduleKind::Once { run_at } = schedule.kind else { panic!("not a one-shot: {schedule:?}") };
    assert_eq!(run_at.utc(), utc("2026-02-03T13:00:00.123456Z"));
    assert_eq!(serde_json::to_string(&run_at).unwrap(), r#""2026-02-03T14:00:00.123456+01:00""#);
}

#[test]
fn a_schedule_without_display_reads_with_an_empty_one_and_unknown_kinds_are_refused() {
    let schedule: Schedule = serde_json::from_str(r#"{"kind":"interval","minutes":5}"#).unwrap();
    assert_eq!(schedule, Schedule { kind: ScheduleKind::Interval { minutes: 5 }, display: String::new() });
    assert!(serde_json::from_str::<Schedule>(r#"{"kind":"weekly","display":"x"}"#).is_err());
    assert!(serde_json::from_str::<Schedule>(r#"{"kind":"cron","display":"x"}"#).is_err());
}

fn read_stamp(json: &str) -> Result<Stamp, serde_json::Error> {
    serde_json::from_str::<Stamp>(json)
}

#[test]
fn stamps_read_leniently() {
    let readings = [
        (r#""2026-02-03T13:00:00Z""#, "2026-02-03T13:00:00+00:00"),
        (r#""2026-02-03T14:00:00+01:00""#, "2026-02-03T14:00:00+01:00"),
        (r#""2026-02-03T14:00:00.123456+01:00""#, "2026-02-03T14:00:00.123456+01:00"),
        (r#""2026-02-03T08:00:00-05:00""#, "2026-02-03T08:00:00-05:00"),
        // Naive, as in a hand-edited file: UTC.
        (r#""2026-02-03T13:00:00""#, "2026-02-03T13:00:00+00:00"),
        (r#""2026-02-03 13:00:00""#, "2026-02-03T13:00:00+00:00"),
        (r#""2026-02-03T13:00:00.5""#, "2026-02-03T13:00:00.500+00:00"),
    ];
    for (json, rewritten) in readings {
        let stamp = read_stamp(json).unwrap_or_else(|error| panic!("{json}: {error}"));
        assert_eq!(stamp.to_string(), rewritten, "{json}");
    }
    assert_eq!(read_stamp(r#""2026-02-03T14:00:00+01:00""#).unwrap().utc(), utc("2026-02-03T13:00:00Z"));
}

#[test]
fn stamps_refuse_what_is_not_a_timestamp() {
    let error = read_stamp(r#""garbage""#).unwrap_err().to_string();
    assert!(error.contains("invalid timestamp 'garbage'"), "{error}");
    for json in [r#""2026-02-03T25:00:00Z""#, r#""2026-13-01T00:00:00Z""#, r#""2026-02-03T14:00:00+1""#, r#""""#, "5", "null"] {
        assert!(read_stamp(json).is_err(), "{json} was accepted");
    }
}

#[test]
fn a_stamp_in_a_zone_carries_that_zones_offset_at_the_instant() {
    assert_eq!(Stamp::in_zone(utc("2026-02-03T13:00:00Z"), PARIS).to_string(), "2026-02-03T14:00:00+01:00");
    assert_eq!(Stamp::in_zone(utc("2026-07-01T07:00:00Z"), PARIS).to_string(), "2026-07-01T09:00:00+02:00");
    // Same instant, different offsets: still ordered and compared as instants.
    let paris = Stamp::in_zone(utc("2026-02-03T13:00:00Z"), PARIS);
    let new_york = Stamp::in_zone(utc("2026-02-03T13:00:00Z"), NEW_YORK);
    assert_eq!(paris, new_york);
    assert!(Stamp::in_zone(utc("2026-02-03T12:59:00Z"), PARIS) < new_york);
}
