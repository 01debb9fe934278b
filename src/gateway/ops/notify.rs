//! systemd's notify protocol (`Type=notify`, `WatchdogSec=`): `READY=1` once every enabled
//! adapter has settled, `WATCHDOG=1` while the gateway is alive, `STATUS=` with a one-line health
//! summary whenever it changes, and `STOPPING=1` when shutdown begins. Without `NOTIFY_SOCKET`
//! (not started by systemd) nothing is sent and no task runs.
//!
//! The datagrams go through the `sd-notify` crate rather than a hand-written sender: it is small,
//! maintained, has no dependencies beyond libc, and already gets the protocol's corners right
//! (abstract socket names starting with `@`, `WATCHDOG_PID` naming another process), which a
//! few local lines would have to re-learn.
//!
//! Readiness: `READY=1` is sent when every enabled adapter is connected (or degraded), parked
//! with a reason, or paused — or, at the latest, [`STARTUP_TIMEOUT`] after start, with a
//! `STATUS=` naming the adapters still starting. The bound keeps one unreachable platform at boot
//! (its supervisor keeps retrying it) from making systemd kill a gateway whose other platforms
//! work: systemd's default `TimeoutStartSec` is 90 s.
//!
//! Watchdog: systemd arms it once the service is ready, so no ping is sent before `READY=1`;
//! after it, one every half of `WATCHDOG_USEC`, and only while this task runs (the event loop is
//! alive) and every supervisor has beaten within `WATCHDOG_USEC` ([`Pulse`]). A wedged
//! supervisor therefore stops the pings and systemd restarts the gateway within two watchdog
//! periods.

use crate::gateway::ops::health::{AdapterState, AdapterStatus, HealthBoard, HealthSnapshot};
use crate::gateway::ops::supervisor::Pulse;
use crate::observe::redact::Redactor;
use sd_notify::NotifyState;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// `READY=1` is sent at the latest this long after start.
pub(crate) const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the health summary is looked at.
const STATUS_EVERY: Duration = Duration::from_millis(500);
/// A detail in `STATUS=` is cut to this many characters (systemctl shows one line).
const DETAIL_CHARS: usize = 80;

/// Sends to systemd's notify socket; every call is a no-op without `NOTIFY_SOCKET`.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    target: Target,
    redactor: Redactor,
}

#[derive(Debug, Clone)]
enum Target {
    Off,
    /// `NOTIFY_SOCKET`, through `sd-notify`.
    Systemd,
    /// A socket a test owns (tests must not set the process-wide variable).
    #[cfg(test)]
    Socket(std::path::PathBuf),
}

impl Notifier {
    /// `secrets` are masked in `STATUS=` lines like in the logs (an adapter's error may quote a
    /// URL carrying its token).
    pub(crate) fn from_env(secrets: Vec<String>) -> Notifier {
        let target = if std::env::var_os("NOTIFY_SOCKET").is_some() { Target::Systemd } else { Target::Off };
        Notifier { target, redactor: Redactor::new(secrets) }
    }

    pub(crate) fn is_enabled(&self) -> bool {
        !matches!(self.target, Target::Off)
    }

    fn send(&self, states: &[NotifyState<'_>]) {
        let sent = match &self.target {
            Target::Off => Ok(()),
            Target::Systemd => sd_notify::notify(states),
            #[cfg(test)]
            Target::Socket(path) => {
                let text: String = states.iter().map(|s| format!("{s}\n")).collect();
                std::os::unix::net::UnixDatagram::unbound().and_then(|s| s.send_to(text.as_bytes(), path)).map(|_| ())
            }
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, "cannot notify systemd (NOTIFY_SOCKET)");
        }
    }

    fn status(&self, line: &str) {
        let line = self.redactor.redact(line);
        self.send(&[NotifyState::Status(&line)]);
    }

    /// `STOPPING=1`: shutdown has begun.
    pub(crate) fn stopping(&self, why: &str) {
        let line = self.redactor.redact(&format!("stopping: {why}"));
        self.send(&[NotifyState::Stopping, NotifyState::Status(&line)]);
    }
}

/// What the notifier watches.
pub(crate) struct Watched {
    pub board: Arc<HealthBoard>,
    pub pulse: Arc<Pulse>,
    /// How many adapters are enabled (the board learns of each when its supervisor starts).
    pub expected: usize,
}

/// Start the notifier task; `None` without `NOTIFY_SOCKET`. Abort it after the supervisors
/// stopped.
pub(crate) fn spawn(notifier: Notifier, watched: Watched) -> Option<JoinHandle<()>> {
    notifier.is_enabled().then(|| tokio::spawn(notify_loop(notifier, watched, sd_notify::watchdog_enabled())))
}

