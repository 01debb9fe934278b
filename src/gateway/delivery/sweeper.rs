//! The courier's sweeper: starts a worker for every outbox lane with parts on their way that
//! nobody works: at start (what the last run left), every [`SWEEP_EVERY`] in the gateway (a part
//! resent from the shell, a wake-up lost), when this replica takes a platform over (its last
//! holder's parts), and, with a store shared by replicas, as soon as another replica queues a
//! part (a cron delivery, a message sent to a platform served here), which the store announces
//! (`store::Wakeups::outbox_listen`).

use super::courier::Courier;
use crate::store::{Bell, Heard, Wakeups};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often the outbox is swept when nothing rang: the safety net, not the way in.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(15);

/// Sweep until the process ends, at least `every`. `wakeups`: the shared store's bell, `None`
/// alone on a store.
pub(crate) async fn run(courier: Arc<Courier>, wakeups: Option<Arc<dyn Wakeups>>, every: Duration) {
    let mut taken = courier.platforms_taken();
    let mut bell = None;
    loop {
        if bell.is_none()
            && let Some(wakeups) = &wakeups
        {
            bell = listen(wakeups.as_ref(), every).await;
        }
        courier.sweep().await;
        // Between sweeps, lanes the bell names are started at once; anything else sweeps.
        loop {
            match next(&mut taken, bell.as_ref(), every).await {
                Some(heard) if !heard.maybe_missed => {
                    for lane in &heard.ids {
                        courier.wake_idle(lane);
                    }
                }
                _ => break,
            }
        }
    }
}

async fn listen(wakeups: &dyn Wakeups, every: Duration) -> Option<Bell> {
    match wakeups.outbox_listen().await {
        Ok(bell) => Some(bell),
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for parts other replicas queue; sweeping the outbox every {}s instead", every.as_secs());
            None
        }
    }
}

/// What rang, or `None` when it is time to sweep (the period passed, a platform was taken over).
async fn next(taken: &mut Option<watch::Receiver<u64>>, bell: Option<&Bell>, every: Duration) -> Option<Heard> {
    let platform_taken = async {
        let changed = match taken.as_mut() {
            Some(taken) => taken.changed().await.is_ok(),
            None => false,
        };
        if !changed {
            std::future::pending::<()>().await;
        }
    };
    let rang = async {
        match bell {
            Some(bell) => bell.heard().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = tokio::time::sleep(every) => None,
        () = platform_taken => None,
        heard = rang => Some(heard),
    }
}
