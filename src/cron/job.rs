//! One cron job as Hermes stores it in `cron/jobs.json` (§7.1): the record's fields, read leniently
//! so that a file written by Hermes loads as it is (a legacy single `skill`, chat ids written as
//! numbers, `repeat` counts written as strings, states we do not know, nulls where a value is
//! expected), every field we do not model kept verbatim in [`Job::extra`] so a rewrite loses
//! nothing, and the questions asked of one job (is it runnable, is it due, whose is it).
//!
//! The file, its lock and the scheduling decisions over all jobs belong to [`super::store`]; the
//! schedule grammar and time arithmetic to [`super::schedule`].

use super::schedule::{InvalidSchedule, Schedule, ScheduleError, Stamp, Zone};
use chrono::{DateTime, Utc};
use hermes_adapter::SessionSource;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

/// How many characters of the prompt name a job created without a name (Hermes' rule).
const NAME_FROM_PROMPT_CHARS: usize = 50;

/// A claim stamped up to this far in the future still counts as live: two processes take their
/// `now` a moment apart, and the later claim must not look stale to the earlier clock. Further
/// in the future it is a clock or zone error, and counts as stale so it cannot wedge the job.
const CLAIM_CLOCK_SKEW_SECS: i64 = 300;

/// One job record. Field names and shapes are Hermes'; see the module doc for what is lenient.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// 12 lowercase hex characters for jobs created here ([`Job::new_id`]); any safe file name is
    /// accepted from the file, since the id names the job's output folder.
    pub id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub prompt: String,
    /// Skills loaded into the prompt, in order. A legacy single `skill` is folded in on load and
    /// written back as the first skill, as Hermes does.
    #[serde(default, deserialize_with = "skill_list")]
    pub skills: Vec<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub script: Option<String>,
    #[serde(default, deserialize_with = "truthy")]
    pub no_agent: bool,
    pub schedule: Schedule,
    #[serde(default, deserialize_with = "null_as_default")]
    pub schedule_display: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub repeat: Repeat,
    #[serde(default = "absent_means_enabled", deserialize_with = "truthy")]
    pub enabled: bool,
    #[serde(default)]
    pub state: JobState,
    #[serde(default)]
    pub paused_at: Option<Stamp>,
    #[serde(default)]
    pub paused_reason: Option<String>,
    #[serde(default)]
    pub created_at: Option<Stamp>,
    #[serde(default)]
    pub next_run_at: Option<Stamp>,
    #[serde(default)]
    pub last_run_at: Option<Stamp>,
    /// "ok" or "error" (Hermes may also have written others, such as "delivery_failed").
    #[serde(default)]
    pub last_status: Option<String>,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub last_delivery_error: Option<String>,
    /// Where results go (`local`, `origin`, …; see `cron::delivery`). Empty = `origin` when the
    /// job has one, else `local`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub deliver: String,
    #[serde(default)]
    pub origin: Option<Origin>,
    #[serde(default)]
    pub enabled_toolsets: Option<Vec<String>>,
    #[serde(default)]
    pub workdir: Option<String>,
    /// Absent means "follow `cron.mirror_delivery`"; Hermes writes the key only when it is set,
    /// so an absent key stays absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach_to_session: Option<bool>,
    /// Who is running the job now. Hermes writes `{"at", "by"}` and so do we (plus `occurrence`),
    /// so either side sees the other's claim. A claim that cannot be read counts as none (Hermes
    /// treats it as stale too).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient_claim")]
    pub run_claim: Option<RunClaim>,
    /// Every field Hermes writes that is not modelled above (`model_snapshot`, `context_from`,
    /// `fire_claim`, …), written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn absent_means_enabled() -> bool {
    true
}

/// How many times a job runs: `times: None` = forever (Hermes writes `null`; 0 and negative
/// values written by older versions mean forever too), `completed` = runs so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Repeat {
    #[serde(default, deserialize_with = "repeat_times")]
    pub times: Option<u32>,
    #[serde(default, deserialize_with = "run_count")]
    pub completed: u32,
}

impl Repeat {
    /// Hermes' default: a one-shot runs once, a recurring job forever.
    pub fn default_for(schedule: &Schedule) -> Repeat {
        Repeat { times: if schedule.is_recurring() { None } else { Some(1) }, completed: 0 }
    }

    /// Whether the job has run as many times as it was asked to.
    pub fn is_exhausted(&self) -> bool {
        self.times.is_some_and(|times| self.completed >= times)
    }
}