async fn notify_loop(notifier: Notifier, watched: Watched, watchdog: Option<Duration>) {
    let started = Instant::now();
    let mut ready = false;
    let mut last_status = String::new();
    let mut status_tick = tokio::time::interval(STATUS_EVERY);
    // Without a watchdog the ping branch never fires.
    let ping_every = watchdog.map(|usec| (usec / 2).max(Duration::from_millis(10)));
    let mut ping_tick = tokio::time::interval(ping_every.unwrap_or(Duration::from_secs(3600)));
    loop {
        tokio::select! {
            _ = status_tick.tick() => {
                let snapshot = watched.board.snapshot();
                if !ready && let Some(line) = readiness(&snapshot, watched.expected, started.elapsed()) {
                    ready = true;
                    last_status = line.clone();
                    let line = notifier.redactor.redact(&line);
                    notifier.send(&[NotifyState::Ready, NotifyState::Status(&line)]);
                    tracing::info!("told systemd the gateway is ready");
                    continue;
                }
                let line = summary(&snapshot, ready);
                if line != last_status {
                    notifier.status(&line);
                    last_status = line;
                }
            }
            _ = ping_tick.tick(), if ping_every.is_some() && ready => {
                let max_age = watchdog.unwrap_or_default();
                match watched.pulse.stale(max_age).as_slice() {
                    [] => notifier.send(&[NotifyState::Watchdog]),
                    stale => tracing::error!(supervisors = ?stale, "an adapter supervisor stopped running: withholding the watchdog ping so that systemd restarts the gateway"),
                }
            }
        }
    }
}

/// Whether an adapter in `state` has finished starting, for readiness.
fn settled(state: AdapterState) -> bool {
    matches!(state, AdapterState::Connected | AdapterState::Degraded | AdapterState::Parked | AdapterState::Paused | AdapterState::Standby)
}

/// The `STATUS=` line to send with `READY=1`, if the gateway is ready: every expected adapter
/// settled, or [`STARTUP_TIMEOUT`] passed.
fn readiness(snapshot: &HealthSnapshot, expected: usize, waited: Duration) -> Option<String> {
    let all_known = snapshot.adapters.len() >= expected;
    let unsettled: Vec<&str> = snapshot.adapters.iter().filter(|a| !settled(a.state)).map(|a| a.platform.as_str()).collect();
    if all_known && unsettled.is_empty() {
        return Some(summary(snapshot, true));
    }
    if waited < STARTUP_TIMEOUT {
        return None;
    }
    let still = if unsettled.is_empty() { "an adapter that has not registered".to_string() } else { unsettled.join(", ") };
    Some(format!("{}; still starting after {}s: {still}", summary(snapshot, true), STARTUP_TIMEOUT.as_secs()))
}

/// One line: the gateway's state, then each adapter's (`running: telegram connected, discord
/// backing off (net: connection refused)`).
fn summary(snapshot: &HealthSnapshot, ready: bool) -> String {
    let gateway = if ready { snapshot.gateway } else { "starting" };
    if snapshot.adapters.is_empty() {
        return format!("{gateway}: no platform enabled");
    }
    let adapters: Vec<String> = snapshot.adapters.iter().map(describe).collect();
    format!("{gateway}: {}", adapters.join(", "))
}

fn describe(adapter: &AdapterStatus) -> String {
    let state = adapter.state.as_str().replace('_', " ");
    match adapter.detail.as_deref().map(one_line) {
        Some(detail) if adapter.state != AdapterState::Connected => format!("{} {state} ({detail})", adapter.platform),
        _ => format!("{} {state}", adapter.platform),
    }
}

