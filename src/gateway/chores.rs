//! The gateway's periodic chores beside the message path: the status file `hermes gateway
//! status` reads (rewritten every 2 s) and the pruning of finished inbox rows (hourly).

use super::health::HealthBoard;
use super::status_file::{ParkedEvent, StatusFile};
use super::turn_limits::TurnLimits;
use crate::store::Store;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Parked (poisoned) inbox events the status file lists.
const PARKED_SHOWN: usize = 20;
/// Finished inbox rows are kept a day: redeliveries within that window are dropped.
const FINISHED_KEPT: Duration = Duration::from_secs(24 * 3600);

/// Rewrite the status file every 2 s from the health board, the running turns and the parked
/// events, until aborted.
pub fn spawn_status_writer(
    mut status: StatusFile,
    path: PathBuf,
    board: Arc<HealthBoard>,
    limits: Arc<TurnLimits>,
    store: Store,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(2));
        loop {
            tick.tick().await;
            status.apply(&board.snapshot(), limits.running.active());
            match store.inbox_poisoned(PARKED_SHOWN).await {
                Ok(rows) => {
                    status.poisoned = rows
                        .into_iter()
                        .map(|r| ParkedEvent {
                            event_id: r.event_id,
                            platform: r.platform,
                            reason: r.error.unwrap_or_default(),
                            received_at: r.received_at,
                        })
                        .collect()
                }
                Err(e) => tracing::warn!(error = %e, "cannot list parked events for the status file"),
            }
            if let Err(e) = status.write(&path) {
                tracing::warn!(error = %e, "cannot write the status file");
            }
        }
    })
}

/// Prune finished inbox rows every hour, until aborted.
pub fn spawn_inbox_pruning(store: Store) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tick.tick().await;
            if let Err(e) = store.inbox_prune(FINISHED_KEPT).await {
                tracing::warn!(error = %e, "inbox pruning failed");
            }
        }
    })
}