/// The job's lifecycle state. A state this version does not know is kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum JobState {
    #[default]
    Scheduled,
    Paused,
    Completed,
    Error,
    Running,
    Other(String),
}

impl JobState {
    pub fn as_str(&self) -> &str {
        match self {
            JobState::Scheduled => "scheduled",
            JobState::Paused => "paused",
            JobState::Completed => "completed",
            JobState::Error => "error",
            JobState::Running => "running",
            JobState::Other(name) => name,
        }
    }

    fn from_name(name: &str) -> JobState {
        match name {
            "" | "scheduled" => JobState::Scheduled,
            "paused" => JobState::Paused,
            "completed" => JobState::Completed,
            "error" => JobState::Error,
            "running" => JobState::Running,
            other => JobState::Other(other.to_string()),
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for JobState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for JobState {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(deserializer)? {
            Value::Null => JobState::Scheduled,
            Value::String(name) => JobState::from_name(&name),
            other => JobState::Other(other.to_string()),
        })
    }
}

/// The chat that created the job (Hermes' `SessionSource` dict). Ids may have been written as
/// JSON numbers; they are read as their decimal text. Fields not modelled stay in `extra`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Origin {
    #[serde(default, deserialize_with = "id_text")]
    pub platform: String,
    #[serde(default, deserialize_with = "id_text")]
    pub chat_id: String,
    #[serde(default, deserialize_with = "optional_id_text", skip_serializing_if = "Option::is_none")]
    pub chat_name: Option<String>,
    #[serde(default, deserialize_with = "optional_id_text", skip_serializing_if = "Option::is_none")]
    pub chat_type: Option<String>,
    #[serde(default, deserialize_with = "optional_id_text", skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, deserialize_with = "optional_id_text", skip_serializing_if = "Option::is_none")]
    pub user_name: Option<String>,
    #[serde(default, deserialize_with = "optional_id_text", skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Origin {
    pub fn new(platform: &str, chat_id: &str, thread_id: Option<String>) -> Origin {
        Origin { platform: platform.to_string(), chat_id: chat_id.to_string(), thread_id, ..Origin::default() }
    }

    /// The chat a message came from and its sender, as Hermes stores a job's origin (its
    /// `user_name` is the sender's display name; the second id, the guild and the bot flag go
    /// under Hermes' key names).
    pub fn from_source(source: &SessionSource) -> Origin {
        let mut extra = Map::new();
        // The verified handle too: an allowlist may name the owner by it, and a job's owner is
        // checked against the allowlist again at each run (see `super::owner`).
        let keys = [("user_id_alt", &source.user_id_alt), ("scope_id", &source.scope_id), ("user_handle", &source.user_handle)];
        for (key, value) in keys {
            if let Some(value) = value {
                extra.insert(key.into(), Value::String(value.clone()));
            }
        }
        if source.is_bot {
            extra.insert("is_bot".into(), Value::Bool(true));
        }
        Origin {
            platform: source.platform.as_str().to_string(),
            chat_id: source.chat_id.clone(),
            chat_name: source.chat_name.clone(),
            chat_type: Some(source.chat_type.as_str().to_string()),
            user_id: source.user_id.clone(),
            user_name: source.user_display_name.clone(),
            thread_id: source.thread_id.clone(),
            extra,
        }
    }
}

/// A durable claim on one run of a job, taken before the run starts and cleared when it is
/// recorded: while it is live no scheduler (in any process) starts the job again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunClaim {
    /// `<host or pid>:<uuid>`; opaque, for diagnostics.
    #[serde(rename = "by", alias = "owner")]
    pub owner: String,
    #[serde(rename = "at", alias = "claimed_at")]
    pub claimed_at: Stamp,
    /// The scheduled time being run. Hermes' claims have none (they only claim one-shots, which
    /// have a single occurrence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurrence: Option<Stamp>,
}

impl RunClaim {
    /// Taken less than `ttl` ago (or stamped slightly ahead of `now`, see
    /// [`CLAIM_CLOCK_SKEW_SECS`]): the run is presumably still going.
    pub fn is_live(&self, now: DateTime<Utc>, ttl: chrono::Duration) -> bool {
        let age = now - self.claimed_at.utc();
        age >= -chrono::Duration::seconds(CLAIM_CLOCK_SKEW_SECS).min(ttl) && age < ttl
    }

    /// Taken `ttl` or more ago: whoever took it stopped without recording the run.
    pub fn is_expired(&self, now: DateTime<Utc>, ttl: chrono::Duration) -> bool {
        now - self.claimed_at.utc() >= ttl
    }

