//! The health board: every adapter's supervised state, read by `/health`, `/readyz`, `/status`,
//! the status file and `hermes gateway status`; beside it, each MCP server's state (read from the
//! [`McpHub`] when asked), shown by the same readers but never part of readiness: a server that is
//! down costs its tools, not the gateway's messages.
//!
//! Ready means: every adapter the gateway starts has registered, each is connected (or paused by
//! an admin), none is draining, and each with a liveness timeout (its
//! [`hermes_adapter::PlatformAdapter::liveness_timeout`]: Telegram's is its long-poll timeout plus
//! 20 s) has made progress within it. After a run that lost its connection, the next run counts
//! only once it has stayed up for that timeout: a Bot API that answers `getMe` but hangs every
//! `getUpdates` would otherwise look ready after each reconnect.

use crate::gateway::ops::lease::tenures::Tenures;
use crate::mcp::{McpHub, ServerStatus};
use chrono::{DateTime, Utc};
use hermes_adapter::HealthReporter;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AdapterState {
    Starting,
    Connected,
    Degraded,
    BackingOff,
    Parked,
    /// Stopped by an admin (`/platform pause`) until resumed.
    Paused,
    /// Another replica holds the connection (a shared store's lease); this one takes it over
    /// when that lease expires.
    Standby,
    Stopped,
}

impl AdapterState {
    /// Every state, for `/metrics` (one series per platform and state).
    pub const ALL: [AdapterState; 8] = [
        AdapterState::Starting,
        AdapterState::Connected,
        AdapterState::Degraded,
        AdapterState::BackingOff,
        AdapterState::Parked,
        AdapterState::Paused,
        AdapterState::Standby,
        AdapterState::Stopped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AdapterState::Starting => "starting",
            AdapterState::Connected => "connected",
            AdapterState::Degraded => "degraded",
            AdapterState::BackingOff => "backing_off",
            AdapterState::Parked => "parked",
            AdapterState::Paused => "paused",
            AdapterState::Standby => "standby",
            AdapterState::Stopped => "stopped",
        }
    }
}

/// One adapter's state as shown to operators.
#[derive(Debug, Clone, Serialize)]
pub struct AdapterStatus {
    pub platform: String,
    pub state: AdapterState,
    /// Why it is degraded, backing off or parked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Failed runs since the last sustained progress.
    pub attempts: u32,
    /// Seconds since the adapter last made real progress, if it ever did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_progress_secs: Option<f64>,
    pub since: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HealthSnapshot {
    /// `starting` (some adapter not registered yet), `running`, `degraded` (some adapter not
    /// connected, or connected without progress) or `draining`.
    pub gateway: &'static str,
    pub ready: bool,
    pub adapters: Vec<AdapterStatus>,
    /// Each configured MCP server (none when the gateway has no hub or no server).
    pub mcp: Vec<McpServerHealth>,
    /// With a store shared by replicas: this replica, whether it reaches the store, and who
    /// holds each connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterHealth>,
}

/// One replica's view of the cluster that shares its store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterHealth {
    /// This replica's name.
    pub replica: String,
    /// `false` once the store has not answered for two thirds of a lease: the replica then
    /// holds no connection and is not ready.
    pub store_reachable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_error: Option<String>,
    /// Every connection lease as last read, held or expired.
    #[serde(default)]
    pub leases: Vec<LeaseHealth>,
}

impl ClusterHealth {
    /// What `hermes gateway status` and `/status` say of it, as seen at `now`: this replica and
    /// its store, then each connection, who holds it and since when.
    pub(crate) fn lines(&self, now: DateTime<Utc>) -> Vec<String> {
        let store = match (&self.store_reachable, &self.store_error) {
            (true, _) => "the shared store answers".to_string(),
            (false, error) => format!(
                "the shared store does NOT answer ({}): this replica holds no connection and is not ready",
                error.as_deref().unwrap_or("no answer")
            ),
        };
        let mut lines = vec![format!("replica: {} ({store})", shown(&self.replica))];
        for lease in self.leases.iter().filter(|l| l.name.starts_with("connection:")) {
            let connection = shown(lease.name.trim_start_matches("connection:"));
            let mine = if lease.holder == self.replica { " (this replica)" } else { "" };
            let holder = shown(&lease.holder);
            lines.push(if lease.expires_at > now {
                format!("  {connection}: held by {holder}{mine} since {}", lease.since.format("%Y-%m-%d %H:%M:%S UTC"))
            } else {
                format!("  {connection}: free (last held by {holder}{mine})")
            });
        }
        lines
    }
}

