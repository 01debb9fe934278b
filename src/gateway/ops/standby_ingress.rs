//! Ingress on a standby: while a replica waits for the lead, it still runs the adapters any
//! replica may run (`PlatformAdapter::takes_events_on_any_replica`: listeners that answer once
//! an event is stored and hold no exclusive connection, such as the webhook routes), so a load
//! balancer can send deliveries to every replica. What they accept is stored in the shared inbox
//! and routed by the replica that leads, which the store wakes; nothing is routed here.
//!
//! When this replica starts leading they are stopped (their ports freed), and the normal start
//! runs them again with the leader's intake.

use crate::gateway::intake::inbox::Inbox;
use crate::gateway::ops::health::HealthBoard;
use crate::gateway::ops::supervisor::{self, Supervised, SupervisorLinks, SupervisorPolicy};
use crate::store::Store;
use hermes_adapter::{AdapterContext, PlatformAdapter, SenderPolicy, SessionDirectory};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long each adapter may take to stop when the replica starts leading.
const STOP_WITHIN: Duration = Duration::from_secs(5);

/// The ingress adapters running on a standby.
pub(crate) struct StandbyIngress {
    inbox: Arc<Inbox>,
    stop: CancellationToken,
    supervisors: Vec<JoinHandle<()>>,
}

/// What the standby's adapters are given besides the inbox.
pub(crate) struct IngressParts {
    pub directory: Arc<dyn SessionDirectory>,
    pub senders: Arc<dyn SenderPolicy>,
    pub policy: SupervisorPolicy,
}

/// Start, with an intake that only stores, every adapter of `adapters` that any replica may run.
pub(crate) fn start(adapters: &[Arc<dyn PlatformAdapter>], store: &Store, parts: IngressParts) -> StandbyIngress {
    let inbox = Arc::new(Inbox::storing_only(store.clone()));
    let stop = CancellationToken::new();
    // A board and links of their own: the leader's start registers the same adapters afresh.
    let board = Arc::new(HealthBoard::new());
    let links = SupervisorLinks::default();
    let mut supervisors = Vec::new();
    for adapter in adapters.iter().filter(|a| a.takes_events_on_any_replica()) {
        tracing::info!(platform = %adapter.platform(), "taking events in on this standby; the leading replica runs the turns");
        let (inbox, directory, senders) = (inbox.clone(), parts.directory.clone(), parts.senders.clone());
        let supervised = Supervised {
            adapter: adapter.clone(),
            make_context: Box::new(move |health, run_stop| {
                AdapterContext::new(inbox.clone(), directory.clone(), health, run_stop).with_sender_policy(senders.clone())
            }),
            credential_locks: None,
            leases: None,
        };
        supervisors.push(supervisor::spawn(supervised, board.clone(), parts.policy, &links, stop.clone()));
    }
    StandbyIngress { inbox, stop, supervisors }
}

impl StandbyIngress {
    /// Refuse new events, stop the adapters and wait for them (each up to [`STOP_WITHIN`]), so
    /// their ports are free for the leader's start.
    pub(crate) async fn stop(self) {
        self.inbox.stop_accepting();
        self.stop.cancel();
        for supervisor in self.supervisors {
            if tokio::time::timeout(STOP_WITHIN, supervisor).await.is_err() {
                tracing::warn!("a standby ingress adapter did not stop within {}s", STOP_WITHIN.as_secs());
            }
        }
    }
}