    /// The owner this process stamps on its claims: `<host>:<pid>:<uuid>`, the uuid drawn once per
    /// process, so that a later process given the same pid (a container's pid 1) is not taken
    /// for this one.
    pub fn owner_for_this_process() -> String {
        static OWNER: OnceLock<String> = OnceLock::new();
        OWNER.get_or_init(|| format!("{}:{}:{}", host_name(), std::process::id(), uuid::Uuid::new_v4().simple())).clone()
    }

    /// Whether the owner is a process of this machine that is provably gone (read from our
    /// `host:pid:uuid` and Hermes' `host:pid`): its claim then stops counting at once instead of
    /// after the TTL, so a restart does not wait out the claims of the process it replaced.
    /// Whatever cannot be proven (another host, an opaque owner, no `/proc`) counts as alive.
    pub fn owner_is_gone(&self) -> bool {
        let mut parts = self.owner.splitn(3, ':');
        let (Some(host), Some(pid)) = (parts.next(), parts.next().and_then(|pid| pid.parse::<u32>().ok())) else { return false };
        if host != host_name() {
            return false;
        }
        if pid == std::process::id() {
            // Two live processes cannot share a pid: under another owner it was an earlier one.
            return self.owner != RunClaim::owner_for_this_process();
        }
        Path::new("/proc/self").exists() && !Path::new("/proc").join(pid.to_string()).exists()
    }

    /// Whether this claim is on the run scheduled at `occurrence` (a claim without an occurrence,
    /// as Hermes writes them, is on whichever run is pending).
    pub fn is_for(&self, occurrence: DateTime<Utc>) -> bool {
        self.occurrence.is_none_or(|claimed| claimed.utc() == occurrence)
    }
}

impl Job {
    /// A fresh id: 12 lowercase hex characters, as Hermes makes them.
    pub fn new_id() -> String {
        uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
    }

    /// A record with Hermes' defaults (a one-shot runs once, a recurring job forever; enabled;
    /// `deliver` empty = the origin when there is one, else local) and no times set: see
    /// [`Job::planned`] for one ready to store.
    pub fn new(id: String, name: String, prompt: String, schedule: Schedule) -> Job {
        Job {
            id,
            name,
            prompt,
            skills: Vec::new(),
            model: None,
            provider: None,
            base_url: None,
            script: None,
            no_agent: false,
            schedule_display: schedule.display.clone(),
            repeat: Repeat::default_for(&schedule),
            schedule,
            enabled: true,
            state: JobState::Scheduled,
            paused_at: None,
            paused_reason: None,
            created_at: None,
            next_run_at: None,
            last_run_at: None,
            last_status: None,
            last_error: None,
            last_delivery_error: None,
            deliver: String::new(),
            origin: None,
            enabled_toolsets: None,
            workdir: None,
            attach_to_session: None,
            run_claim: None,
            extra: Map::new(),
        }
    }

    /// A new job created at `now` with a fresh id and its first run computed; without a name it
    /// is named after the start of its prompt. A one-shot more than 120 s in the past is
    /// refused, as is a schedule that never runs.
    pub fn planned(name: &str, prompt: &str, schedule: Schedule, now: DateTime<Utc>, zone: Zone) -> Result<Job, ScheduleError> {
        if schedule.is_past(now) {
            return Err(ScheduleError::Past { input: schedule.display.clone() });
        }
        let first_run = schedule.first_run(now, zone).ok_or_else(|| never_runs(&schedule, zone))?;
        let name = match name.trim() {
            "" => name_from_prompt(prompt),
            given => given.to_string(),
        };
        let mut job = Job::new(Job::new_id(), name, prompt.to_string(), schedule);
        job.created_at = Some(Stamp::in_zone(now, zone));
        job.next_run_at = Some(Stamp::in_zone(first_run, zone));
        Ok(job)
    }

    #[cfg(test)]
    pub(crate) fn for_tests(id: &str, name: &str) -> Job {
        let schedule = Schedule { kind: super::schedule::ScheduleKind::Interval { minutes: 60 }, display: "every 60m".into() };
        Job::new(id.to_string(), name.to_string(), String::new(), schedule)
    }

