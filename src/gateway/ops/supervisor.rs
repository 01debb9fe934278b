//! The supervisor: one task per adapter that runs it, watches its liveness, and restarts it with
//! backoff when it fails — or parks it when retrying cannot help. It also owns the pause switches
//! `/platform pause|resume` flips ([`PlatformControls`]) and the heartbeat the systemd watchdog
//! reads ([`Pulse`]).

use crate::gateway::ops::backoff::Backoff;
use crate::gateway::ops::credential_lock::{self, CredentialLock, CredentialLockError};
use crate::gateway::ops::health::{AdapterState, HealthBoard};
use crate::gateway::ops::lease::tenures::Tenures;
use crate::gateway::ops::lease::{ConnectionLeases, HandingOver, HeldLease};
use hermes_adapter::{AdapterContext, AdapterError, HealthReporter, PlatformAdapter};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy)]
pub(crate) struct SupervisorPolicy {
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// A run must stay connected this long before the backoff resets.
    pub reset_after: Duration,
}

impl Default for SupervisorPolicy {
    fn default() -> Self {
        Self { backoff_base: Duration::from_secs(2), backoff_cap: Duration::from_secs(300), reset_after: Duration::from_secs(60) }
    }
}

/// Everything needed to (re)build an adapter's context.
pub(crate) struct Supervised {
    pub adapter: Arc<dyn PlatformAdapter>,
    /// Builds one run's context from its health reporter and the token that ends that run
    /// (cancelled at shutdown, or when the adapter is paused).
    pub make_context: Box<dyn Fn(HealthReporter, CancellationToken) -> AdapterContext + Send + Sync>,
    /// Where the machine-wide credential locks live; `None` runs without them.
    pub credential_locks: Option<CredentialLocks>,
    /// With a store shared by replicas: the leases that keep an adapter with a credential
    /// connected in one replica at a time. `None` (one machine) runs it without.
    pub leases: Option<ConnectionLeases>,
}

/// What the supervisors share with the rest of the gateway: the pause switches `/platform`
/// flips, and the pulse the systemd watchdog reads.
#[derive(Debug, Clone, Default)]
pub(crate) struct SupervisorLinks {
    pub controls: Arc<PlatformControls>,
    pub pulse: Arc<Pulse>,
}

/// The credential lock directory and the HERMES_HOME this gateway names in its locks.
#[derive(Debug, Clone)]
pub(crate) struct CredentialLocks {
    pub dir: PathBuf,
    pub home: PathBuf,
}

/// The adapter's credential lock, taken before its first run and held until the supervisor ends
/// (a restart after a dropped connection must not let another gateway in between).
enum HeldCredential {
    NotYetTaken,
    /// `None`: the adapter has no credential, locks are off, or the lock directory is unusable.
    Held {
        _lock: Option<CredentialLock>,
    },
}

impl HeldCredential {
    /// Take the lock if it is not held yet. `Err` names the gateway holding it.
    fn ensure(&mut self, supervised: &Supervised, platform: &str) -> Result<(), AdapterError> {
        if matches!(self, HeldCredential::Held { .. }) {
            return Ok(());
        }
        let (Some(locks), Some(credential)) = (&supervised.credential_locks, supervised.adapter.credential()) else {
            *self = HeldCredential::Held { _lock: None };
            return Ok(());
        };
        match credential_lock::acquire(&locks.dir, &credential, &locks.home) {
            Ok(lock) => {
                *self = HeldCredential::Held { _lock: Some(lock) };
                Ok(())
            }
            Err(e @ CredentialLockError::InUse { .. }) => Err(AdapterError::retryable("credential_in_use", e.to_string())),
            Err(e @ CredentialLockError::Io { .. }) => {
                // Without a usable lock directory the bot still runs; only the guard against a
                // second gateway on the same token is lost, and that is said once.
                tracing::warn!(platform, "{e}; running without the one-gateway-per-token guard");
                *self = HeldCredential::Held { _lock: None };
                Ok(())
            }
        }
    }
}

/// Why an adapter cannot be paused or resumed: no adapter of that name runs here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no adapter named `{name}` runs here")]
pub(crate) struct UnknownPlatform {
    pub name: String,
    /// The adapters that do, sorted.
    pub known: Vec<String>,
}

