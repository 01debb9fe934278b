//! Connection leases: with a store shared by replicas, a platform connection only one process
//! may hold (Telegram long polling, Discord's gateway, Slack Socket Mode, Matrix sync, IMAP IDLE:
//! every adapter with a credential) runs only in the replica holding its lease
//! (`store::Leases`). The others stand by and take it over when it expires. A platform without
//! one (a listener: the webhook routes) has a lease too, `platform:<name>`, which says where its
//! turns run; one that answers on the request (the API server) has none, and runs its turns where
//! each request landed, under [`session_claims`]. The platforms a replica holds are its [`tenures`]: their events are
//! routed, their turns run and their messages sent there, so the work spreads over the replicas.
//!
//! The holder renews every third of the TTL. A rejected renewal (another replica has it now) ends
//! the tenure at once; a renewal that cannot reach the store is retried until two thirds of the
//! TTL have passed since the last one that did, and the tenure is then given up, before any
//! standby could take it: two replicas never read one connection at the same time,
//! whatever the network does. Several leases spread over several replicas: a replica that holds
//! more waits longer before taking a free one, and takes one at a time; one that comes back
//! later is handed leases by replicas holding more ([`handover`]). What the connection has
//! read is recorded in [`cursors`] fenced by the tenure, and what a turn writes in
//! [`fenced_writes`].

mod cursors;
pub(crate) mod fenced_writes;
mod handover;
pub(crate) use handover::HandingOver;
pub(crate) mod session_claims;
pub(crate) mod tenures;

use crate::gateway::ops::health::{ClusterHealth, HealthBoard, LeaseHealth};
use crate::store::{Claims, Lease, Leases};
use hermes_adapter::{CredentialId, PlatformAdapter};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What every supervisor of this replica shares to hold connection leases.
#[derive(Clone)]
pub(crate) struct ConnectionLeases {
    pub leases: Arc<dyn Leases>,
    /// This replica's name in the lease table (host, process, and a random part).
    pub holder: String,
    pub ttl: Duration,
    /// How many leases this replica holds now: a free lease goes first to the replica with fewest.
    held: Arc<AtomicUsize>,
    /// One attempt at a time, so the count above is current when the next one is deferred by it.
    trying: Arc<tokio::sync::Mutex<()>>,
    /// Where standbys ask holders of more leases to hand one over ([`handover`]); `None`: leases
    /// move only when their holder stops.
    handovers: Option<Arc<dyn Claims>>,
    /// Held through each hand-over, so this replica hands one lease over at a time.
    handing: Arc<tokio::sync::Mutex<()>>,
}

/// Why a replica does not hold a lease yet, for the health board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Standby {
    /// Another replica holds lease `name`, until about then (the store's clock).
    HeldBy { name: String, holder: String, until: chrono::DateTime<chrono::Utc> },
    /// The store did not answer.
    StoreUnreachable(String),
}

impl std::fmt::Display for Standby {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Standby::HeldBy { name, holder, until } => {
                let what = if name.starts_with(LISTENER_PREFIX) { "serves it" } else { "holds the connection" };
                let holder = crate::gateway::ops::health::shown(holder);
                write!(f, "standby: {holder} {what} (lease until {} UTC)", until.format("%H:%M:%S"))
            }
            Standby::StoreUnreachable(why) => write!(f, "standby: the store does not answer ({why})"),
        }
    }
}

/// Whether a tenure is still this replica's, on the local monotonic clock and without asking the
/// store: not lost, and renewed within the bound after which the holder gives it up. A process
/// that was frozen (SIGSTOP, a suspended VM) wakes with the bound long past, so it stops before
/// its renewal task has even run again: checked right before each send.
#[derive(Debug)]
pub(crate) struct TenureClock {
    renewed: std::sync::Mutex<Instant>,
    bound: Duration,
    lost: CancellationToken,
}

impl TenureClock {
    /// A tenure renewed by a request sent `at`, valid for `bound` after that without another
    /// renewal, over once `lost` is. Timed from the request, not its answer: the store's expiry
    /// counts from when it ran the request, which is no earlier, so a slow answer cannot
    /// stretch the tenure past the store's.
    pub(crate) fn new(at: Instant, bound: Duration, lost: CancellationToken) -> TenureClock {
        TenureClock { renewed: std::sync::Mutex::new(at), bound, lost }
    }