/// `text` on one line, cut to [`DETAIL_CHARS`].
fn one_line(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(DETAIL_CHARS) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn adapter(platform: &str, state: AdapterState, detail: Option<&str>) -> AdapterStatus {
        AdapterStatus {
            platform: platform.into(),
            state,
            detail: detail.map(str::to_string),
            attempts: 0,
            last_progress_secs: None,
            since: Utc::now(),
        }
    }

    fn snapshot(gateway: &'static str, adapters: Vec<AdapterStatus>) -> HealthSnapshot {
        HealthSnapshot { gateway, ready: false, adapters, mcp: Vec::new(), cluster: None }
    }

    #[test]
    fn ready_once_every_adapter_has_settled() {
        let starting = snapshot(
            "degraded",
            vec![adapter("telegram", AdapterState::Connected, None), adapter("discord", AdapterState::Starting, None)],
        );
        assert_eq!(readiness(&starting, 2, Duration::from_secs(1)), None);
        let one_registered = snapshot("running", vec![adapter("telegram", AdapterState::Connected, None)]);
        assert_eq!(readiness(&one_registered, 2, Duration::from_secs(1)), None, "discord's supervisor has not registered yet");
        let settled = snapshot(
            "degraded",
            vec![adapter("telegram", AdapterState::Connected, None), adapter("discord", AdapterState::Parked, Some("auth: bad token"))],
        );
        assert_eq!(
            readiness(&settled, 2, Duration::from_secs(1)).as_deref(),
            Some("degraded: telegram connected, discord parked (auth: bad token)")
        );
        assert_eq!(readiness(&snapshot("running", vec![]), 0, Duration::ZERO).as_deref(), Some("running: no platform enabled"));
    }

    #[test]
    fn ready_after_the_startup_timeout_names_who_is_still_starting() {
        let stuck = snapshot(
            "degraded",
            vec![
                adapter("telegram", AdapterState::Connected, None),
                adapter("discord", AdapterState::BackingOff, Some("net: connection refused")),
            ],
        );
        assert_eq!(readiness(&stuck, 2, STARTUP_TIMEOUT - Duration::from_secs(1)), None);
        let line = readiness(&stuck, 2, STARTUP_TIMEOUT).expect("ready at the timeout");
        assert_eq!(line, "degraded: telegram connected, discord backing off (net: connection refused); still starting after 60s: discord");
    }

    #[test]
    fn summary_is_one_short_line() {
        let long = format!("net: {}\nsecond line", "x".repeat(200));
        let line = summary(&snapshot("degraded", vec![adapter("slack", AdapterState::Degraded, Some(&long))]), true);
        assert!(!line.contains('\n'), "{line}");
        assert!(line.starts_with("degraded: slack degraded (net: xxx") && line.ends_with("…)"), "{line}");
        assert!(line.len() < 140, "{line}");
        let before_ready = summary(&snapshot("degraded", vec![adapter("slack", AdapterState::Starting, None)]), false);
        assert_eq!(before_ready, "starting: slack starting");
    }

    #[test]
    fn without_notify_socket_nothing_runs() {
        let notifier = Notifier { target: Target::Off, redactor: Redactor::default() };
        let watched = Watched { board: Arc::new(HealthBoard::new()), pulse: Arc::new(Pulse::default()), expected: 0 };
        assert!(spawn(notifier, watched).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn pings_stop_when_a_supervisor_is_wedged() {
        let dir = tempfile::tempdir().unwrap();
        let notify = Receiver::bind(dir.path());
        let board = Arc::new(HealthBoard::new());
        let pulse = Arc::new(Pulse::default());
        pulse.beat("telegram");
        let watched = Watched { board, pulse: pulse.clone(), expected: 0 };
        let notifier = Notifier { target: Target::Socket(notify.path.clone()), redactor: Redactor::new(vec!["hunter2-secret".into()]) };
        let task = tokio::spawn(notify_loop(notifier, watched, Some(Duration::from_secs(2))));
        for _ in 0..8 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            pulse.beat("telegram");
        }
        let alive = notify.drain();
        assert!(alive.iter().any(|m| m.contains("READY=1")), "{alive:?}");
        assert!(alive.iter().filter(|m| m.contains("WATCHDOG=1")).count() >= 2, "{alive:?}");
        // The supervisor stops beating: after its beat ages past WATCHDOG_USEC, no more pings.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let _ = notify.drain();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let wedged = notify.drain();
        task.abort();
        assert!(!wedged.iter().any(|m| m.contains("WATCHDOG=1")), "{wedged:?}");
    }

    #[test]
    fn status_lines_are_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let notify = Receiver::bind(dir.path());
        let notifier = Notifier { target: Target::Socket(notify.path.clone()), redactor: Redactor::new(vec!["hunter2-secret".into()]) };
        notifier.status(
            "degraded: telegram backing off (net: GET https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getUpdates)",
        );
        notifier.stopping("signal; key hunter2-secret");
        let sent = notify.drain().join("");
        assert!(sent.contains("STATUS=degraded: telegram backing off") && sent.contains("STOPPING=1\n"), "{sent}");
        assert!(!sent.contains("AAHdqTcv") && !sent.contains("hunter2-secret"), "{sent}");
    }

    /// The test's end of the notify socket.
    struct Receiver {
        socket: std::os::unix::net::UnixDatagram,
        path: std::path::PathBuf,
    }

    impl Receiver {
        fn bind(dir: &std::path::Path) -> Receiver {
            let path = dir.join("notify.sock");
            let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
            socket.set_nonblocking(true).unwrap();
            Receiver { socket, path }
        }

        fn drain(&self) -> Vec<String> {
            let mut out = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = self.socket.recv(&mut buf) {
                out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
            out
        }
    }
}