/// A name read from the shared store (any replica, or anyone with access to the database, wrote
/// it), as it may be printed in a terminal or a chat: no control characters (no escape sequence
/// repaints the operator's terminal, no newline fakes a line), no code marks, at most 80 characters.
pub(crate) fn shown(name: &str) -> String {
    const MAX: usize = 80;
    let clean: String = name.chars().map(|c| if c.is_control() || c == '`' { '?' } else { c }).take(MAX + 1).collect();
    if clean.chars().count() > MAX { format!("{}…", clean.chars().take(MAX).collect::<String>()) } else { clean }
}

/// One connection lease as operators see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseHealth {
    pub name: String,
    pub holder: String,
    pub since: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// One MCP server as operators see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpServerHealth {
    pub name: String,
    /// `disabled`, `connecting`, `connected` or `down`.
    pub state: &'static str,
    /// Tools registered from it (kept while it is down).
    pub tools: usize,
    /// The last connection or transport error, credentials masked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl From<&ServerStatus> for McpServerHealth {
    fn from(s: &ServerStatus) -> Self {
        McpServerHealth {
            name: s.name.clone(),
            state: s.state.as_str(),
            tools: s.tools,
            // The hub redacts too; a URL with a token in it is masked here as well.
            last_error: s.last_error.as_deref().map(crate::observe::redact::redact_patterns),
        }
    }
}

/// The hub whose servers the board shows (a newtype: the hub has no `Debug`).
#[derive(Default)]
struct McpSource(OnceLock<Arc<McpHub>>);

impl std::fmt::Debug for McpSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "McpSource(hub)" } else { "McpSource(none)" })
    }
}

#[derive(Debug)]
struct Slot {
    state: AdapterState,
    detail: Option<String>,
    attempts: u32,
    since: DateTime<Utc>,
    reporter: HealthReporter,
    delays: Vec<Duration>,
    /// The adapter's [`hermes_adapter::PlatformAdapter::liveness_timeout`]: how long a connected
    /// adapter may go without progress, and how long a reconnected one must stay up, before it
    /// counts as ready.
    liveness: Option<Duration>,
    /// The last run failed after it had made progress: the connection was lost, not refused.
    lost_connection: bool,
    last_error: Option<(String, DateTime<Utc>)>,
    restarts: u32,
}

/// What the status file keeps of an adapter beyond its state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdapterRecord {
    pub platform: String,
    /// When it last made real progress (a poll returned, a heartbeat was acknowledged).
    pub last_progress_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub last_error_at: Option<DateTime<Utc>>,
    /// Runs that failed and were restarted since the gateway started.
    pub restarts: u32,
}

#[derive(Debug, Default)]
pub struct HealthBoard {
    slots: Mutex<BTreeMap<String, Slot>>,
    draining: AtomicBool,
    /// Adapters the gateway starts; until each has registered, the gateway is starting.
    expected: AtomicUsize,
    mcp: McpSource,
    /// This replica's view of a shared store, when it has one.
    cluster: Mutex<Option<ClusterHealth>>,
    /// The platforms this replica serves: with a shared store, only those it holds the lease
    /// of; alone, every one.
    tenures: Arc<Tenures>,
}

impl HealthBoard {
    pub fn new() -> Self {
        Self::default()
    }

    /// Which platforms this replica serves (`ops::lease::tenures`).
    pub(crate) fn tenures(&self) -> &Arc<Tenures> {
        &self.tenures
    }

    /// Record this replica's latest view of the shared store (`ops::lease::watch_cluster`).
    pub(crate) fn set_cluster(&self, view: ClusterHealth) {
        if let Ok(mut cluster) = self.cluster.lock() {
            *cluster = Some(view);
        }
    }

