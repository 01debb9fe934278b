//! `gateway_state.json`: the runtime status that `hermes gateway status` reads, rewritten
//! atomically (temp file + rename): the gateway's state and version, each adapter's state, last
//! inbound progress and last error, each MCP server's state, tools and last error, the cron
//! ticker, the queues (with each platform's outbox: messages waiting, the oldest one's age, and
//! dead letters) and the resident memory.
//!
//! Every field added after the first release has a serde default, so a file written by an older
//! gateway still reads.

use crate::cron::status::TickerSnapshot;
use crate::gateway::ops::health::{AdapterRecord, ClusterHealth, HealthSnapshot};
use crate::observe::metrics::Queues;
use crate::store::QueueSummary;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StatusFile {
    pub pid: u32,
    pub kind: String,
    pub argv: Vec<String>,
    pub start_time: DateTime<Utc>,
    /// The gateway's version (`hermes --version`); empty in files from before it was recorded.
    #[serde(default)]
    pub version: String,
    /// `starting`, `running`, `degraded`, `draining` or `stopped`.
    pub gateway_state: String,
    #[serde(default)]
    pub exit_reason: Option<String>,
    pub active_turns: usize,
    /// Per platform: `state`, `detail`, `attempts`, `updated_at`, and (newer files)
    /// `last_progress_at`, `last_error`, `last_error_at`, `restarts`.
    pub platforms: serde_json::Value,
    #[serde(default)]
    pub listeners: serde_json::Value,
    /// Each configured MCP server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp: Vec<McpStatus>,
    /// The cron ticker, when this gateway runs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<CronStatus>,
    /// Sessions with a live actor.
    #[serde(default)]
    pub active_sessions: u64,
    /// Command approvals waiting for a person.
    #[serde(default)]
    pub pending_approvals: u64,
    /// Accepted inbound events not finished yet.
    #[serde(default)]
    pub inbox_depth: u64,
    /// Outbound messages being sent.
    #[serde(default)]
    pub outbox_depth: u64,
    /// Each platform's outbox with messages waiting or given up (none listed: nothing waits).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outbox: Vec<OutboxQueueStatus>,
    /// Resident memory of the gateway process, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// With a store shared by replicas: this replica, its store, and who holds each connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterHealth>,
    /// Events parked because processing them crashed, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub poisoned: Vec<ParkedEvent>,
    pub updated_at: DateTime<Utc>,
}

/// An inbox event that is never replayed, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ParkedEvent {
    pub event_id: String,
    pub platform: String,
    pub reason: String,
    pub received_at: DateTime<Utc>,
}

/// One MCP server as the status file keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct McpStatus {
    pub name: String,
    /// `disabled`, `connecting`, `connected` or `down`.
    pub state: String,
    pub tools: usize,
    pub last_error: Option<String>,
}

/// One platform's outbox queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct OutboxQueueStatus {
    pub platform: String,
    /// Messages waiting to be delivered.
    pub pending: u64,
    /// Dead letters (`hermes outbox list`).
    pub dead: u64,
    /// When the oldest waiting message was queued.
    pub oldest_pending_at: Option<DateTime<Utc>>,
}

/// The cron ticker as the status file keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct CronStatus {
    /// `starting`, `firing` or `failing`.
    pub state: String,
    pub last_tick: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// Runs in progress.
    pub running: u32,
    /// Times the ticker task was restarted after dying.
    pub restarts: u32,
}

impl From<TickerSnapshot> for CronStatus {
    fn from(t: TickerSnapshot) -> Self {
        CronStatus { state: t.state, last_tick: t.last_tick, last_error: t.last_error, running: t.running, restarts: t.restarts }
    }
}

impl StatusFile {
    pub(crate) fn new(start_time: DateTime<Utc>) -> Self {
        Self {
            pid: std::process::id(),
            kind: "hermes-gateway".into(),
            argv: std::env::args().collect(),
            start_time,
            version: env!("CARGO_PKG_VERSION").into(),
            gateway_state: "starting".into(),
            exit_reason: None,
            active_turns: 0,
            platforms: serde_json::json!({}),
            listeners: serde_json::json!({}),
            mcp: Vec::new(),
            cron: None,
            active_sessions: 0,
            pending_approvals: 0,
            inbox_depth: 0,
            outbox_depth: 0,
            outbox: Vec::new(),
            rss_bytes: None,
            cluster: None,
            poisoned: Vec::new(),
            updated_at: Utc::now(),
        }
    }