/// One pause switch per supervised adapter. A paused adapter's run is stopped (it receives
/// nothing) until it is resumed; the switch outlives runs and restarts of the adapter.
#[derive(Debug, Default)]
pub(crate) struct PlatformControls {
    switches: Mutex<BTreeMap<String, watch::Sender<bool>>>,
}

impl PlatformControls {
    /// The switch of `platform`, created unpaused on first use.
    pub(crate) fn register(&self, platform: &str) -> watch::Receiver<bool> {
        let mut switches = self.switches.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        switches.entry(platform.to_string()).or_insert_with(|| watch::channel(false).0).subscribe()
    }

    /// Every supervised adapter, sorted.
    pub(crate) fn platforms(&self) -> Vec<String> {
        self.switches.lock().map(|s| s.keys().cloned().collect()).unwrap_or_default()
    }

    #[cfg(test)]
    pub(crate) fn is_paused(&self, platform: &str) -> bool {
        self.switches.lock().ok().and_then(|s| s.get(platform).map(|tx| *tx.borrow())).unwrap_or(false)
    }

    /// Pause or resume `platform`; `Ok(false)` when it already was in that state.
    pub(crate) fn set_paused(&self, platform: &str, paused: bool) -> Result<bool, UnknownPlatform> {
        let switches = self.switches.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(switch) = switches.get(platform) else {
            return Err(UnknownPlatform { name: platform.to_string(), known: switches.keys().cloned().collect() });
        };
        Ok(switch.send_if_modified(|current| std::mem::replace(current, paused) != paused))
    }
}

/// How often a live supervisor beats.
pub(crate) const BEAT_EVERY: Duration = Duration::from_millis(250);

/// The supervisors' heartbeats: each live supervisor task records when it last ran. A supervisor
/// that stops beating (its task wedged, or panicked) goes stale, and the systemd watchdog pings
/// stop ([`crate::gateway::ops::notify`]) so that systemd restarts the gateway. A supervisor that ends on
/// purpose (stopped, or its adapter parked) retires its beat.
#[derive(Debug, Default)]
pub(crate) struct Pulse {
    beats: Mutex<BTreeMap<String, Instant>>,
}

impl Pulse {
    pub(crate) fn beat(&self, platform: &str) {
        if let Ok(mut beats) = self.beats.lock() {
            beats.insert(platform.to_string(), Instant::now());
        }
    }

    fn retire(&self, platform: &str) {
        if let Ok(mut beats) = self.beats.lock() {
            beats.remove(platform);
        }
    }

    /// The supervisors that have not beaten for `max_age`. A poisoned lock counts as stale: some
    /// supervisor panicked while holding it.
    pub(crate) fn stale(&self, max_age: Duration) -> Vec<String> {
        match self.beats.lock() {
            Ok(beats) => beats.iter().filter(|(_, at)| at.elapsed() > max_age).map(|(name, _)| name.clone()).collect(),
            Err(_) => vec!["(pulse lock poisoned)".to_string()],
        }
    }

    /// Beat every [`BEAT_EVERY`]; never resolves. Awaited beside the adapter's run in the
    /// supervisor's own task, so the beats stop when that task stops being polled.
    async fn keep_beating(&self, platform: &str) {
        let mut tick = tokio::time::interval(BEAT_EVERY);
        loop {
            tick.tick().await;
            self.beat(platform);
        }
    }
}

/// Spawn the supervising task. It ends when `stop` is cancelled (after the adapter's run returns)
/// or when the adapter is parked.
pub(crate) fn spawn(
    supervised: Supervised,
    board: Arc<HealthBoard>,
    policy: SupervisorPolicy,
    links: &SupervisorLinks,
    stop: CancellationToken,
) -> JoinHandle<()> {
    let platform = supervised.adapter.platform().to_string();
    // Registered before the task starts, so `/platform` and the watchdog know it at once.
    let paused = links.controls.register(&platform);
    links.pulse.beat(&platform);
    let pulse = links.pulse.clone();
    tokio::spawn(async move {
        supervise(supervised, board, policy, Switches { paused, pulse: pulse.clone() }, stop).await;
        pulse.retire(&platform);
    })
}