    pub(crate) fn valid(&self) -> bool {
        !self.lost.is_cancelled() && self.last_renewed().elapsed() < self.bound
    }

    /// When the last renewal (or the acquisition) that succeeded was asked for.
    fn last_renewed(&self) -> Instant {
        self.renewed.lock().map(|at| *at).unwrap_or_else(|poisoned| *poisoned.into_inner())
    }

    /// How long ago the last renewal that succeeded was asked for.
    pub(crate) fn since_renewed(&self) -> Duration {
        self.last_renewed().elapsed()
    }

    /// Whether the tenure is over: lost, or given back.
    pub(crate) fn is_over(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Resolves once the tenure is over: lost, or given back.
    pub(crate) async fn over(&self) {
        self.lost.cancelled().await;
    }

    /// A renewal sent `asked` succeeded.
    pub(crate) fn renewed(&self, asked: Instant) {
        if let Ok(mut at) = self.renewed.lock() {
            *at = asked;
        }
    }
}

/// A tenure this replica holds; renewed in the background until it is lost or released.
pub(crate) struct HeldLease {
    name: String,
    token: i64,
    clock: Arc<TenureClock>,
    lost: CancellationToken,
    renewing: JoinHandle<()>,
    owner: ConnectionLeases,
}

impl ConnectionLeases {
    pub(crate) fn new(leases: Arc<dyn Leases>, holder: String, ttl: Duration) -> ConnectionLeases {
        ConnectionLeases {
            leases,
            holder,
            ttl,
            held: Arc::new(AtomicUsize::new(0)),
            trying: Arc::default(),
            handovers: None,
            handing: Arc::default(),
        }
    }

    /// Standbys ask holders of at least two more leases to hand one over, through `claims`.
    pub(crate) fn with_handovers(self, claims: Arc<dyn Claims>) -> ConnectionLeases {
        ConnectionLeases { handovers: Some(claims), ..self }
    }

    /// How many leases this replica holds now.
    fn held_now(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// The lease name of a connection made with `credential`: one lease per account, whatever
    /// the adapter is called in each replica's configuration.
    pub(crate) fn name_for(credential: &CredentialId) -> String {
        format!("connection:{}", credential.file_stem())
    }

    /// The lease `adapter` is served under: its connection's, or for a listener without a
    /// credential, its platform's (`platform:<name>`).
    pub(crate) fn lease_of(adapter: &dyn PlatformAdapter) -> String {
        match adapter.credential() {
            Some(credential) => Self::name_for(&credential),
            None => format!("{LISTENER_PREFIX}{}", adapter.platform()),
        }
    }

    /// Wait until this replica holds `name` (`None` when `stop` is cancelled first). `standby`
    /// hears each reason it does not yet.
    pub(crate) async fn acquire(&self, name: &str, stop: &CancellationToken, mut standby: impl FnMut(Standby)) -> Option<HeldLease> {
        loop {
            // One attempt at a time in this replica, so the count deferring it is current.
            let trying = tokio::select! {
                trying = self.trying.lock() => trying,
                () = stop.cancelled() => return None,
            };
            // The more this replica holds, the later it tries: of several replicas seeing a lease
            // free, the one holding fewest takes it.
            let defer = self.ttl / 6 * self.held_now() as u32;
            if !defer.is_zero() && !pause(defer, stop).await {
                return None;
            }
            let asked = Instant::now();
            let mut asking = false;
            match self.leases.lease_acquire(name, &self.holder, self.ttl).await {
                Ok(Some(lease)) => {
                    self.asked_and_taken(name).await;
                    return Some(self.hold(lease, asked));
                }
                Ok(None) => {
                    drop(trying);
                    match self.leases.leases().await {
                        Ok(all) => {
                            asking = self.ask_if_uneven(name, &all).await;
                            standby(current_holder(name, all));
                        }
                        Err(e) => standby(Standby::StoreUnreachable(e.to_string())),
                    }
                }
                Err(e) => {
                    drop(trying);
                    standby(Standby::StoreUnreachable(e.to_string()));
                }
            }
            // Having asked for it, look again soon: its holder releases it as soon as it can.
            if !pause(if asking { self.ttl / 10 } else { self.ttl / 3 }, stop).await {
                return None;
            }
        }
    }

    fn hold(&self, lease: Lease, asked: Instant) -> HeldLease {
        self.held.fetch_add(1, Ordering::Relaxed);
        tracing::info!(lease = %lease.name, token = lease.token, "this replica holds the connection");
        let lost = CancellationToken::new();
        let clock = Arc::new(TenureClock::new(asked, self.ttl * 2 / 3, lost.clone()));
        let renewing = tokio::spawn(keep_renewing(self.clone(), lease.name.clone(), lease.token, clock.clone()));
        HeldLease { name: lease.name, token: lease.token, clock, lost, renewing, owner: self.clone() }
    }
}

impl HeldLease {
    /// The lease's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether the tenure is over.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// The tenure's clock, for whoever must check it before acting (the courier).
    pub(crate) fn clock(&self) -> Arc<TenureClock> {
        self.clock.clone()
    }