    pub fn register(&self, platform: &str, reporter: HealthReporter) {
        if let Ok(mut slots) = self.slots.lock() {
            slots.insert(
                platform.to_string(),
                Slot {
                    state: AdapterState::Starting,
                    detail: None,
                    attempts: 0,
                    since: Utc::now(),
                    reporter,
                    delays: Vec::new(),
                    liveness: None,
                    lost_connection: false,
                    last_error: None,
                    restarts: 0,
                },
            );
        }
    }

    /// Show `hub`'s servers beside the adapters (set once, at wiring; later calls are ignored).
    pub fn watch_mcp(&self, hub: Arc<McpHub>) {
        let _ = self.mcp.0.set(hub);
    }

    /// Each configured MCP server's state now, sorted by name.
    pub fn mcp_servers(&self) -> Vec<ServerStatus> {
        self.mcp.0.get().map(|hub| hub.status()).unwrap_or_default()
    }

    /// How many adapters the gateway starts: fewer on the board means it is still starting.
    pub fn expect_adapters(&self, count: usize) {
        self.expected.store(count, Ordering::Release);
    }

    /// The adapter's liveness timeout, which `/readyz` judges its progress by.
    pub fn set_liveness_timeout(&self, platform: &str, timeout: Option<Duration>) {
        if let Ok(mut slots) = self.slots.lock()
            && let Some(slot) = slots.get_mut(platform)
        {
            slot.liveness = timeout;
        }
    }

    pub fn set(&self, platform: &str, state: AdapterState, detail: Option<String>, attempts: u32) {
        if let Ok(mut slots) = self.slots.lock()
            && let Some(slot) = slots.get_mut(platform)
        {
            let now = Utc::now();
            if state == AdapterState::BackingOff {
                // A run that made progress before failing had a connection, and lost it.
                slot.lost_connection = slot.reporter.last_progress_ms() >= slot.since.timestamp_millis();
                slot.restarts += 1;
                crate::observe::metrics::global().adapter_restarted(platform);
            }
            if let (Some(why), AdapterState::BackingOff | AdapterState::Parked) = (&detail, state) {
                slot.last_error = Some((why.clone(), now));
            }
            if slot.state != state {
                slot.since = now;
            }
            slot.state = state;
            slot.detail = detail;
            slot.attempts = attempts;
        }
    }

    /// Remember a backoff delay (the last 32 are kept, for status and tests).
    pub fn record_delay(&self, platform: &str, delay: Duration) {
        if let Ok(mut slots) = self.slots.lock()
            && let Some(slot) = slots.get_mut(platform)
        {
            slot.delays.push(delay);
            if slot.delays.len() > 32 {
                slot.delays.remove(0);
            }
        }
    }

    pub fn delays(&self, platform: &str) -> Vec<Duration> {
        self.slots.lock().ok().and_then(|s| s.get(platform).map(|slot| slot.delays.clone())).unwrap_or_default()
    }

    /// Whether sends to `platform` are worth attempting: this replica serves it (see
    /// [`Tenures::serves`]), and its adapter is connected, degraded (its
    /// receiving side is unwell; sending may still work) or stopped for shutdown (the answers of
    /// draining turns still go out). Starting, backing off, parked or paused: its parts wait. A
    /// platform not on the board (a gateway without supervisors, in tests) is assumed up.
    pub fn accepts_sends(&self, platform: &str) -> bool {
        if !self.tenures.serves(platform) {
            return false;
        }
        let Ok(slots) = self.slots.lock() else { return true };
        // The state operators see: the supervisor's, refined by the adapter's own reports.
        slots.get(platform).is_none_or(|slot| {
            matches!(slot.status(platform, Utc::now()).state, AdapterState::Connected | AdapterState::Degraded | AdapterState::Stopped)
        })
    }

    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    pub fn snapshot(&self) -> HealthSnapshot {
        let now = Utc::now();
        let adapters: Vec<AdapterStatus> =
            self.slots.lock().map(|slots| slots.iter().map(|(name, slot)| slot.status(name, now)).collect()).unwrap_or_default();
        // A paused adapter is the admin's choice, and a standby one is served by another
        // replica: neither is a fault, neither holds readiness back.
        let all_connected =
            adapters.iter().all(|a| matches!(a.state, AdapterState::Connected | AdapterState::Paused | AdapterState::Standby));
        let draining = self.is_draining();
        let starting = adapters.len() < self.expected.load(Ordering::Acquire);
        let cluster = self.cluster.lock().ok().and_then(|c| c.clone());
        // A replica cut off from its shared store holds no connection and takes no work.
        let store_reachable = cluster.as_ref().is_none_or(|c| c.store_reachable);
        let all_connected = all_connected && store_reachable;
        HealthSnapshot {
            gateway: if draining {
                "draining"
            } else if starting {
                "starting"
            } else if all_connected {
                "running"
            } else {
                "degraded"
            },
            ready: all_connected && !draining && !starting && store_reachable,
            adapters,
            mcp: self.mcp_servers().iter().map(McpServerHealth::from).collect(),
            cluster,
        }
    }