/// A supervisor's own ends of the [`SupervisorLinks`].
struct Switches {
    paused: watch::Receiver<bool>,
    pulse: Arc<Pulse>,
}

/// How one run of the adapter ended.
enum RunEnd {
    Returned(Result<(), AdapterError>),
    Paused,
    /// The connection lease was lost: another replica holds the connection now.
    LeaseLost,
    /// The platform was handed over to a replica holding fewer leases, which asked for it;
    /// nothing else is handed over until this is dropped.
    HandedOver(HandingOver),
}

async fn supervise(supervised: Supervised, board: Arc<HealthBoard>, policy: SupervisorPolicy, switches: Switches, stop: CancellationToken) {
    let platform = supervised.adapter.platform().to_string();
    let backoff = Backoff::new(policy.backoff_base, policy.backoff_cap);
    let reporter = HealthReporter::new();
    board.register(&platform, reporter.clone());
    board.set_liveness_timeout(&platform, supervised.adapter.liveness_timeout());
    let credential = HeldCredential::NotYetTaken;
    let supervisor = Supervisor { supervised, board, policy, switches, stop, platform, reporter, backoff, credential, lease: None };
    supervisor.keep_running().await;
}

/// One adapter's supervision: what [`supervise`] keeps between runs of the adapter.
struct Supervisor {
    supervised: Supervised,
    board: Arc<HealthBoard>,
    policy: SupervisorPolicy,
    switches: Switches,
    stop: CancellationToken,
    platform: String,
    reporter: HealthReporter,
    backoff: Backoff,
    credential: HeldCredential,
    /// This replica's tenure of the connection lease, while it holds one.
    lease: Option<HeldLease>,
}

impl Supervisor {
    /// Run the adapter again and again until the gateway stops or the adapter is parked.
    async fn keep_running(mut self) {
        loop {
            let paused = *self.switches.paused.borrow();
            if paused && !self.hold_while_paused().await {
                return;
            }
            if !self.hold_lease().await {
                self.set_state(AdapterState::Stopped, None);
                return;
            }
            let (end, connected_for) = self.run_adapter().await;
            if matches!(end, RunEnd::Returned(Err(AdapterError::Fatal { .. }))) || self.stop.is_cancelled() {
                // Whoever serves the platform next need not wait out the TTL. Any other end keeps
                // the lease (renewals go on): the platform's turns still run here, and a pause or
                // a reconnect must not hand them to another replica halfway.
                self.release_lease().await;
            }
            if self.stop.is_cancelled() {
                self.set_state(AdapterState::Stopped, None);
                return;
            }
            let error = match end {
                RunEnd::Paused => {
                    tracing::info!(platform = %self.platform, "adapter paused");
                    continue;
                }
                RunEnd::HandedOver(handing) => {
                    self.release_lease().await;
                    self.set_state(AdapterState::Standby, Some("handed over to a replica holding fewer leases".into()));
                    // The asker takes it meanwhile; if it does not, this replica takes it back.
                    let stood_aside = self.stand_aside().await;
                    drop(handing);
                    if !stood_aside {
                        self.set_state(AdapterState::Stopped, None);
                        return;
                    }
                    continue;
                }
                RunEnd::LeaseLost => {
                    // The gateway stops at once (`Tenures::lost`); until then this stands by.
                    self.lease = None;
                    continue;
                }
                RunEnd::Returned(Err(AdapterError::Fatal { code, message })) => {
                    tracing::error!(platform = %self.platform, code = %code, "adapter parked: {message}");
                    self.set_state(AdapterState::Parked, Some(format!("{code}: {message}")));
                    return;
                }
                RunEnd::Returned(Err(e)) => e.to_string(),
                RunEnd::Returned(Ok(())) => "the connection ended".to_string(),
            };
            if !self.back_off(error, connected_for).await {
                return;
            }
        }
    }

    /// The board's entry for this adapter, with the backoff's attempt count.
    fn set_state(&self, state: AdapterState, detail: Option<String>) {
        self.board.set(&self.platform, state, detail, self.backoff.attempt());
    }