    /// Resolves when the tenure is over: the connection must stop at once.
    pub(crate) async fn lost(&self) {
        self.lost.cancelled().await;
    }

    /// End the tenure now (the adapter stopped), so a standby takes over without waiting for
    /// the TTL.
    pub(crate) async fn release(self) {
        self.renewing.abort();
        if !self.lost.is_cancelled()
            && let Err(e) = self.owner.leases.lease_release(&self.name, &self.owner.holder, self.token).await
        {
            tracing::warn!(lease = %self.name, "cannot release the lease ({e}); a standby takes it when it expires");
        }
        self.lost.cancel();
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        self.renewing.abort();
        self.lost.cancel();
        self.owner.held.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Renew every third of the TTL until a renewal is refused, or none has succeeded for two thirds
/// of it; then cancel `lost`.
///
/// Woken late (the process was starved of CPU or frozen), the tenure's clock has run out: nothing
/// is sent or written under it from then on. The store then decides: the renewal succeeds only
/// while the lease has not expired, under this tenure's token (which every acquisition changes),
/// so a success proves no other replica held it meanwhile and the tenure goes on; a refusal ends
/// it. Each renewal is given the bound to answer, so a lapse is always settled within it.
async fn keep_renewing(owner: ConnectionLeases, name: String, token: i64, clock: Arc<TenureClock>) {
    let every = owner.ttl / 3;
    let give_up_after = owner.ttl * 2 / 3;
    // From the acquisition, not from when this task first runs: a starved runtime may start it late.
    let mut renewed = clock.last_renewed();
    let mut failing = false;
    loop {
        // After a failure, retry soon: the tenure must be renewed or given up within the bound.
        let wait = if failing { every / 5 } else { every };
        tokio::time::sleep(wait.min(give_up_after.saturating_sub(renewed.elapsed())).max(Duration::from_millis(10))).await;
        failing = false;
        let late = !clock.valid();
        if late {
            tracing::warn!(lease = %name, token, "the lease went unrenewed past its bound (was the process paused or starved?); nothing is sent under it until the store confirms it");
        }
        let asked = Instant::now();
        let renewal = match tokio::time::timeout(give_up_after, owner.leases.lease_renew(&name, &owner.holder, token, owner.ttl)).await {
            Ok(answer) => answer.map_err(|e| e.to_string()),
            Err(_) => Err(format!("no answer within {} ms", give_up_after.as_millis())),
        };
        match renewal {
            Ok(true) => {
                if late {
                    tracing::info!(lease = %name, token, "the store confirmed the lease: still this replica's");
                }
                renewed = asked;
                clock.renewed(asked);
            }
            Ok(false) => {
                tracing::warn!(lease = %name, token, "the lease was lost (another replica holds it now); stopping the connection");
                break;
            }
            Err(e) if renewed.elapsed() >= give_up_after => {
                tracing::warn!(lease = %name, token, "the lease could not be renewed for {}s ({e}); stopping the connection before it expires", renewed.elapsed().as_secs());
                break;
            }
            Err(e) => {
                tracing::warn!(lease = %name, "renewing the lease failed ({e}); retrying");
                failing = true;
            }
        }
    }
    clock.lost.cancel();
}

/// Keep this replica's view of the shared store on `board` (and `/metrics`): every third of a
/// lease, whether the store answers and who holds each connection. The store counts as lost
/// once it has not answered for two thirds of a lease, when the connections are given up too.
pub(crate) fn watch_cluster(leases: ConnectionLeases, board: Arc<HealthBoard>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut answered = Instant::now();
        let mut last = Vec::new();
        loop {
            let view = match leases.leases.leases().await {
                Ok(all) => {
                    answered = Instant::now();
                    last = all.into_iter().map(LeaseHealth::from).collect();
                    ClusterHealth { replica: leases.holder.clone(), store_reachable: true, store_error: None, leases: last.clone() }
                }
                Err(e) => ClusterHealth {
                    replica: leases.holder.clone(),
                    store_reachable: answered.elapsed() < leases.ttl * 2 / 3,
                    store_error: Some(e.to_string()),
                    leases: last.clone(),
                },
            };
            crate::observe::metrics::global().set_cluster(view.store_reachable, leases.held.load(Ordering::Relaxed));
            board.set_cluster(view);
            tokio::time::sleep(leases.ttl / 3).await;
        }
    })
}

impl From<Lease> for LeaseHealth {
    fn from(lease: Lease) -> Self {
        LeaseHealth { name: lease.name, holder: lease.holder, since: lease.since, expires_at: lease.expires_at }
    }
}

/// The lease names of listeners: `platform:<name>`.
const LISTENER_PREFIX: &str = "platform:";

/// With a store shared by replicas, the leases this replica serves platforms under.
pub(crate) fn replica_leases(config: &crate::config::Config, store: &crate::store::Store) -> Option<ConnectionLeases> {
    if !config.store.shared_by_replicas() {
        return None;
    }
    let ttl = lease_ttl(config);
    let replica = replica_name(config);
    tracing::info!(replica = %replica, ttl_secs = ttl.as_secs(), "platforms are leased through the shared store");
    Some(ConnectionLeases::new(store.clone(), replica, ttl).with_handovers(store.clone()))
}

/// The leases' time to live (`store.lease_ttl_seconds`).
pub(crate) fn lease_ttl(config: &crate::config::Config) -> Duration {
    Duration::from_secs(config.store.lease_ttl_seconds.unwrap_or(crate::config::DEFAULT_LEASE_TTL_SECS))
}

/// With a store shared by replicas, what this replica's turns take session claims with, for the
/// platforms served where their events are accepted (`tenures`).
pub(crate) fn replica_session_claims(
    config: &crate::config::Config,
    store: &crate::store::Store,
    tenures: &Arc<tenures::Tenures>,
) -> Option<Arc<session_claims::SessionClaims>> {
    config
        .store
        .shared_by_replicas()
        .then(|| session_claims::SessionClaims::new(store.clone(), replica_name(config), lease_ttl(config), tenures.clone()))
}

/// Hold `adapter`'s lease ([`ConnectionLeases::lease_of`]) for as long as the gateway runs
/// (`stop`), waiting as a standby while another replica does, for a listener any replica runs:
/// its adapter takes events in everywhere, and the tenure says where they are routed. Handed
/// over on the ask of a replica holding fewer leases, it stands by again.
pub(crate) fn own(
    leases: ConnectionLeases,
    adapter: &dyn PlatformAdapter,
    tenures: Arc<tenures::Tenures>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    let (name, platform) = (ConnectionLeases::lease_of(adapter), adapter.platform().to_string());
    tokio::spawn(async move {
        let say = |why: Standby| tracing::debug!(platform = %platform, "{why}");
        loop {
            let Some(held) = leases.acquire(&name, &stop, say).await else { return };
            tenures.take(&platform, held.clock()).await;
            tokio::select! {
                // Lost: `Tenures` stops the gateway.
                () = held.lost() => return,
                () = stop.cancelled() => {
                    tenures.give_back(&platform);
                    held.release().await;
                    return;
                }
                handing = leases.handed_over(&name, &tenures, &platform) => {
                    tenures.give_back(&platform);
                    held.release().await;
                    // The asker takes it meanwhile; if it does not, this replica takes it back.
                    let stopped = !pause(leases.ttl, &stop).await;
                    drop(handing);
                    if stopped {
                        return;
                    }
                }
            }
        }
    })
}

/// This replica's name: `store.replica`, or one made up once per process.
pub(crate) fn replica_name(config: &crate::config::Config) -> String {
    static MADE_UP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    config.store.replica.clone().unwrap_or_else(|| MADE_UP.get_or_init(default_replica_name).clone())
}

/// This replica's name when none is configured: the host, the process and a random part, so a
/// restarted process is a new holder (its old tenure is over).
pub(crate) fn default_replica_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    let host = if host.is_empty() { "host".to_string() } else { host };
    format!("{host}-{}-{:04x}", std::process::id(), rand::random::<u16>())
}

/// Who holds lease `name`, in the lease table `all`.
fn current_holder(name: &str, all: Vec<Lease>) -> Standby {
    all.into_iter().find(|l| l.name == name).map_or(Standby::StoreUnreachable("the lease vanished".into()), |l| Standby::HeldBy {
        name: l.name,
        holder: l.holder,
        until: l.expires_at,
    })
}

/// Sleep `duration` unless `stop` comes first (then `false`).
async fn pause(duration: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        () = tokio::time::sleep(duration) => true,
        () = stop.cancelled() => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::ops::health::AdapterState;
    use crate::gateway::ops::supervisor::tests::NullSink;
    use crate::gateway::ops::supervisor::{self, Supervised, SupervisorLinks, SupervisorPolicy};
    use crate::store::{SqliteStore, StoreError};
    use async_trait::async_trait;
    use hermes_adapter::{AdapterContext, AdapterError, Capabilities, OutboundMessage, Platform, PlatformAdapter, SendError, SendReceipt};
    use std::sync::atomic::AtomicBool;

    /// One bot account's connection as the platform sees it: how many replicas read it at once,
    /// and the most that ever did.
    #[derive(Default)]
    struct Connection {
        reading: AtomicUsize,
        most: AtomicUsize,
    }

    /// An adapter that holds the shared connection until its run is stopped.
    struct Polling {
        platform: Platform,
        caps: Capabilities,
        connection: Arc<Connection>,
        runs: AtomicUsize,
    }

    #[async_trait]
    impl PlatformAdapter for Polling {
        fn platform(&self) -> &Platform {
            &self.platform
        }
        fn capabilities(&self) -> &Capabilities {
            &self.caps
        }
        fn credential(&self) -> Option<CredentialId> {
            Some(CredentialId::new("Telegram bot token", "123:shared-by-every-replica"))
        }
        async fn run(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
            self.runs.fetch_add(1, Ordering::SeqCst);
            let now = self.connection.reading.fetch_add(1, Ordering::SeqCst) + 1;
            self.connection.most.fetch_max(now, Ordering::SeqCst);
            // Decrements however the run ends: returned, or dropped by the supervisor.
            struct Reading<'a>(&'a AtomicUsize);
            impl Drop for Reading<'_> {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let _reading = Reading(&self.connection.reading);
            ctx.health.mark_connected();
            ctx.shutdown.cancelled().await;
            Ok(())
        }
        async fn send(&self, _msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
            Ok(SendReceipt::default())
        }
    }

