//! [`TurnLimits`]: how many turns may run and when they must stop — the gateway-wide turn
//! slots, the abort that ends running turns when a drain runs out of time, the count a drain
//! waits on, and the per-session bound on `/background` tasks.

use crate::gateway::turn::background_slots::BackgroundSlots;
use crate::gateway::turn::running::RunningTurns;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

#[derive(Default)]
pub(crate) struct TurnLimits {
    /// Bounds how many turns run at once (`gateway.max_concurrent_sessions`); `None` = unbounded.
    pub slots: Option<Arc<Semaphore>>,
    /// Cancelled when the drain timeout runs out: running turns stop and stay in the inbox to be
    /// replayed after the restart.
    pub abort: CancellationToken,
    /// Running turns, counted for the drain.
    pub running: RunningTurns,
    /// `/background` tasks running per session.
    pub background: BackgroundSlots,
}

impl TurnLimits {
    /// At most `max_concurrent` turns at once (`None`: no bound).
    pub(crate) fn new(max_concurrent: Option<usize>) -> Self {
        Self { slots: max_concurrent.map(|n| Arc::new(Semaphore::new(n.max(1)))), ..Self::default() }
    }

    /// Whether the gateway is cutting turns off for a restart (a stopped turn is then kept for
    /// replay rather than done with).
    pub(crate) fn aborting(&self) -> bool {
        self.abort.is_cancelled()
    }
}