    /// With leases, hold this adapter's (waiting as a standby while another replica does), and
    /// serve its platform under it; `false` when the gateway stops first. Without leases there is
    /// nothing to hold.
    async fn hold_lease(&mut self) -> bool {
        let Some(leases) = &self.supervised.leases else {
            return true;
        };
        if self.lease.as_ref().is_some_and(|held| !held.is_lost()) {
            return true;
        }
        let name = ConnectionLeases::lease_of(self.supervised.adapter.as_ref());
        let (board, platform) = (self.board.clone(), self.platform.clone());
        let attempt = self.backoff.attempt();
        let held =
            leases.acquire(&name, &self.stop, |why| board.set(&platform, AdapterState::Standby, Some(why.to_string()), attempt)).await;
        if let Some(held) = &held {
            self.board.tenures().take(&self.platform, held.clock()).await;
        }
        self.lease = held;
        self.lease.is_some()
    }

    /// Wait one TTL after handing the lease over, so the replica that asked takes it first;
    /// `false` when the gateway stops meanwhile.
    async fn stand_aside(&self) -> bool {
        let Some(leases) = &self.supervised.leases else { return true };
        tokio::select! {
            () = tokio::time::sleep(leases.ttl) => true,
            () = self.stop.cancelled() => false,
        }
    }

    async fn release_lease(&mut self) {
        if let Some(held) = self.lease.take() {
            self.board.tenures().give_back(&self.platform);
            held.release().await;
        }
    }

    /// Paused by an admin: wait for the resume (true), or for the stop (false, marked stopped).
    async fn hold_while_paused(&mut self) -> bool {
        self.set_state(AdapterState::Paused, Some("paused by an admin (/platform resume)".into()));
        if !wait_for_resume(&mut self.switches, &self.platform, &self.stop).await {
            self.set_state(AdapterState::Stopped, None);
            return false;
        }
        tracing::info!(platform = %self.platform, "adapter resumed");
        self.backoff.reset();
        true
    }

    /// One run from a fresh start: how it ended, and how long it stayed connected.
    async fn run_adapter(&mut self) -> (RunEnd, Duration) {
        self.set_state(AdapterState::Starting, None);
        self.reporter.mark_disconnected();
        self.reporter.set_degraded(None);
        let started = Instant::now();
        let end = match self.credential.ensure(&self.supervised, &self.platform) {
            Ok(()) => {
                let tenures = self.board.tenures();
                let held = self.lease.as_ref().zip(self.supervised.leases.as_ref()).map(|(held, leases)| (held, leases, tenures));
                run_once(&self.supervised, &self.reporter, &mut self.switches, held, &self.platform, &self.stop).await
            }
            Err(in_use) => RunEnd::Returned(Err(in_use)),
        };
        let connected_for = if self.reporter.is_connected() { started.elapsed() } else { Duration::ZERO };
        self.reporter.mark_disconnected();
        (end, connected_for)
    }

    /// Wait out the backoff after a failed run: false when the gateway stops meanwhile (marked
    /// stopped). A run that stayed connected long enough starts the backoff over.
    async fn back_off(&mut self, error: String, connected_for: Duration) -> bool {
        if connected_for >= self.policy.reset_after {
            self.backoff.reset();
        }
        let delay = self.backoff.next_delay(rand::random::<f64>());
        self.board.record_delay(&self.platform, delay);
        tracing::warn!(platform = %self.platform, attempt = self.backoff.attempt(), retry_in_ms = delay.as_millis() as u64, "adapter failed: {error}");
        self.set_state(AdapterState::BackingOff, Some(error));
        let stopped = tokio::select! {
            _ = tokio::time::sleep(delay) => false,
            // A pause during the backoff takes effect at the top of the loop.
            () = switched(&mut self.switches.paused, true) => false,
            () = self.switches.pulse.keep_beating(&self.platform) => false,
            _ = self.stop.cancelled() => true,
        };
        if stopped {
            self.set_state(AdapterState::Stopped, None);
        }
        !stopped
    }
}