    /// A replica's way to the shared store, which a test can cut (a network partition).
    struct Reachable {
        store: Arc<SqliteStore>,
        cut: AtomicBool,
    }

    impl Reachable {
        fn check(&self) -> Result<(), StoreError> {
            if self.cut.load(Ordering::SeqCst) {
                Err(StoreError::Unreachable { database: "test".into(), reason: "partitioned".into() })
            } else {
                Ok(())
            }
        }
    }

    #[async_trait]
    impl Leases for Reachable {
        async fn lease_acquire(&self, name: &str, holder: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
            self.check()?;
            self.store.lease_acquire(name, holder, ttl).await
        }
        async fn lease_renew(&self, name: &str, holder: &str, token: i64, ttl: Duration) -> Result<bool, StoreError> {
            self.check()?;
            self.store.lease_renew(name, holder, token, ttl).await
        }
        async fn lease_release(&self, name: &str, holder: &str, token: i64) -> Result<bool, StoreError> {
            self.check()?;
            self.store.lease_release(name, holder, token).await
        }
        async fn leases(&self) -> Result<Vec<Lease>, StoreError> {
            self.check()?;
            self.store.leases().await
        }
        async fn cursor_get(&self, name: &str) -> Result<Option<String>, StoreError> {
            self.check()?;
            self.store.cursor_get(name).await
        }
        async fn cursor_put(&self, lease: &str, token: i64, name: &str, value: &str) -> Result<bool, StoreError> {
            self.check()?;
            self.store.cursor_put(lease, token, name, value).await
        }
    }

