//! The health board: every adapter's supervised state, read by `/health`, `/readyz`, `/status`,
//! the status file and `hermes gateway status`.

use chrono::{DateTime, Utc};
use hermes_adapter::HealthReporter;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AdapterState {
    Starting,
    Connected,
    Degraded,
    BackingOff,
    Parked,
    Stopped,
}

impl AdapterState {
    pub fn as_str(self) -> &'static str {
        match self {
            AdapterState::Starting => "starting",
            AdapterState::Connected => "connected",
            AdapterState::Degraded => "degraded",
            AdapterState::BackingOff => "backing_off",
            AdapterState::Parked => "parked",
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
    /// `running`, `degraded` (some adapter not connected) or `draining`.
    pub gateway: &'static str,
    pub ready: bool,
    pub adapters: Vec<AdapterStatus>,
}

#[derive(Debug)]
struct Slot {
    state: AdapterState,
    detail: Option<String>,
    attempts: u32,
    since: DateTime<Utc>,
    reporter: HealthReporter,
    delays: Vec<Duration>,
}

#[derive(Debug, Default)]
pub struct HealthBoard {
    slots: Mutex<BTreeMap<String, Slot>>,
    draining: AtomicBool,
}

impl HealthBoard {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&self, platform: &str, reporter: HealthReporter) {
        if let Ok(mut slots) = self.slots.lock() {
            slots.insert(
                platform.to_string(),
                Slot { state: AdapterState::Starting, detail: None, attempts: 0, since: Utc::now(), reporter, delays: Vec::new() },
            );
        }
    }

    pub fn set(&self, platform: &str, state: AdapterState, detail: Option<String>, attempts: u32) {
        if let Ok(mut slots) = self.slots.lock()
            && let Some(slot) = slots.get_mut(platform)
        {
            if slot.state != state {
                slot.since = Utc::now();
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

    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    pub fn snapshot(&self) -> HealthSnapshot {
        let now_ms = Utc::now().timestamp_millis();
        let adapters: Vec<AdapterStatus> = self
            .slots
            .lock()
            .map(|slots| {
                slots
                    .iter()
                    .map(|(name, slot)| {
                        let mut state = slot.state;
                        let mut detail = slot.detail.clone();
                        // The adapter's own reports refine a live run's state.
                        if matches!(state, AdapterState::Starting | AdapterState::Connected) && slot.reporter.is_connected() {
                            state = AdapterState::Connected;
                            if let Some(reason) = slot.reporter.degraded_reason() {
                                state = AdapterState::Degraded;
                                detail = Some(reason);
                            }
                        }
                        let last = slot.reporter.last_progress_ms();
                        AdapterStatus {
                            platform: name.clone(),
                            state,
                            detail,
                            attempts: slot.attempts,
                            last_progress_secs: (last > 0).then(|| (now_ms - last).max(0) as f64 / 1000.0),
                            since: slot.since,
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let all_connected = adapters.iter().all(|a| a.state == AdapterState::Connected);
        let draining = self.is_draining();
        HealthSnapshot {
            gateway: if draining {
                "draining"
            } else if all_connected {
                "running"
            } else {
                "degraded"
            },
            ready: all_connected && !draining,
            adapters,
        }
    }
}