    pub(crate) fn apply(&mut self, snapshot: &HealthSnapshot, active_turns: usize) {
        self.gateway_state = snapshot.gateway.to_string();
        self.active_turns = active_turns;
        self.platforms = snapshot
            .adapters
            .iter()
            .map(|a| {
                (
                    a.platform.clone(),
                    serde_json::json!({ "state": a.state, "detail": a.detail, "attempts": a.attempts, "updated_at": a.since }),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into();
        self.mcp = snapshot
            .mcp
            .iter()
            .map(|m| McpStatus { name: m.name.clone(), state: m.state.into(), tools: m.tools, last_error: m.last_error.clone() })
            .collect();
        self.cluster = snapshot.cluster.clone();
        self.rss_bytes = crate::observe::metrics::resident_memory_bytes();
        self.updated_at = Utc::now();
    }

    /// Add each adapter's last progress, last error and restarts to its entry.
    pub(crate) fn apply_records(&mut self, records: &[AdapterRecord]) {
        let Some(platforms) = self.platforms.as_object_mut() else { return };
        for record in records {
            if let Some(entry) = platforms.get_mut(&record.platform).and_then(|e| e.as_object_mut()) {
                entry.insert("last_progress_at".into(), serde_json::json!(record.last_progress_at));
                entry.insert("last_error".into(), serde_json::json!(record.last_error));
                entry.insert("last_error_at".into(), serde_json::json!(record.last_error_at));
                entry.insert("restarts".into(), serde_json::json!(record.restarts));
            }
        }
    }

    pub(crate) fn apply_queues(&mut self, queues: Queues) {
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        self.active_sessions = count(queues.sessions_active);
        self.pending_approvals = count(queues.approvals_pending);
        self.inbox_depth = count(queues.inbox_depth);
        self.outbox_depth = count(queues.outbox_depth);
    }

    /// Keep the outbox's queues that have anything waiting or given up.
    pub(crate) fn apply_outbox(&mut self, summary: &[QueueSummary]) {
        self.outbox = summary
            .iter()
            .filter(|q| q.pending > 0 || q.dead > 0)
            .map(|q| OutboxQueueStatus {
                platform: q.platform.clone(),
                pending: q.pending,
                dead: q.dead,
                oldest_pending_at: q.oldest_pending_at.and_then(DateTime::from_timestamp_millis),
            })
            .collect();
    }

    pub(crate) fn write(&self, path: &Path) -> std::io::Result<()> {
        crate::fs_atomic::write(path, &serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)
    }

    /// What `hermes gateway status` shows of this file: the gateway's state, version and uptime,
    /// each platform, the cron ticker, the queues and memory, and the events parked for good.
    /// `alive` says whether the recorded pid still runs; when it does not, the recorded states
    /// are stale and only the last exit and parked events are shown.
    pub(crate) fn health_lines(&self, alive: bool) -> Vec<String> {
        self.health_lines_at(alive, Utc::now())
    }

    /// [`Self::health_lines`] as seen at `now`.
    pub(crate) fn health_lines_at(&self, alive: bool, now: DateTime<Utc>) -> Vec<String> {
        let mut lines = Vec::new();
        let state = if alive { self.gateway_state.as_str() } else { "stopped" };
        let version = if self.version.is_empty() { String::new() } else { format!("version {}, ", self.version) };
        let started = self.start_time.format("%Y-%m-%d %H:%M:%S UTC");
        match alive {
            true => {
                lines.push(format!("gateway: {state} ({version}pid {}, started {started}, up {})", self.pid, ago(self.start_time, now)))
            }
            false => lines.push(format!("gateway: {state} ({version}pid {}, started {started})", self.pid)),
        }
        if let Some(reason) = &self.exit_reason {
            lines.push(format!("last exit: {reason}"));
        }
        if alive {
            lines.push(format!(
                "active turns: {}, sessions: {}, pending approvals: {}",
                self.active_turns, self.active_sessions, self.pending_approvals
            ));
            let mut queues = format!("inbox: {} unfinished, outbox: {} sending", self.inbox_depth, self.outbox_depth);
            if let Some(rss) = self.rss_bytes {
                queues.push_str(&format!(", memory: {:.1} MB", rss as f64 / (1024.0 * 1024.0)));
            }
            lines.push(queues);
            lines.extend(self.listeners_line());
            if let Some(outbox) = self.outbox_line(now) {
                lines.push(outbox);
            }
            self.platform_lines(now, &mut lines);
            lines.extend(self.cluster.iter().flat_map(|c| c.lines(now)));
            self.mcp_lines(&mut lines);
            if let Some(cron) = &self.cron {
                lines.push(cron_line(cron, now));
            }
            lines.push(format!("updated: {}", self.updated_at.format("%Y-%m-%d %H:%M:%S UTC")));
        }
        self.parked_lines(&mut lines);
        lines
    }

    /// "outbox queues: telegram 3 waiting (oldest 4m 0s), 1 undelivered; …", with where to act on
    /// the undelivered ones; `None` when nothing waits.
    fn outbox_line(&self, now: DateTime<Utc>) -> Option<String> {
        if self.outbox.is_empty() {
            return None;
        }
        let queues: Vec<String> = self
            .outbox
            .iter()
            .map(|q| {
                let mut parts = Vec::new();
                if q.pending > 0 {
                    let oldest = q.oldest_pending_at.map(|at| format!(" (oldest {})", ago(at, now))).unwrap_or_default();
                    parts.push(format!("{} waiting{oldest}", q.pending));
                }
                if q.dead > 0 {
                    parts.push(format!("{} undelivered", q.dead));
                }
                format!("{} {}", q.platform, parts.join(", "))
            })
            .collect();
        let mut line = format!("outbox queues: {}", queues.join("; "));
        if self.outbox.iter().any(|q| q.dead > 0) {
            line.push_str(" (see `hermes outbox list`)");
        }
        Some(line)
    }

    fn platform_lines(&self, now: DateTime<Utc>, lines: &mut Vec<String>) {
        let Some(platforms) = self.platforms.as_object() else { return };
        if !platforms.is_empty() {
            lines.push("platforms:".into());
        }
        for (name, p) in platforms {
            let text = |key: &str| p.get(key).and_then(|v| v.as_str());
            let time = |key: &str| text(key).and_then(|t| t.parse::<DateTime<Utc>>().ok());
            let mut line = format!("  {name}: {}", text("state").unwrap_or("unknown"));
            if let Some(detail) = text("detail") {
                line.push_str(&format!(" — {detail}"));
            }
            match time("last_progress_at") {
                Some(at) => line.push_str(&format!("; last inbound progress {} ago", ago(at, now))),
                None if p.get("last_progress_at").is_some() => line.push_str("; no inbound progress yet"),
                None => {}
            }
            if let Some(restarts) = p.get("restarts").and_then(|v| v.as_u64()).filter(|r| *r > 0) {
                line.push_str(&format!("; restarted {restarts}×"));
            }
            lines.push(line);
            if let Some(error) = text("last_error") {
                let when = time("last_error_at").map(|at| format!(" ({} ago)", ago(at, now))).unwrap_or_default();
                lines.push(format!("    last error{when}: {error}"));
            }
        }
    }

    /// "listening: admin 127.0.0.1:8643, mcp 127.0.0.1:8645" (the admin listener and the MCP
    /// server, when they run); `None` when neither does.
    fn listeners_line(&self) -> Option<String> {
        let listeners = self.listeners.as_object().filter(|l| !l.is_empty())?;
        let named: Vec<String> = listeners.iter().map(|(name, at)| format!("{name} {}", at.as_str().unwrap_or("?"))).collect();
        Some(format!("listening: {}", named.join(", ")))
    }

    /// "mcp servers:" then one line each: "  github: connected, 12 tool(s)", the last error under
    /// a server that is not connected.
    fn mcp_lines(&self, lines: &mut Vec<String>) {
        if self.mcp.is_empty() {
            return;
        }
        lines.push("mcp servers:".into());
        for server in &self.mcp {
            lines.push(format!("  {}: {}, {} tool(s)", server.name, server.state, server.tools));
            if let (Some(error), false) = (&server.last_error, server.state == "connected") {
                lines.push(format!("    last error: {error}"));
            }
        }
    }

    fn parked_lines(&self, lines: &mut Vec<String>) {
        if self.poisoned.is_empty() {
            return;
        }
        lines.push(format!("parked events (never replayed; processing them crashed): {}", self.poisoned.len()));
        for parked in &self.poisoned {
            lines.push(format!(
                "  {} ({}, received {}): {}",
                parked.event_id,
                parked.platform,
                parked.received_at.format("%Y-%m-%d %H:%M:%S UTC"),
                parked.reason
            ));
        }
    }

    pub(crate) fn read(path: &Path) -> std::io::Result<StatusFile> {
        let bytes = std::fs::read(path)?;
        serde_json::from_slice(&bytes).map_err(std::io::Error::other)
    }
}

fn cron_line(cron: &CronStatus, now: DateTime<Utc>) -> String {
    let mut line = format!("cron ticker: {}", if cron.state.is_empty() { "starting" } else { cron.state.as_str() });
    if let Some(tick) = cron.last_tick {
        line.push_str(&format!(", last tick {} ago", ago(tick, now)));
    }
    if cron.running > 0 {
        line.push_str(&format!(", {} running", cron.running));
    }
    if cron.restarts > 0 {
        line.push_str(&format!(", restarted {}×", cron.restarts));
    }
    if let (Some(error), "failing") = (&cron.last_error, cron.state.as_str()) {
        line.push_str(&format!(": {error}"));
    }
    line
}

/// A duration for people: `42s`, `5m 3s`, `2h 10m`, `3d 4h`.
fn ago(then: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (now - then).num_seconds().max(0);
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().expect("a test timestamp")
    }

    #[test]
    fn a_file_from_an_older_gateway_still_reads_and_shows() {
        let old = r#"{"pid": 4242, "kind": "hermes-gateway", "argv": ["hermes"], "start_time": "2026-11-01T10:00:00Z",
            "gateway_state": "running", "active_turns": 1,
            "platforms": {"telegram": {"state": "connected", "detail": null, "attempts": 0, "updated_at": "2026-11-01T10:00:01Z"}},
            "listeners": {}, "updated_at": "2026-11-01T10:05:00Z"}"#;
        let status: StatusFile = serde_json::from_str(old).expect("an old status file reads");
        let lines = status.health_lines_at(true, at("2026-11-01T12:30:00Z"));
        assert!(lines[0].starts_with("gateway: running (pid 4242") && lines[0].contains("up 2h 30m"), "{lines:#?}");
        assert!(lines.iter().any(|l| l == "  telegram: connected"), "{lines:#?}");
        assert!(lines.iter().all(|l| !l.contains("cron")), "no ticker recorded, none shown: {lines:#?}");
        assert!(lines.iter().all(|l| !l.contains("outbox queues")), "no outbox recorded, none shown: {lines:#?}");
    }

    #[test]
    fn status_lines_show_progress_errors_the_ticker_and_the_queues() {
        let mut status = StatusFile::new(at("2026-11-01T10:00:00Z"));
        status.gateway_state = "degraded".into();
        status.platforms = serde_json::json!({
            "telegram": {"state": "backing_off", "detail": "getUpdates failed: timed out", "attempts": 2,
                         "last_progress_at": "2026-11-01T11:59:00Z", "last_error": "getUpdates failed: timed out",
                         "last_error_at": "2026-11-01T11:59:50Z", "restarts": 2},
            "discord": {"state": "connected", "last_progress_at": null, "restarts": 0}
        });
        status.cron = Some(CronStatus { state: "firing".into(), last_tick: Some(at("2026-11-01T11:59:30Z")), ..Default::default() });
        status.apply_queues(Queues { inbox_depth: 3, outbox_depth: 1, sessions_active: 7, approvals_pending: 2 });
        status.rss_bytes = Some(12 * 1024 * 1024);
        let back: StatusFile = serde_json::from_slice(&serde_json::to_vec(&status).unwrap()).expect("round trip");
        let lines = back.health_lines_at(true, at("2026-11-01T12:00:00Z"));
        let text = lines.join("\n");
        assert!(lines[0].contains(&format!("version {}", env!("CARGO_PKG_VERSION"))) && lines[0].contains("up 2h 0m"), "{text}");
        assert!(text.contains("sessions: 7, pending approvals: 2"), "{text}");
        assert!(text.contains("inbox: 3 unfinished, outbox: 1 sending, memory: 12.0 MB"), "{text}");
        assert!(
            text.contains("telegram: backing_off — getUpdates failed: timed out; last inbound progress 1m 0s ago; restarted 2×"),
            "{text}"
        );
        assert!(text.contains("last error (10s ago): getUpdates failed: timed out"), "{text}");
        assert!(text.contains("discord: connected; no inbound progress yet"), "{text}");
        assert!(text.contains("cron ticker: firing, last tick 30s ago"), "{text}");
        assert!(!text.contains("outbox queues"), "nothing waits, nothing said: {text}");
        let stopped = back.health_lines_at(false, at("2026-11-01T12:00:00Z"));
        assert_eq!(stopped.len(), 1, "a dead gateway's states are not shown: {stopped:#?}");
    }

    #[test]
    fn the_outbox_queues_are_kept_and_shown_per_platform_when_anything_waits() {
        let now = at("2026-11-01T12:00:00Z");
        let mut status = StatusFile::new(at("2026-11-01T10:00:00Z"));
        status.gateway_state = "running".into();
        let four_min_ago = now.timestamp_millis() - 4 * 60_000;
        status.apply_outbox(&[
            QueueSummary { platform: "discord".into(), pending: 0, dead: 1, oldest_pending_at: None },
            QueueSummary { platform: "slack".into(), ..Default::default() },
            QueueSummary { platform: "telegram".into(), pending: 3, dead: 0, oldest_pending_at: Some(four_min_ago) },
        ]);
        assert_eq!(status.outbox.len(), 2, "an empty queue is not kept: {:?}", status.outbox);
        let back: StatusFile = serde_json::from_slice(&serde_json::to_vec(&status).unwrap()).expect("round trip");
        let text = back.health_lines_at(true, now).join("\n");
        assert!(
            text.contains("outbox queues: discord 1 undelivered; telegram 3 waiting (oldest 4m 0s) (see `hermes outbox list`)"),
            "{text}"
        );
        status.apply_outbox(&[QueueSummary { platform: "telegram".into(), pending: 1, dead: 0, oldest_pending_at: Some(four_min_ago) }]);
        let text = status.health_lines_at(true, now).join("\n");
        assert!(text.contains("outbox queues: telegram 1 waiting (oldest 4m 0s)\n"), "no hint without dead letters: {text}");
    }

    #[test]
    fn mcp_servers_are_kept_and_shown_with_their_tools_and_last_error() {
        let now = at("2026-11-01T12:00:00Z");
        let mut status = StatusFile::new(at("2026-11-01T10:00:00Z"));
        status.gateway_state = "running".into();
        status.mcp = vec![
            McpStatus { name: "everything".into(), state: "connected".into(), tools: 13, last_error: None },
            McpStatus { name: "github".into(), state: "down".into(), tools: 4, last_error: Some("connection refused".into()) },
        ];
        let back: StatusFile = serde_json::from_slice(&serde_json::to_vec(&status).unwrap()).expect("round trip");
        let text = back.health_lines_at(true, now).join("\n");
        assert!(
            text.contains(
                "mcp servers:\n  everything: connected, 13 tool(s)\n  github: down, 4 tool(s)\n    last error: connection refused"
            ),
            "{text}"
        );
        status.mcp.clear();
        assert!(!status.health_lines_at(true, now).join("\n").contains("mcp"), "no server, no section");
        status.listeners = serde_json::json!({"admin": "127.0.0.1:8643", "mcp": "127.0.0.1:8645"});
        let text = status.health_lines_at(true, now).join("\n");
        assert!(text.contains("listening: admin 127.0.0.1:8643, mcp 127.0.0.1:8645"), "where to reach the MCP server: {text}");
    }
}