    struct Replica {
        adapter: Arc<Polling>,
        board: Arc<HealthBoard>,
        way: Arc<Reachable>,
        stop: CancellationToken,
        task: JoinHandle<()>,
    }

    fn replica(name: &str, store: &Arc<SqliteStore>, connection: &Arc<Connection>, ttl: Duration) -> Replica {
        let adapter = Arc::new(Polling {
            platform: Platform::new("telegram"),
            caps: Capabilities::http(),
            connection: connection.clone(),
            runs: AtomicUsize::new(0),
        });
        let way = Arc::new(Reachable { store: store.clone(), cut: AtomicBool::new(false) });
        let board = Arc::new(HealthBoard::new());
        let stop = CancellationToken::new();
        let supervised = Supervised {
            adapter: adapter.clone(),
            make_context: Box::new(|health, run_stop| AdapterContext::new(Arc::new(NullSink), Arc::new(NullSink), health, run_stop)),
            credential_locks: None,
            leases: Some(ConnectionLeases::new(way.clone(), name.to_string(), ttl)),
        };
        let policy = SupervisorPolicy {
            backoff_base: Duration::from_millis(50),
            backoff_cap: Duration::from_millis(200),
            reset_after: Duration::from_secs(30),
        };
        let task = supervisor::spawn(supervised, board.clone(), policy, &SupervisorLinks::default(), stop.clone());
        Replica { adapter, board, way, stop, task }
    }