    /// Reads one record of `jobs.json`; the error says what is wrong with it.
    pub fn from_record(record: &Value) -> Result<Job, RecordError> {
        let Value::Object(fields) = record else { return Err(RecordError::NotAnObject) };
        match fields.get("id") {
            Some(Value::String(id)) => check_id(id)?,
            Some(Value::Null) | None => return Err(RecordError::NoId),
            Some(other) => return Err(RecordError::IdNotAString { found: other.clone() }),
        }
        if !fields.get("schedule").is_some_and(Value::is_object) {
            return Err(RecordError::ScheduleNotAnObject);
        }
        let job = match legacy_skills(fields) {
            // Read from the record in place: a file of ten thousand jobs is read at every tick.
            None => Job::deserialize(record),
            Some(skills) => {
                let mut fields = fields.clone();
                fields.insert("skills".into(), skills);
                Job::deserialize(&Value::Object(fields))
            }
        };
        let mut job = job.map_err(RecordError::Fields)?;
        // Written back from `skills` by `to_record`, so an edit of the skills cannot leave it stale.
        job.extra.remove("skill");
        Ok(job)
    }

    /// The record as written to `jobs.json`, with Hermes' legacy `skill` kept in step.
    pub fn to_record(&self) -> Result<Value, serde_json::Error> {
        let mut record = serde_json::to_value(self)?;
        if let Value::Object(fields) = &mut record {
            fields.insert("skill".into(), self.skills.first().map_or(Value::Null, |s| Value::String(s.clone())));
        }
        Ok(record)
    }

    /// Whether a scheduler may start this job at all: enabled, not paused, not finished. A
    /// recurring job in `error` stays runnable (it is never silently disabled); a one-shot in
    /// `error` is finished.
    pub fn is_runnable(&self) -> bool {
        let finished = match self.state {
            JobState::Paused | JobState::Completed => true,
            JobState::Error => !self.schedule.is_recurring(),
            _ => false,
        };
        // Hermes also treats a pause stamp as a pause, so a half-paused record never fires.
        self.enabled && self.paused_at.is_none() && !finished
    }

    /// A one-shot that has run (kept because it may run more than once) or was completed by
    /// Hermes: listings hide it unless asked for everything.
    pub fn is_completed(&self) -> bool {
        self.state == JobState::Completed
    }

    /// Runnable and its next run has come (whether another process is running it is the store's
    /// question: see the run claim).
    pub fn is_due(&self, now: DateTime<Utc>) -> bool {
        self.is_runnable() && self.next_run_at.is_some_and(|next| next.utc() <= now)
    }

    /// Whether the job was created by this user on this platform.
    pub fn owned_by(&self, platform: &str, user_id: &str) -> bool {
        self.origin.as_ref().is_some_and(|o| o.platform.eq_ignore_ascii_case(platform) && o.user_id.as_deref() == Some(user_id))
    }

    /// The ids of the jobs whose latest output this job reads (Hermes' `context_from`: one id or
    /// a list).
    pub fn context_from(&self) -> Vec<String> {
        let ids = match self.extra.get("context_from") {
            Some(Value::String(id)) => vec![id.clone()],
            Some(Value::Array(items)) => items.iter().filter_map(scalar_text).collect(),
            _ => Vec::new(),
        };
        ids.into_iter().map(|id| id.trim().to_string()).filter(|id| !id.is_empty()).collect()
    }

    /// Gives the job a new schedule at `now`: refused for a one-shot more than 120 s in the past
    /// or a schedule that never runs; the display follows, the repeat default follows a change
    /// between one-shot and recurring (as Hermes), and the next run is recomputed unless paused.
    pub fn reschedule(&mut self, schedule: Schedule, now: DateTime<Utc>, zone: Zone) -> Result<(), ScheduleError> {
        if schedule.is_past(now) {
            return Err(ScheduleError::Past { input: schedule.display.clone() });
        }
        let first_run = schedule.first_run(now, zone).ok_or_else(|| never_runs(&schedule, zone))?;
        match (self.schedule.is_recurring(), schedule.is_recurring(), self.repeat.times) {
            (true, false, None) => self.repeat.times = Some(1),
            (false, true, Some(1)) => self.repeat.times = None,
            _ => {}
        }
        self.schedule_display = schedule.display.clone();
        self.schedule = schedule;
        if self.state != JobState::Paused {
            self.next_run_at = Some(Stamp::in_zone(first_run, zone));
        }
        Ok(())
    }
}

/// A name for a job created without one: the start of its prompt, on one line ("job" when the
/// prompt is empty, as a script-only job's may be).
fn name_from_prompt(prompt: &str) -> String {
    let one_line = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    let name: String = one_line.chars().take(NAME_FROM_PROMPT_CHARS).collect();
    if name.is_empty() { "job".to_string() } else { name.trim_end().to_string() }
}

