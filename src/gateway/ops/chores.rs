//! The gateway's periodic chores beside the message path: the status file `hermes gateway
//! status` reads (rewritten every 2 s, which also samples the inbox depth and the outbox's queues
//! for `/metrics`) and the pruning of finished inbox rows and old outbox records (hourly).

use crate::cron::status::TickerHealth;
use crate::gateway::ops::health::HealthBoard;
use crate::gateway::ops::status_file::{CronStatus, ParkedEvent, StatusFile};
use crate::observe::metrics::{self, OutboxQueue};
use crate::store::{Inbox, Outbox, QueueSummary};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Parked (poisoned) inbox events the status file lists.
const PARKED_SHOWN: usize = 20;
/// Finished inbox rows are kept a day: redeliveries within that window are dropped.
const FINISHED_KEPT: Duration = Duration::from_secs(24 * 3600);
/// Sent outbox records outlive any replay of their message (an inbox row lives a day) by far.
const OUTBOX_RECORDS_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);
/// Dead letters nobody resent or dropped are forgotten after a month.
const DEAD_LETTERS_KEPT: Duration = Duration::from_secs(30 * 24 * 3600);

/// What the status file is written from.
pub(crate) struct StatusSources {
    pub board: Arc<HealthBoard>,
    /// How many turns are running now.
    pub turns_running: Arc<dyn Fn() -> usize + Send + Sync>,
    /// Its depth and its parked events.
    pub inbox: Arc<dyn Inbox>,
    /// Its queues per platform.
    pub outbox: Arc<dyn Outbox>,
    pub ticker: Option<Arc<TickerHealth>>,
}

/// Rewrite the status file every 2 s from the health board, the running turns, the cron
/// ticker, the queues and the parked events, until aborted.
pub(crate) fn spawn_status_writer(mut status: StatusFile, path: PathBuf, sources: StatusSources) -> JoinHandle<()> {
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
    status.apply(&sources.board.snapshot(), (sources.turns_running)());
    status.apply_records(&sources.board.records());
    status.cron = sources.ticker.as_ref().map(|t| CronStatus::from(t.snapshot()));
    match sources.inbox.inbox_unfinished().await {
        Ok(rows) => metrics::global().set_inbox_depth(rows.len()),
        Err(e) => tracing::warn!(error = %e, "cannot count unfinished inbox events"),
    }
    status.apply_queues(metrics::global().queues());
    match sources.outbox.outbox_summary().await {
        Ok(summary) => {
            metrics::global().set_outbox_queues(&outbox_gauges(&summary, chrono::Utc::now().timestamp_millis()));
            status.apply_outbox(&summary);
        }
        // The last numbers stay: stale by seconds beats none.
        Err(e) => tracing::warn!(error = %e, "cannot read the outbox's queues"),
    }
    match sources.inbox.inbox_poisoned(PARKED_SHOWN).await {
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

/// The outbox's queues as `/metrics` gauges, ages at `now_ms`.
fn outbox_gauges(summary: &[QueueSummary], now_ms: i64) -> Vec<OutboxQueue<'_>> {
    summary
        .iter()
        .map(|q| OutboxQueue {
            platform: &q.platform,
            pending: q.pending,
            dead: q.dead,
            oldest_pending: q.oldest_pending_at.map(|at| Duration::from_millis(u64::try_from(now_ms - at).unwrap_or(0))),
        })
        .collect()
}

/// Prune finished inbox rows and old outbox records every hour, until aborted.
pub(crate) fn spawn_inbox_pruning(inbox: Arc<dyn Inbox>, outbox: Arc<dyn Outbox>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tick.tick().await;
            if let Err(e) = inbox.inbox_prune(FINISHED_KEPT).await {
                tracing::warn!(error = %e, "inbox pruning failed");
            }
            match outbox.outbox_prune(OUTBOX_RECORDS_KEPT, DEAD_LETTERS_KEPT).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(rows = n, "old outbox records pruned"),
                Err(e) => tracing::warn!(error = %e, "outbox pruning failed"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::tests::support::{dead_letter, rig};

    #[tokio::test]
    async fn a_refresh_records_the_outbox_queues_in_the_status_file() {
        let (_dir, wiring, _chat) = rig().await;
        let sources = wiring.status_sources();
        let mut status = StatusFile::new(chrono::Utc::now());
        refresh(&mut status, &sources).await;
        assert!(status.outbox.is_empty(), "{:?}", status.outbox);
        dead_letter(&wiring.store, "k1", "c1", "lost").await;
        refresh(&mut status, &sources).await;
        assert_eq!(status.outbox.len(), 1, "{:?}", status.outbox);
        let chat = &status.outbox[0];
        assert_eq!((chat.platform.as_str(), chat.pending, chat.dead, chat.oldest_pending_at), ("chat", 0, 1, None));
        // The process-wide gauges are shared with other tests, so only their presence is checked.
        let text = metrics::global().render().unwrap();
        assert!(text.contains("hermes_outbox_dead_letters{platform=\"chat\"}"), "{text}");
    }

    #[test]
    fn gauges_carry_the_oldest_waiting_messages_age() {
        let summary = [
            QueueSummary { platform: "telegram".into(), pending: 2, dead: 1, oldest_pending_at: Some(1_000) },
            QueueSummary { platform: "discord".into(), pending: 0, dead: 1, oldest_pending_at: None },
        ];
        let gauges = outbox_gauges(&summary, 61_000);
        assert_eq!(gauges[0], OutboxQueue { platform: "telegram", pending: 2, dead: 1, oldest_pending: Some(Duration::from_secs(60)) });
        assert_eq!(gauges[1].oldest_pending, None);
    }
}
