//! Whether the scheduler is alive, as the files in `cron/` tell it to another process
//! (`ticker_heartbeat` every round, `ticker_last_success` after each clean tick,
//! `ticker_last_error` after a failed one, Hermes' names) and as the running gateway holds it
//! ([`TickerHealth`], for `/status` and the status file).

use chrono::{DateTime, Utc};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A heartbeat older than this means no ticker is running (a tick comes at least every minute).
const HEARTBEAT_STALE_SECS: i64 = 150;

/// The marker files.
#[derive(Debug, Clone)]
pub(crate) struct Markers {
    dir: PathBuf,
}

impl Markers {
    pub(crate) fn new(cron_dir: &Path) -> Self {
        Self { dir: cron_dir.to_path_buf() }
    }

    pub(crate) fn heartbeat(&self, at: DateTime<Utc>) {
        self.write("ticker_heartbeat", &at.timestamp().to_string());
    }

    pub(crate) fn success(&self, at: DateTime<Utc>) {
        self.write("ticker_last_success", &at.timestamp().to_string());
    }

    pub(crate) fn failure(&self, at: DateTime<Utc>, error: &str) {
        self.write("ticker_last_error", &format!("{}\n{error}", at.timestamp()));
    }

    fn write(&self, name: &str, text: &str) {
        if let Err(e) = crate::fs_atomic::write_private(&self.dir.join(name), text.as_bytes()) {
            tracing::warn!(error = %e, file = name, "cannot write the cron ticker's marker");
        }
    }

    fn read_time(&self, name: &str) -> Option<DateTime<Utc>> {
        let text = std::fs::read_to_string(self.dir.join(name)).ok()?;
        DateTime::from_timestamp(text.lines().next()?.trim().parse().ok()?, 0)
    }

    fn read_error(&self) -> Option<(DateTime<Utc>, String)> {
        let text = std::fs::read_to_string(self.dir.join("ticker_last_error")).ok()?;
        let (at, error) = text.split_once('\n')?;
        Some((DateTime::from_timestamp(at.trim().parse().ok()?, 0)?, error.to_string()))
    }

    /// What the markers say at `now`.
    pub(crate) fn verdict(&self, now: DateTime<Utc>) -> Verdict {
        let Some(beat) = self.read_time("ticker_heartbeat").filter(|b| (now - *b).num_seconds() <= HEARTBEAT_STALE_SECS) else {
            return Verdict::NoTicker { last_heartbeat: self.read_time("ticker_heartbeat") };
        };
        let success = self.read_time("ticker_last_success");
        match self.read_error() {
            Some((at, error)) if success.is_none_or(|s| at >= s) => Verdict::Failing { since: at, error, last_success: success },
            _ => Verdict::Firing { last_heartbeat: beat, last_success: success },
        }
    }
}

/// The three states `hermes cron status` tells apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    NoTicker { last_heartbeat: Option<DateTime<Utc>> },
    Failing { since: DateTime<Utc>, error: String, last_success: Option<DateTime<Utc>> },
    Firing { last_heartbeat: DateTime<Utc>, last_success: Option<DateTime<Utc>> },
}

impl Verdict {
    pub(crate) fn describe(&self, now: DateTime<Utc>) -> String {
        let ago = |t: DateTime<Utc>| format!("{} s ago", (now - t).num_seconds().max(0));
        match self {
            Verdict::NoTicker { last_heartbeat: None } => {
                "no ticker running: no gateway has ticked here (start it with `hermes gateway run`, or run `hermes cron tick`)".into()
            }
            Verdict::NoTicker { last_heartbeat: Some(t) } => format!(
                "no ticker running: the last heartbeat was {} (is the gateway running? start it with `hermes gateway run`)",
                ago(*t)
            ),
            Verdict::Failing { since, error, .. } => format!("ticker alive but failing since {}: {error}", ago(*since)),
            Verdict::Firing { last_success, .. } => match last_success {
                Some(t) => format!("firing: last clean tick {}", ago(*t)),
                None => "firing".into(),
            },
        }
    }
}

/// The running gateway's view of its ticker.
#[derive(Debug, Default)]
pub struct TickerHealth(Mutex<TickerSnapshot>);

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct TickerSnapshot {
    /// `starting`, `firing`, `failing`.
    pub state: String,
    pub last_tick: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub restarts: u32,
    /// Runs in progress.
    pub running: u32,
    /// Occurrences started since the gateway started.
    pub runs_started: u64,
}

impl TickerHealth {
    fn with(&self, change: impl FnOnce(&mut TickerSnapshot)) {
        change(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()));
    }

    pub fn snapshot(&self) -> TickerSnapshot {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if s.state.is_empty() {
            s.state = "starting".into();
        }
        s
    }

    pub fn ticked(&self, started: usize) {
        self.with(|s| {
            s.state = "firing".into();
            s.last_tick = Some(Utc::now());
            s.runs_started += started as u64;
        });
    }

    pub fn failed(&self, error: String) {
        self.with(|s| {
            s.state = "failing".into();
            s.last_error = Some(error);
        });
    }

    pub fn restarted(&self, why: &str) {
        self.with(|s| {
            s.restarts += 1;
            s.last_error = Some(why.to_string());
        });
    }

    pub fn run_started(&self) {
        self.with(|s| s.running += 1);
    }

    pub fn run_ended(&self) {
        self.with(|s| s.running = s.running.saturating_sub(1));
    }
}

impl TickerSnapshot {
    /// One line for `/status`.
    pub fn line(&self) -> String {
        let mut line = self.state.clone();
        if let Some(t) = self.last_tick {
            line.push_str(&format!(", last tick {}", t.format("%H:%M:%S UTC")));
        }
        if self.running > 0 {
            line.push_str(&format!(", {} running", self.running));
        }
        if self.restarts > 0 {
            line.push_str(&format!(", restarted {} time(s)", self.restarts));
        }
        if let (Some(e), "failing") = (&self.last_error, self.state.as_str()) {
            line.push_str(&format!(": {e}"));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_markers_tell_the_three_states_apart() {
        let dir = tempfile::tempdir().unwrap();
        let markers = Markers::new(dir.path());
        let t0 = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let at = |s: i64| t0 + chrono::Duration::seconds(s);
        assert!(matches!(markers.verdict(t0), Verdict::NoTicker { last_heartbeat: None }));
        markers.heartbeat(at(0));
        markers.success(at(0));
        assert!(matches!(markers.verdict(at(30)), Verdict::Firing { .. }));
        assert!(markers.verdict(at(30)).describe(at(30)).starts_with("firing"));
        markers.heartbeat(at(60));
        markers.failure(at(60), "jobs.json is not JSON");
        let failing = markers.verdict(at(70));
        assert!(matches!(failing, Verdict::Failing { .. }), "{failing:?}");
        assert!(failing.describe(at(70)).contains("alive but failing") && failing.describe(at(70)).contains("not JSON"));
        markers.heartbeat(at(120));
        markers.success(at(120));
        assert!(matches!(markers.verdict(at(130)), Verdict::Firing { .. }), "a clean tick after the failure");
        let stale = markers.verdict(at(120 + HEARTBEAT_STALE_SECS + 1));
        assert!(matches!(stale, Verdict::NoTicker { last_heartbeat: Some(_) }), "{stale:?}");
    }
}