    /// Each adapter's last progress, last error and restarts, for the status file.
    pub fn records(&self) -> Vec<AdapterRecord> {
        let Ok(slots) = self.slots.lock() else { return Vec::new() };
        slots
            .iter()
            .map(|(name, slot)| {
                let last = slot.reporter.last_progress_ms();
                AdapterRecord {
                    platform: name.clone(),
                    last_progress_at: (last > 0).then(|| DateTime::from_timestamp_millis(last)).flatten(),
                    last_error: slot.last_error.as_ref().map(|(e, _)| e.clone()),
                    last_error_at: slot.last_error.as_ref().map(|(_, at)| *at),
                    restarts: slot.restarts,
                }
            })
            .collect()
    }
}

impl Slot {
    /// The state operators see: the supervisor's, refined by the adapter's own reports and by
    /// its progress measured against its liveness timeout.
    fn status(&self, name: &str, now: DateTime<Utc>) -> AdapterStatus {
        let mut state = self.state;
        let mut detail = self.detail.clone();
        // The adapter's own reports refine a live run's state.
        if matches!(state, AdapterState::Starting | AdapterState::Connected) && self.reporter.is_connected() {
            state = AdapterState::Connected;
            if let Some(reason) = self.reporter.degraded_reason() {
                state = AdapterState::Degraded;
                detail = Some(reason);
            }
        } else if state == AdapterState::Starting && detail.is_none() {
            // An adapter that reconnects inside its run (IMAP) says why it is not connected.
            detail = self.reporter.degraded_reason();
        }
        let last = self.reporter.last_progress_ms();
        let idle = (last > 0).then(|| Duration::from_millis(u64::try_from(now.timestamp_millis() - last).unwrap_or(0)));
        if state == AdapterState::Connected
            && let Some(why) = self.not_progressing(idle, now)
        {
            state = AdapterState::Degraded;
            detail = Some(why);
        }
        AdapterStatus {
            platform: name.to_string(),
            state,
            detail,
            attempts: self.attempts,
            last_progress_secs: idle.map(|d| d.as_secs_f64()),
            since: self.since,
        }
    }

