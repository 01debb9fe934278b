//! `gateway_state.json`: the runtime status that `hermes gateway status` reads, rewritten
//! atomically (temp file + rename).

use super::health::HealthSnapshot;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusFile {
    pub pid: u32,
    pub kind: String,
    pub argv: Vec<String>,
    pub start_time: DateTime<Utc>,
    /// `starting`, `running`, `degraded`, `draining` or `stopped`.
    pub gateway_state: String,
    #[serde(default)]
    pub exit_reason: Option<String>,
    pub active_turns: usize,
    pub platforms: serde_json::Value,
    #[serde(default)]
    pub listeners: serde_json::Value,
    /// Events parked because processing them crashed, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub poisoned: Vec<ParkedEvent>,
    pub updated_at: DateTime<Utc>,
}

/// An inbox event that is never replayed, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParkedEvent {
    pub event_id: String,
    pub platform: String,
    pub reason: String,
    pub received_at: DateTime<Utc>,
}

impl StatusFile {
    pub fn new(start_time: DateTime<Utc>) -> Self {
        Self {
            pid: std::process::id(),
            kind: "hermes-gateway".into(),
            argv: std::env::args().collect(),
            start_time,
            gateway_state: "starting".into(),
            exit_reason: None,
            active_turns: 0,
            platforms: serde_json::json!({}),
            listeners: serde_json::json!({}),
            poisoned: Vec::new(),
            updated_at: Utc::now(),
        }
    }

    pub fn apply(&mut self, snapshot: &HealthSnapshot, active_turns: usize) {
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
        self.updated_at = Utc::now();
    }

    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        crate::fs_atomic::write(path, &serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)
    }

    pub fn read(path: &Path) -> std::io::Result<StatusFile> {
        let bytes = std::fs::read(path)?;
        serde_json::from_slice(&bytes).map_err(std::io::Error::other)
    }
}