/// This machine's name as claims record it (no `:`, which separates the owner's parts).
fn host_name() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        let named = std::fs::read_to_string("/proc/sys/kernel/hostname").ok().or_else(|| std::env::var("HOSTNAME").ok());
        named.map(|name| name.trim().replace(':', "_")).filter(|name| !name.is_empty()).unwrap_or_else(|| "localhost".into())
    })
}

fn never_runs(schedule: &Schedule, zone: Zone) -> ScheduleError {
    ScheduleError::Invalid { input: schedule.display.clone(), reason: InvalidSchedule::NeverRuns, zone: zone.describe() }
}

/// What is wrong with one record of `jobs.json` (or with a new job's id).
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("the record is not an object")]
    NotAnObject,
    #[error("it has no id")]
    NoId,
    #[error("its id {found} is not a string")]
    IdNotAString { found: Value },
    #[error("its id is empty")]
    EmptyId,
    #[error("its id '{id}' is not usable as a file name")]
    IdNotAFileName { id: String },
    #[error("its schedule is not an object")]
    ScheduleNotAnObject,
    /// A field of the wrong type or shape; serde's message names it.
    #[error(transparent)]
    Fields(serde_json::Error),
}

/// An id names the job's output folder, so it must be one plain path component.
pub(crate) fn check_id(id: &str) -> Result<(), RecordError> {
    let trimmed = id.trim();
    if trimmed.is_empty() {
        return Err(RecordError::EmptyId);
    }
    if trimmed != id || matches!(id, "." | "..") || id.contains(['/', '\\', '\0']) {
        return Err(RecordError::IdNotAFileName { id: id.to_string() });
    }
    Ok(())
}

/// Hermes reads `skills` when present, else the single `skill`: the list a record without
/// `skills` gets from its `skill`, if it has one.
fn legacy_skills(fields: &Map<String, Value>) -> Option<Value> {
    if fields.get("skills").is_some_and(|s| !s.is_null()) {
        return None;
    }
    match fields.get("skill") {
        Some(Value::String(skill)) if !skill.trim().is_empty() => Some(Value::Array(vec![Value::String(skill.clone())])),
        _ => None,
    }
}

/// A string, or a number written where text was meant (ids), as text.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

fn null_as_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(deserializer: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Python's truthiness, which is what Hermes applies to its flags.
fn truthy<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Null => false,
        Value::Bool(flag) => flag,
        Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(fields) => !fields.is_empty(),
    })
}

/// A list of names or a single name; blanks dropped, duplicates dropped, order kept.
fn skill_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    let items = match Value::deserialize(deserializer)? {
        Value::Null => Vec::new(),
        Value::Array(items) => items,
        single @ Value::String(_) => vec![single],
        other => return Err(serde::de::Error::custom(format!("skills must be a list of names, not {other}"))),
    };
    let mut skills: Vec<String> = Vec::new();
    for name in items.iter().filter_map(scalar_text).map(|name| name.trim().to_string()) {
        if !name.is_empty() && !skills.contains(&name) {
            skills.push(name);
        }
    }
    Ok(skills)
}

fn id_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(optional_id_text(deserializer)?.unwrap_or_default())
}

fn optional_id_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::Null => Ok(None),
        value => scalar_text(&value).map(Some).ok_or_else(|| serde::de::Error::custom(format!("expected text or a number, found {value}"))),
    }
}

/// `null`, a count (0 or less = forever), or one of the words Hermes' `normalize_repeat_value`
/// accepts ("forever", "once", "3", …), which older versions stored as typed.
fn repeat_times<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    let count = match Value::deserialize(deserializer)? {
        Value::Null => return Ok(None),
        Value::Number(number) => number.as_f64(),
        Value::String(word) => match word.trim().to_lowercase().as_str() {
            "forever" | "infinite" | "inf" | "none" | "" => return Ok(None),
            "once" | "one" | "1x" => return Ok(Some(1)),
            digits => digits.parse::<f64>().ok(),
        },
        _ => None,
    };
    let count = count.ok_or_else(|| serde::de::Error::custom("repeat.times must be a number, null, 'forever' or 'once'"))?;
    Ok((count >= 1.0).then(|| count.min(f64::from(u32::MAX)) as u32))
}

fn run_count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    let count = Option::<f64>::deserialize(deserializer)?.unwrap_or(0.0);
    Ok(count.clamp(0.0, f64::from(u32::MAX)) as u32)
}

fn lenient_claim<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<RunClaim>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    if value.is_null() {
        return Ok(None);
    }
    Ok(RunClaim::deserialize(&value)
        .inspect_err(|e| tracing::warn!(claim = %value, error = %e, "ignoring a cron run claim that cannot be read"))
        .ok())
}