    fn state(replica: &Replica) -> Option<AdapterState> {
        replica.board.snapshot().adapters.first().map(|a| a.state)
    }

    /// Waits until `done` holds, up to `limit`; how long it took.
    async fn within(limit: Duration, done: impl Fn() -> bool) -> Duration {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < limit, "not within {limit:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        started.elapsed()
    }

    /// A lease held by `replica-a` on a fresh store, and the store.
    async fn held_alone(dir: &tempfile::TempDir, ttl: Duration) -> (Arc<SqliteStore>, HeldLease) {
        let store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let leases = ConnectionLeases::new(store.clone(), "replica-a".into(), ttl);
        let held = leases.acquire("platform:webhook", &CancellationToken::new(), |_| {}).await.expect("nobody else holds it");
        (store, held)
    }

    /// Starved of CPU past its bound but not past the TTL (the one thread of this runtime is
    /// blocked), the holder sends nothing meanwhile, then asks the store, which confirms the
    /// lease under the same token: it goes on rather than stopping a gateway that is still the
    /// only holder.
    #[tokio::test(flavor = "current_thread")]
    async fn a_holder_starved_past_its_bound_goes_on_once_the_store_confirms_the_lease() {
        let dir = tempfile::tempdir().unwrap();
        let ttl = Duration::from_secs(3);
        let (store, held) = held_alone(&dir, ttl).await;
        let clock = held.clock();
        std::thread::sleep(Duration::from_millis(2300));
        assert!(!clock.valid(), "past its bound: nothing is sent or written under it");
        within(Duration::from_secs(2), || clock.valid()).await;
        assert!(!held.is_lost());
        let lease = store.leases().await.unwrap().into_iter().find(|l| l.name == "platform:webhook").unwrap();
        assert_eq!((lease.holder.as_str(), lease.token), ("replica-a", held.token), "the same tenure, confirmed");
    }