    /// Why a connected adapter is not ready, judged by its liveness timeout: no progress for
    /// longer than it (a long poll returns within its timeout, so a poll held past it is stuck),
    /// or back after a lost connection for less than it (a connection that is dropped again
    /// within the timeout, like a poll that hangs after every reconnect, never counts as ready).
    fn not_progressing(&self, idle: Option<Duration>, now: DateTime<Utc>) -> Option<String> {
        let limit = self.liveness?;
        if let Some(idle) = idle.filter(|idle| *idle > limit) {
            return Some(format!("no progress for {}s (expected within {}s)", idle.as_secs(), limit.as_secs()));
        }
        let up = (now - self.since).to_std().unwrap_or_default();
        (self.lost_connection && up < limit).then(|| {
            format!("reconnected {}s ago after losing its connection; ready once it has stayed up {}s", up.as_secs(), limit.as_secs())
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hostile_names_from_the_shared_store_print_on_one_line_without_escapes() {
        let now = chrono::Utc::now();
        let lease = |holder: &str| super::LeaseHealth {
            name: "connection:telegram\nreplica: forged".into(),
            holder: holder.into(),
            since: now,
            expires_at: now + chrono::Duration::seconds(30),
        };
        let cluster = super::ClusterHealth {
            replica: "me".into(),
            store_reachable: true,
            store_error: None,
            leases: vec![lease("evil\u{1b}[2J\u{1b}[31m`x`"), lease(&"long".repeat(100))],
        };
        let lines = cluster.lines(now);
        assert_eq!(lines.len(), 3, "one line per lease, none forged: {lines:?}");
        assert!(lines.iter().all(|l| !l.chars().any(|c| c.is_control()) && !l.contains('`')), "{lines:?}");
        assert!(lines[1].contains("held by evil?[2J?[31m?x?"), "{lines:?}");
        assert!(lines[2].chars().count() < 200 && lines[2].contains('…'), "a long name is cut: {lines:?}");
    }

    use super::*;

    /// A board with one adapter `tg` whose liveness timeout is `limit`, connected.
    fn connected(limit: Duration) -> (HealthBoard, HealthReporter) {
        let board = HealthBoard::new();
        let reporter = HealthReporter::new();
        board.expect_adapters(1);
        board.register("tg", reporter.clone());
        board.set_liveness_timeout("tg", Some(limit));
        reporter.mark_connected();
        (board, reporter)
    }

    #[tokio::test]
    async fn a_replica_standing_by_for_a_platform_is_ready_and_sends_only_for_those_it_serves() {
        let (board, _reporter) = connected(Duration::from_secs(60));
        board.tenures().share(Box::new(|_| Box::pin(async {})));
        board.register("discord", HealthReporter::new());
        board.set("discord", AdapterState::Standby, Some("standby: replica-b holds the connection".into()), 0);
        let snap = board.snapshot();
        assert_eq!((snap.gateway, snap.ready), ("running", true), "another replica serves discord: no fault here {snap:?}");
        assert!(!board.accepts_sends("tg"), "connected, but not this replica's to serve yet");
        let lost = tokio_util::sync::CancellationToken::new();
        let tenure =
            Arc::new(crate::gateway::ops::lease::TenureClock::new(tokio::time::Instant::now(), Duration::from_secs(10), lost.clone()));
        board.tenures().take("tg", tenure).await;
        assert!(board.accepts_sends("tg"));
        lost.cancel();
        assert!(!board.accepts_sends("tg"), "the tenure is over: nothing more is sent");
    }

    #[test]
    fn sends_wait_while_an_adapter_is_starting_backing_off_or_paused() {
        let board = HealthBoard::new();
        let reporter = HealthReporter::new();
        board.register("tg", reporter.clone());
        assert!(!board.accepts_sends("tg"), "starting, not connected yet");
        reporter.mark_connected();
        assert!(board.accepts_sends("tg"), "connected by the adapter's own report");
        reporter.mark_disconnected();
        board.set("tg", AdapterState::BackingOff, Some("getUpdates failed".into()), 1);
        assert!(!board.accepts_sends("tg"), "backing off");
        board.set("tg", AdapterState::Paused, None, 0);
        assert!(!board.accepts_sends("tg"), "paused by an admin");
        board.set("tg", AdapterState::Stopped, None, 0);
        assert!(board.accepts_sends("tg"), "stopping: the drain's answers still go out");
        assert!(board.accepts_sends("unsupervised"), "a platform not on the board is assumed up");
    }

    #[test]
    fn a_connected_adapter_without_progress_past_its_timeout_is_not_ready() {
        let (board, reporter) = connected(Duration::from_millis(100));
        assert!(board.snapshot().ready);
        std::thread::sleep(Duration::from_millis(300));
        let snap = board.snapshot();
        assert!(!snap.ready, "{snap:?}");
        assert_eq!(snap.adapters[0].state, AdapterState::Degraded);
        assert!(snap.adapters[0].detail.as_deref().is_some_and(|d| d.starts_with("no progress for")), "{snap:?}");
        reporter.progress();
        assert!(board.snapshot().ready, "progress again: ready again");
    }

    #[test]
    fn after_a_lost_connection_an_adapter_is_ready_only_once_it_stayed_up_its_timeout() {
        let (board, reporter) = connected(Duration::from_millis(200));
        reporter.mark_disconnected();
        board.set("tg", AdapterState::BackingOff, Some("getUpdates failed: timed out".into()), 1);
        board.set("tg", AdapterState::Starting, None, 1);
        // Through getMe again, the poll not answered yet: connected, but it was so last time too.
        reporter.mark_connected();
        let snap = board.snapshot();
        assert!(!snap.ready, "{snap:?}");
        assert!(snap.adapters[0].detail.as_deref().is_some_and(|d| d.contains("after losing its connection")), "{snap:?}");
        std::thread::sleep(Duration::from_millis(300));
        reporter.progress();
        assert!(board.snapshot().ready, "{:?}", board.snapshot());
        let record = &board.records()[0];
        assert_eq!(record.restarts, 1);
        assert_eq!(record.last_error.as_deref(), Some("getUpdates failed: timed out"));
        assert!(record.last_progress_at.is_some());
    }

    #[test]
    fn an_adapter_reconnecting_inside_its_run_is_not_ready_and_says_why() {
        let (board, reporter) = connected(Duration::from_secs(3600));
        board.set("tg", AdapterState::Starting, None, 0);
        reporter.mark_disconnected();
        reporter.set_degraded(Some("the server stopped answering; reconnecting".into()));
        let snap = board.snapshot();
        assert!(!snap.ready, "{snap:?}");
        assert_eq!(snap.adapters[0].state, AdapterState::Starting);
        assert_eq!(snap.adapters[0].detail.as_deref(), Some("the server stopped answering; reconnecting"));
        reporter.mark_connected();
        reporter.set_degraded(None);
        assert!(board.snapshot().ready, "{:?}", board.snapshot());
    }

    #[test]
    fn an_adapter_that_never_connected_before_failing_is_ready_when_it_connects() {
        let board = HealthBoard::new();
        let reporter = HealthReporter::new();
        board.register("tg", reporter.clone());
        board.set_liveness_timeout("tg", Some(Duration::from_secs(3600)));
        board.set("tg", AdapterState::BackingOff, Some("connection refused".into()), 1);
        board.set("tg", AdapterState::Starting, None, 1);
        reporter.mark_connected();
        assert!(board.snapshot().ready, "a refused start is not a lost connection: {:?}", board.snapshot());
    }

    #[test]
    fn starting_until_every_adapter_registered_and_a_paused_one_does_not_hold_readiness() {
        let board = HealthBoard::new();
        board.expect_adapters(2);
        let tg = HealthReporter::new();
        board.register("tg", tg.clone());
        tg.mark_connected();
        let snap = board.snapshot();
        assert_eq!((snap.gateway, snap.ready), ("starting", false));
        board.register("dc", HealthReporter::new());
        board.set("dc", AdapterState::Paused, Some("paused by an admin".into()), 0);
        let snap = board.snapshot();
        assert_eq!((snap.gateway, snap.ready), ("running", true), "{snap:?}");
        board.set_draining();
        assert_eq!((board.snapshot().gateway, board.snapshot().ready), ("draining", false));
    }

    #[test]
    fn mcp_servers_are_shown_but_never_hold_readiness_back() {
        let board = HealthBoard::new();
        board.expect_adapters(1);
        let tg = HealthReporter::new();
        board.register("tg", tg.clone());
        tg.mark_connected();
        assert!(board.snapshot().mcp.is_empty(), "no hub, no servers");
        let server = crate::config::McpServerConfig { command: Some("/nonexistent/mcp-server".into()), ..Default::default() };
        let servers = [("broken".to_string(), server)].into_iter().collect();
        let paths = crate::mcp::McpPaths { logs_dir: std::env::temp_dir() };
        board.watch_mcp(McpHub::new(servers, paths));
        let snap = board.snapshot();
        assert_eq!(snap.mcp.len(), 1, "{snap:?}");
        assert_eq!(snap.mcp[0].name, "broken");
        assert_ne!(snap.mcp[0].state, "connected", "{snap:?}");
        assert!(snap.ready, "a server that is not connected does not make the gateway unready: {snap:?}");
        let json = serde_json::to_value(&snap).unwrap();
        assert_eq!(json["mcp"][0]["name"], "broken", "{json}");
    }
}