/// Run the adapter until it returns, stalls, is paused or loses its lease. A pause cancels the
/// run's token and gives the adapter [`PAUSE_GRACE`] to close its connection before the run is
/// dropped; a lost lease drops it at once (another replica reads the connection now).
async fn run_once(
    supervised: &Supervised,
    reporter: &HealthReporter,
    switches: &mut Switches,
    held: Option<(&HeldLease, &ConnectionLeases, &Arc<Tenures>)>,
    platform: &str,
    stop: &CancellationToken,
) -> RunEnd {
    let lease = held.map(|(lease, _, _)| lease);
    let run_stop = stop.child_token();
    let mut ctx = (supervised.make_context)(reporter.clone(), run_stop.clone());
    if let Some(held) = lease {
        // The run's cursors move only under the tenure it started in.
        ctx = ctx.with_cursors(held.cursors());
    }
    let run = supervised.adapter.run(ctx);
    tokio::pin!(run);
    let pulse = switches.pulse.clone();
    tokio::select! {
        r = &mut run => RunEnd::Returned(r),
        stalled = watch_liveness(reporter, supervised.adapter.liveness_timeout()) => RunEnd::Returned(Err(stalled)),
        () = pulse.keep_beating(platform) => RunEnd::Returned(Ok(())),
        () = lost(lease) => {
            run_stop.cancel();
            RunEnd::LeaseLost
        }
        handing = handed_over(held, platform) => {
            // Still under the lease: the connection closes as at a pause, its cursor saved.
            run_stop.cancel();
            tokio::select! {
                _ = tokio::time::timeout(PAUSE_GRACE, &mut run) => {}
                () = pulse.keep_beating(platform) => {}
            }
            RunEnd::HandedOver(handing)
        }
        () = switched(&mut switches.paused, true) => {
            run_stop.cancel();
            tokio::select! {
                _ = tokio::time::timeout(PAUSE_GRACE, &mut run) => {}
                () = pulse.keep_beating(platform) => {}
            }
            RunEnd::Paused
        }
    }
}

/// Resolves when the tenure is over; never without a lease.
async fn lost(lease: Option<&HeldLease>) {
    match lease {
        Some(held) => held.lost().await,
        None => std::future::pending().await,
    }
}

/// Resolves once the platform was handed over to a replica that asked for it (see
/// `lease::handover`); never without a lease.
async fn handed_over(held: Option<(&HeldLease, &ConnectionLeases, &Arc<Tenures>)>, platform: &str) -> HandingOver {
    match held {
        Some((lease, leases, tenures)) => leases.handed_over(lease.name(), tenures, platform).await,
        None => std::future::pending().await,
    }
}

/// How long a paused adapter may take to close its connection.
const PAUSE_GRACE: Duration = Duration::from_secs(5);

/// Wait, beating, until the adapter is resumed (`true`) or the gateway stops (`false`).
async fn wait_for_resume(switches: &mut Switches, platform: &str, stop: &CancellationToken) -> bool {
    let pulse = switches.pulse.clone();
    tokio::select! {
        () = switched(&mut switches.paused, false) => true,
        () = pulse.keep_beating(platform) => false,
        _ = stop.cancelled() => false,
    }
}

/// Resolves once the switch is (or is already) `paused`; never if the switches are gone.
async fn switched(switch: &mut watch::Receiver<bool>, paused: bool) {
    // The borrow the wait returns is dropped here: it must not be held across an await.
    let reached = switch.wait_for(|now| *now == paused).await.is_ok();
    if !reached {
        std::future::pending::<()>().await;
    }
}