    /// Starved past the TTL, the lease has expired in the store: the renewal is refused (another
    /// replica may have taken it) and the tenure ends.
    #[tokio::test(flavor = "current_thread")]
    async fn a_holder_starved_past_the_ttl_ends_its_tenure() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, held) = held_alone(&dir, Duration::from_secs(1)).await;
        std::thread::sleep(Duration::from_millis(1300));
        tokio::time::timeout(Duration::from_secs(2), held.lost()).await.expect("the tenure ends");
        assert!(!held.clock().valid());
    }

    #[tokio::test]
    async fn one_replica_reads_the_connection_and_a_standby_takes_over_when_it_stops() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let connection = Arc::new(Connection::default());
        let ttl = Duration::from_millis(600);
        let a = replica("replica-a", &store, &connection, ttl);
        within(Duration::from_secs(5), || state(&a) == Some(AdapterState::Connected)).await;
        let b = replica("replica-b", &store, &connection, ttl);
        within(Duration::from_secs(5), || state(&b) == Some(AdapterState::Standby)).await;
        let detail = b.board.snapshot().adapters[0].detail.clone().unwrap_or_default();
        assert!(detail.contains("replica-a holds the connection"), "the standby says who holds it: {detail}");
        tokio::time::sleep(ttl * 2).await;
        assert_eq!(b.adapter.runs.load(Ordering::SeqCst), 0, "the standby never connected while the holder renewed");

        // A clean stop releases the lease: the standby need not wait for it to expire.
        a.stop.cancel();
        a.task.await.unwrap();
        let took = within(Duration::from_secs(5), || state(&b) == Some(AdapterState::Connected)).await;
        assert!(took < ttl, "taken over on release, before the TTL: {took:?}");
        assert_eq!(connection.most.load(Ordering::SeqCst), 1, "never two readers at once");
        b.stop.cancel();
        b.task.await.unwrap();
    }

    #[tokio::test]
    async fn a_holder_cut_off_from_the_store_stops_reading_before_a_standby_starts() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.unwrap());
        let connection = Arc::new(Connection::default());
        let ttl = Duration::from_millis(900);
        let a = replica("replica-a", &store, &connection, ttl);
        within(Duration::from_secs(5), || state(&a) == Some(AdapterState::Connected)).await;
        let b = replica("replica-b", &store, &connection, ttl);
        within(Duration::from_secs(5), || state(&b) == Some(AdapterState::Standby)).await;

        a.way.cut.store(true, Ordering::SeqCst);
        within(Duration::from_secs(5), || {
            a.adapter.connection.reading.load(Ordering::SeqCst) == 1 && state(&b) == Some(AdapterState::Connected)
        })
        .await;
        assert_ne!(state(&a), Some(AdapterState::Connected), "the partitioned replica gave the connection up");
        assert_eq!(connection.most.load(Ordering::SeqCst), 1, "the standby started only after the holder stopped");

        // Its watch says so: the store does not answer, so it is not ready.
        let watch = watch_cluster(ConnectionLeases::new(a.way.clone(), "replica-a".into(), ttl), a.board.clone());
        within(Duration::from_secs(5), || a.board.snapshot().cluster.is_some_and(|c| !c.store_reachable)).await;
        let snapshot = a.board.snapshot();
        assert!(!snapshot.ready, "{snapshot:?}");
        let lines = snapshot.cluster.unwrap().lines(chrono::Utc::now()).join("\n");
        assert!(lines.contains("replica: replica-a (the shared store does NOT answer (cannot reach"), "{lines}");

        // Healed, the old holder stands by: the lease is the other replica's now.
        a.way.cut.store(false, Ordering::SeqCst);
        within(Duration::from_secs(5), || a.board.snapshot().cluster.is_some_and(|c| c.store_reachable)).await;
        let lines = a.board.snapshot().cluster.unwrap().lines(chrono::Utc::now()).join("\n");
        assert!(lines.contains("telegram-bot-token-") && lines.contains(": held by replica-b since"), "who holds it, since when: {lines}");
        watch.abort();
        within(Duration::from_secs(5), || state(&a) == Some(AdapterState::Standby)).await;
        tokio::time::sleep(ttl).await;
        assert_eq!(connection.most.load(Ordering::SeqCst), 1);
        for r in [a, b] {
            r.stop.cancel();
            r.task.await.unwrap();
        }
    }
}
