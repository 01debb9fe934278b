//! The gateway's periodic chores beside the message path: the status file `hermes gateway
//! status` reads (rewritten every 2 s, which also samples the inbox depth for `/metrics`) and
//! the pruning of finished inbox rows (hourly).

use super::health::HealthBoard;
use super::status_file::{CronStatus, ParkedEvent, StatusFile};
use super::turn_limits::TurnLimits;
use super::wiring::Wiring;
use crate::cron::status::TickerHealth;
use crate::observe::metrics;
use crate::store::Store;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Parked (poisoned) inbox events the status file lists.
const PARKED_SHOWN: usize = 20;
/// Finished inbox rows are kept a day: redeliveries within that window are dropped.
const FINISHED_KEPT: Duration = Duration::from_secs(24 * 3600);

/// What the status file is written from.
pub struct StatusSources {
    pub board: Arc<HealthBoard>,
    pub limits: Arc<TurnLimits>,
    pub store: Store,
    pub ticker: Option<Arc<TickerHealth>>,
}

impl StatusSources {
    pub fn of(wiring: &Wiring) -> Self {
        Self {
            board: wiring.health.clone(),
            limits: wiring.limits().clone(),
            store: wiring.store.clone(),
            ticker: Some(wiring.cron.ticker.health.clone()),
        }
    }
}

/// Rewrite the status file every 2 s from the health board, the running turns, the cron
/// ticker, the queues and the parked events, until aborted.
pub fn spawn_status_writer(mut status: StatusFile, path: PathBuf, sources: StatusSources) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(2));
        loop {
            tick.tick().await;
            refresh(&mut status, &sources).await;
            if let Err(e) = status.write(&path) {
                tracing::warn!(error = %e, "cannot write the status file");
            }
        }
    })
}

async fn refresh(status: &mut StatusFile, sources: &StatusSources) {
    status.apply(&sources.board.snapshot(), sources.limits.running.active());
    status.apply_records(&sources.board.records());
    status.cron = sources.ticker.as_ref().map(|t| CronStatus::from(t.snapshot()));
    match sources.store.inbox_unfinished().await {
        Ok(rows) => metrics::global().set_inbox_depth(rows.len()),
        Err(e) => tracing::warn!(error = %e, "cannot count unfinished inbox events"),
    }
    status.apply_queues(metrics::global().queues());
    match sources.store.inbox_poisoned(PARKED_SHOWN).await {
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