/// Resolves when a connected adapter made no progress for twice its liveness timeout; marks it
/// degraded after one timeout. Never resolves for adapters without a timeout.
async fn watch_liveness(reporter: &HealthReporter, timeout: Option<Duration>) -> AdapterError {
    let Some(timeout) = timeout else {
        return std::future::pending().await;
    };
    let tick = (timeout / 4).max(Duration::from_millis(50));
    // Progress is observed as a change of the reporter's counter, timed on the runtime's clock.
    let mut seen = reporter.last_progress_ms();
    let mut last_change = Instant::now();
    let mut degraded_by_watchdog = false;
    loop {
        tokio::time::sleep(tick).await;
        let now_seen = reporter.last_progress_ms();
        if now_seen != seen || !reporter.is_connected() {
            seen = now_seen;
            last_change = Instant::now();
            if degraded_by_watchdog {
                reporter.set_degraded(None);
                degraded_by_watchdog = false;
            }
            continue;
        }
        let idle = last_change.elapsed();
        if idle >= timeout * 2 {
            return AdapterError::retryable("stalled", format!("no progress for {}s; rebuilding the connection", idle.as_secs()));
        }
        if idle >= timeout {
            reporter.set_degraded(Some(format!("no progress for {}s", idle.as_secs())));
            degraded_by_watchdog = true;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use async_trait::async_trait;
    use hermes_adapter::{
        AcceptError, AcceptOutcome, Capabilities, CredentialId, InboundEvent, InboundSink, OutboundMessage, Platform, SendError,
        SendReceipt, SessionDirectory, SessionDirectoryError, SessionSource, StoredMessage,
    };
    use std::collections::VecDeque;
    use std::path::Path;
    use std::sync::Mutex;

    /// What one `run` call of the scripted adapter does.
    #[derive(Clone)]
    enum Step {
        FailRetryable,
        FailFatal,
        /// Connect, stay connected for the duration, then fail retryably.
        ConnectFor(Duration),
        /// Connect, then never make progress again.
        ConnectAndStall,
    }

    struct Scripted {
        platform: Platform,
        caps: Capabilities,
        steps: Mutex<VecDeque<Step>>,
        runs: Mutex<u32>,
        liveness: Option<Duration>,
        credential: Option<CredentialId>,
    }

    #[async_trait]
    impl PlatformAdapter for Scripted {
        fn platform(&self) -> &Platform {
            &self.platform
        }
        fn capabilities(&self) -> &Capabilities {
            &self.caps
        }
        fn liveness_timeout(&self) -> Option<Duration> {
            self.liveness
        }
        fn credential(&self) -> Option<CredentialId> {
            self.credential.clone()
        }
        async fn run(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
            *self.runs.lock().unwrap() += 1;
            let step = self.steps.lock().unwrap().pop_front();
            match step {
                Some(Step::FailRetryable) => Err(AdapterError::retryable("net", "connection refused")),
                Some(Step::FailFatal) => Err(AdapterError::fatal("auth", "bad token")),
                Some(Step::ConnectFor(d)) => {
                    ctx.health.mark_connected();
                    tokio::time::sleep(d).await;
                    Err(AdapterError::retryable("net", "dropped"))
                }
                Some(Step::ConnectAndStall) => {
                    ctx.health.mark_connected();
                    ctx.shutdown.cancelled().await;
                    Ok(())
                }
                None => {
                    ctx.health.mark_connected();
                    ctx.shutdown.cancelled().await;
                    Ok(())
                }
            }
        }
        async fn send(&self, _msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
            Ok(SendReceipt::default())
        }
    }

    /// An inbox and session directory that accept everything and keep nothing.
    pub(crate) struct NullSink;
    #[async_trait]
    impl InboundSink for NullSink {
        async fn accept(&self, _e: InboundEvent) -> Result<AcceptOutcome, AcceptError> {
            Ok(AcceptOutcome::Accepted)
        }
    }
    #[async_trait]
    impl SessionDirectory for NullSink {
        async fn open(&self, _s: &SessionSource) -> Result<String, SessionDirectoryError> {
            Ok(String::new())
        }
        async fn history(&self, _s: &SessionSource, _l: usize) -> Result<Option<Vec<StoredMessage>>, SessionDirectoryError> {
            Ok(None)
        }
        async fn close(&self, _s: &SessionSource) -> Result<bool, SessionDirectoryError> {
            Ok(false)
        }
    }

    type Started = (Arc<Scripted>, Arc<HealthBoard>, CancellationToken, JoinHandle<()>);

    fn start(steps: Vec<Step>, liveness: Option<Duration>) -> Started {
        start_with(steps, liveness, None, &SupervisorLinks::default())
    }

    /// `locked`: the adapter's credential, and the lock directory and home its gateway uses.
    fn start_with(
        steps: Vec<Step>,
        liveness: Option<Duration>,
        locked: Option<(CredentialId, &Path, &str)>,
        links: &SupervisorLinks,
    ) -> Started {
        let adapter = Arc::new(Scripted {
            platform: Platform::new("scripted"),
            caps: Capabilities::http(),
            steps: Mutex::new(steps.into()),
            runs: Mutex::new(0),
            liveness,
            credential: locked.as_ref().map(|(id, _, _)| id.clone()),
        });
        let board = Arc::new(HealthBoard::new());
        let stop = CancellationToken::new();
        let supervised = Supervised {
            adapter: adapter.clone(),
            make_context: Box::new(move |health, run_stop| AdapterContext::new(Arc::new(NullSink), Arc::new(NullSink), health, run_stop)),
            credential_locks: locked.map(|(_, dir, home)| CredentialLocks { dir: dir.to_path_buf(), home: PathBuf::from(home) }),
            leases: None,
        };
        let policy = SupervisorPolicy {
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(10),
            reset_after: Duration::from_secs(30),
        };
        let handle = spawn(supervised, board.clone(), policy, links, stop.clone());
        (adapter, board, stop, handle)
    }

    fn secs(delays: &[Duration]) -> Vec<f64> {
        delays.iter().map(|d| (d.as_secs_f64() * 10.0).round() / 10.0).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_grows_and_caps() {
        let (adapter, board, stop, handle) = start(vec![Step::FailRetryable; 7], None);
        tokio::time::sleep(Duration::from_secs(200)).await;
        let delays = board.delays("scripted");
        assert_eq!(delays.len(), 7);
        for (i, d) in delays.iter().enumerate() {
            let nominal = (2f64.powi(i as i32)).min(10.0);
            assert!(
                d.as_secs_f64() >= (nominal * 0.8).min(10.0) - 1e-9 && d.as_secs_f64() <= nominal.min(10.0) * 1.2 + 1e-9,
                "delay {i} = {d:?}"
            );
            assert!(d.as_secs_f64() <= 10.0);
        }
        assert_eq!(secs(&delays[5..]), vec![10.0, 10.0], "capped");
        assert_eq!(*adapter.runs.lock().unwrap(), 8);
        assert_eq!(board.snapshot().adapters[0].state, AdapterState::Connected);
        stop.cancel();
        handle.await.unwrap();
        assert_eq!(board.snapshot().adapters[0].state, AdapterState::Stopped);
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_resets_only_after_sustained_progress() {
        let steps = vec![
            Step::FailRetryable,
            Step::FailRetryable,
            Step::FailRetryable,
            // Connected only briefly: no reset, the delay keeps growing.
            Step::ConnectFor(Duration::from_secs(1)),
            // Connected long enough: the next delay starts from the base again.
            Step::ConnectFor(Duration::from_secs(40)),
        ];
        let (_adapter, board, stop, _handle) = start(steps, None);
        tokio::time::sleep(Duration::from_secs(120)).await;
        let d = board.delays("scripted");
        assert_eq!(d.len(), 5);
        assert!(d[3] > d[2] || d[3].as_secs_f64() >= 6.4, "flapping run must not reset: {d:?}");
        assert!(d[4].as_secs_f64() <= 1.2, "sustained progress resets the backoff: {d:?}");
        stop.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn non_retryable_error_parks_with_reason() {
        let (adapter, board, _stop, handle) = start(vec![Step::FailRetryable, Step::FailFatal], None);
        handle.await.unwrap();
        let snap = board.snapshot();
        assert_eq!(snap.adapters[0].state, AdapterState::Parked);
        assert_eq!(snap.adapters[0].detail.as_deref(), Some("auth: bad token"));
        assert!(!snap.ready);
        assert_eq!(*adapter.runs.lock().unwrap(), 2, "a parked adapter is not retried");
    }

    #[tokio::test(start_paused = true)]
    async fn stalled_connection_is_degraded_then_rebuilt() {
        let (adapter, board, stop, _handle) = start(vec![Step::ConnectAndStall], Some(Duration::from_secs(10)));
        // The watchdog looks every timeout/4 (2.5 s) and may first see the connect one look
        // late, so "degraded" is due by 12.5 s and the rebuild (2 × timeout idle) by 22.5 s.
        tokio::time::sleep(Duration::from_secs(14)).await;
        let snap = board.snapshot();
        assert_eq!(snap.adapters[0].state, AdapterState::Degraded, "{snap:?}");
        assert!(!snap.ready);
        tokio::time::sleep(Duration::from_secs(15)).await;
        assert!(*adapter.runs.lock().unwrap() >= 2, "the stalled run was torn down and rebuilt");
        stop.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_bot_token_held_by_another_gateway_waits_until_it_is_free() {
        let locks = tempfile::tempdir().unwrap();
        let token = CredentialId::new("Telegram bot token", "123456:abc");
        let (_first, first_board, first_stop, first_handle) =
            start_with(vec![], None, Some((token.clone(), locks.path(), "/srv/a")), &SupervisorLinks::default());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(first_board.snapshot().adapters[0].state, AdapterState::Connected);

        let (second, second_board, second_stop, _second_handle) =
            start_with(vec![], None, Some((token, locks.path(), "/srv/b")), &SupervisorLinks::default());
        tokio::time::sleep(Duration::from_secs(5)).await;
        let snap = second_board.snapshot();
        assert_eq!(snap.adapters[0].state, AdapterState::BackingOff, "{snap:?}");
        let detail = snap.adapters[0].detail.clone().unwrap_or_default();
        assert!(detail.contains("Telegram bot token is already in use") && detail.contains("/srv/a"), "{detail}");
        assert_eq!(*second.runs.lock().unwrap(), 0, "never connected while the other gateway holds the token");

        first_stop.cancel();
        first_handle.await.unwrap();
        tokio::time::sleep(Duration::from_secs(15)).await;
        assert_eq!(second_board.snapshot().adapters[0].state, AdapterState::Connected, "took over once the token was free");
        assert_eq!(*second.runs.lock().unwrap(), 1);
        second_stop.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn pausing_stops_the_run_and_resuming_starts_it_again() {
        let links = SupervisorLinks::default();
        let (adapter, board, stop, handle) = start_with(vec![], None, None, &links);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(board.snapshot().adapters[0].state, AdapterState::Connected);
        assert_eq!(links.controls.platforms(), vec!["scripted".to_string()]);

        assert_eq!(links.controls.set_paused("scripted", true), Ok(true));
        assert_eq!(links.controls.set_paused("scripted", true), Ok(false), "already paused");
        tokio::time::sleep(Duration::from_secs(1)).await;
        let snap = board.snapshot();
        assert_eq!(snap.adapters[0].state, AdapterState::Paused, "{snap:?}");
        assert_eq!(*adapter.runs.lock().unwrap(), 1, "the run ended and was not restarted");
        // A paused supervisor is alive: it keeps beating for the watchdog.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(links.pulse.stale(Duration::from_secs(1)).is_empty());

        assert_eq!(links.controls.set_paused("scripted", false), Ok(true));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(board.snapshot().adapters[0].state, AdapterState::Connected);
        assert_eq!(*adapter.runs.lock().unwrap(), 2, "resumed with a fresh run");

        let unknown = links.controls.set_paused("nope", true).unwrap_err();
        assert_eq!(unknown.known, vec!["scripted".to_string()]);
        stop.cancel();
        handle.await.unwrap();
        assert!(links.pulse.stale(Duration::ZERO).is_empty(), "a stopped supervisor retires its beat");
    }

    #[tokio::test(start_paused = true)]
    async fn a_paused_adapter_stops_with_the_gateway() {
        let links = SupervisorLinks::default();
        let (_adapter, board, stop, handle) = start_with(vec![], None, None, &links);
        links.controls.set_paused("scripted", true).unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop.cancel();
        handle.await.unwrap();
        assert_eq!(board.snapshot().adapters[0].state, AdapterState::Stopped);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wedged_supervisor_goes_stale() {
        let pulse = Pulse::default();
        pulse.beat("telegram");
        pulse.beat("discord");
        tokio::time::sleep(Duration::from_secs(3)).await;
        pulse.beat("telegram");
        assert_eq!(pulse.stale(Duration::from_secs(2)), vec!["discord".to_string()]);
    }
}
