//! The gateway: everything between the adapters and the agent, in wings named by what happens
//! to a message. Top to bottom; a wing imports only wings below it, never one above, so no
//! circle runs between them:
//!
//! - [`wiring`]: builds every handle once, in an order without cycles, and hands each part only
//!   the handles it uses; [`run`] starts the wings, waits for a signal and drains.
//! - [`session`]: the router starts one actor per session; the actor decides (a pure function)
//!   what each event means and carries it out.
//! - [`commands`]: slash commands, one file each.
//! - [`cron`]: scheduled runs as agent turns, the ticker beside the adapters, owner checks.
//! - [`turn`]: one agent turn as a pipeline of steps, the session's running turn and queue, its
//!   limits and drain tracking, the approvals and clarify questions it waits on, the tool host.
//! - [`intake`]: a platform event becomes a durable inbox row; who may talk (by platform user id,
//!   strangers pair by DM); which session an event belongs to.
//! - [`conversation`]: the transcript, the history cache, compaction, models and costs, message
//!   and prompt assembly.
//! - [`delivery`]: every message that leaves goes through the deliverer: a reply and its key,
//!   planned into parts, queued in the outbox, delivered per chat through outages; streamed
//!   edits, home channels, who may send where.
//! - [`ops`]: the process — adapters built from their registrations and supervised, locks,
//!   health, the admin listener, the status file, what systemd sees, periodic chores.

pub(crate) mod commands;
pub(crate) mod conversation;
#[cfg(test)]
mod crash_tests;
pub(crate) mod cron;
pub mod delivery;
pub(crate) mod folders;
pub(crate) mod intake;
pub(crate) mod mcp_serve;
pub(crate) mod ops;
pub(crate) mod session;
#[cfg(test)]
pub(crate) mod tests;
pub(crate) mod turn;
pub(crate) mod wiring;

use crate::agent::Agent;
use crate::agent::approval::GuardPolicy;
use crate::agent::providers::ProviderRouter;
use crate::agent::run_loop::RetryPolicy;
use crate::agent::sandbox::Confinement;
use crate::agent::tools::{AgentPaths, ToolSettings};
use crate::config::{Config, Home};
use crate::store::Store;
use hermes_adapter::{AdapterContext, CacheLimits, MediaCache};
use hermes_guard::sandbox::SandboxError;
use intake::auth::AuthPolicy;
use ops::supervisor::{Supervised, SupervisorPolicy};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Why the gateway stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReason {
    /// SIGTERM / SIGINT: exit 0.
    Stopped,
    /// SIGUSR1 or `/restart`: exit 75 so the service manager starts us again.
    RestartRequested,
    /// With a store shared by replicas: this replica lost a platform's lease (it could not renew
    /// it, so another may serve the platform now). It stops at once, without draining, and exits
    /// 75: it comes back as a new replica, and the platform's new holder replays what was left
    /// unfinished.
    LeaseLost,
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// Exit 78: the configuration cannot work; restarting will not help.
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Lock(#[from] ops::instance_lock::LockError),
    #[error("cannot open the state database: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Io(String),
    #[error(transparent)]
    MediaCache(#[from] ops::media_sweep::MediaCacheError),
}

#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub replace: bool,
    /// The machine-wide directory of credential locks ([`ops::credential_lock`]); `None` runs without
    /// the one-gateway-per-token guard.
    pub credential_lock_dir: Option<std::path::PathBuf>,
    /// The adapters the gateway may build: the built-in ones, plus any a caller adds.
    pub registry: crate::registry::Registry,
    /// Stops the gateway like SIGTERM when cancelled, for callers that run it in-process (an
    /// embedding program, a test); the default token is never cancelled.
    pub shutdown: CancellationToken,
}

/// Where the agent's files live: memories and skills under the home, commands run in
/// `terminal.cwd` or `HERMES_HOME/workspace`.
pub(crate) fn agent_paths(home: &Home, config: &Config) -> AgentPaths {
    let mut paths = AgentPaths::under(home.root());
    paths.memories = home.memories_dir();
    paths.skills = home.skills_dir();
    paths.workdir = config.terminal.cwd.as_ref().map(std::path::PathBuf::from).unwrap_or_else(|| home.root().join("workspace"));
    paths
}

/// Tool limits from the configuration; every configured secret is kept out of commands' env and
/// scrubbed from tool results.
pub(crate) fn tool_settings(config: &Config) -> ToolSettings {
    ToolSettings {
        terminal_timeout: Duration::from_secs(config.terminal.timeout.max(1)),
        terminal_output_cap: config.terminal.output_cap.max(1000),
        secret_env_names: config.secret_env_names(),
        secrets: Arc::new(crate::observe::secret_forms::SecretScrubber::new(&config.secret_values())),
        memory_char_limit: config.memory.memory_char_limit,
        user_char_limit: config.memory.user_char_limit,
        clarify_timeout: Duration::from_secs(config.agent.clarify_timeout.max(1)),
        ..ToolSettings::default()
    }
}

/// The sandbox every command runs in, prepared once from `terminal.sandbox`. No Landlock on this
/// kernel is a loud warning (commands then run unconfined and flagged ones need a person); a policy
/// that cannot hide HERMES_HOME (it lies inside `terminal.cwd`) is a configuration error.
pub(crate) fn confinement(config: &Config, home: &Home, paths: &AgentPaths) -> Result<Confinement, GatewayError> {
    let confinement = Confinement::prepare(config.terminal.sandbox, &paths.workdir, &home.root()).map_err(|e| match e {
        SandboxError::UnsafePolicy(_) => {
            GatewayError::Config(format!("terminal.sandbox: {e}; choose a terminal.cwd that does not contain HERMES_HOME"))
        }
        other => GatewayError::Io(format!("cannot prepare the command sandbox: {other}")),
    })?;
    match confinement.degraded() {
        Some(why) => tracing::warn!(
            reason = %why,
            "the command sandbox is unavailable: {why}. Commands run unconfined (HERMES_HOME is readable to them) and flagged commands run only when a person approves them, whatever approvals.mode says"
        ),
        None => tracing::info!(mode = ?confinement.mode(), availability = %confinement.availability(), "command sandbox ready"),
    }
    Ok(confinement)
}

/// The classifier-backed approval policy for this gateway's workspace and sandbox.
pub(crate) fn approval_policy(config: &Config, home: &Home, paths: &AgentPaths, confinement: &Confinement) -> GuardPolicy {
    let context = GuardPolicy::context_for(&paths.workdir, &home.root(), confinement.private_tmp());
    GuardPolicy::new(config.approvals.mode == "off", context)
}

pub async fn run(home: Home, config: Config, options: RunOptions) -> Result<ExitReason, GatewayError> {
    let (_lock, marker) = claim_home(&home, options.replace)?;
    let media_cache = ops::media_sweep::open(&home)?;
    let media_limits = config.gateway.media_cache.limits();
    ops::media_sweep::sweep(&media_cache, media_limits).await;

    let config = Arc::new(config);
    let adapters = build_adapters(&config, &home, &options.registry)?;
    let platform_names: Vec<String> = adapters.iter().map(|a| a.platform().to_string()).collect();
    let store: Store = store_location(&config, &home).open().await?;
    let folders = folders::Folders::of(&home, Some(&store));
    let auth = intake::access::authorization(&config, &folders, &adapters, &platform_names);
    let wiring = wire(&config, &home, store, folders, &adapters, auth.clone())?;
    let board = wiring.health.clone();
    // Said before the admin listener opens, so its /readyz never reads ready too early: the
    // gateway is starting until every adapter has registered.
    board.expect_adapters(adapters.len());
    // With a shared store, each platform is served by the replica holding its lease; every
    // replica runs everything else (the cron ticker's lock and claims keep its runs single).
    let leases = ops::lease::replica_leases(&config, &wiring.store);
    if leases.is_some() {
        board.tenures().share(take_over(&wiring));
        for adapter in adapters.iter().filter(|adapter| adapter.answers_on_the_request().is_some()) {
            // Every replica runs it and answers the requests it took: no lease says where.
            board.tenures().serve_where_accepted(adapter.platform().as_str());
        }
    }
    let admin_stop = CancellationToken::new();
    let mut listeners = start_admin(&config, &wiring, &admin_stop).await?;
    let (inbox, router) = open_intake(&wiring, &config, leases.is_some()).await?;
    if leases.is_some() {
        board.tenures().drain_with(Arc::new(Drain { inbox: inbox.clone(), courier: wiring.turns().deliverer.courier().clone() }));
    }

    let adapters_stop = CancellationToken::new();
    let contexts = Contexts { inbox: inbox.clone(), directory: wiring.directory.clone(), senders: auth, stop: adapters_stop.clone() };
    let locks = options.credential_lock_dir.clone().map(|dir| ops::supervisor::CredentialLocks { dir, home: home.root().to_path_buf() });
    let cluster_watch = leases.clone().map(|leases| ops::lease::watch_cluster(leases, wiring.health.clone()));
    // What other replicas accept lands in the shared inbox: routed here when woken, for the
    // platforms served here.
    let inbox_follower = leases
        .as_ref()
        .map(|_| intake::follow::spawn(inbox.clone(), wiring.store.clone(), intake::follow::POLL_EVERY, board.tenures().taken()));
    let guards = AdapterGuards { locks, leases };
    let (supervisors, notifier, notifying) = start_adapters(&adapters, &contexts, guards, &wiring, &config);
    let ticking = wiring.cron.start();
    // After the adapters: MCP servers connect in the background and never hold up start.
    let mcp_stop = CancellationToken::new();
    wiring.mcp.start(mcp_stop.clone());

    listeners.extend(start_mcp_serve(&config, &wiring, &admin_stop).await?);
    let mut status = ops::status_file::StatusFile::new(chrono::Utc::now());
    status.listeners = listeners.into();
    let status_path = home.status_file();
    let chores = Chores {
        status: status.clone(),
        status_path: status_path.clone(),
        media_cache,
        media_limits,
        router,
        notifying,
        cluster_watch,
        shared: inbox_follower.is_some(),
        inbox_follower,
    };
    let side_tasks = spawn_side_tasks(&wiring, &config, chores);
    tracing::info!(platforms = ?platform_names, home = %home.root().display(), "gateway running");

    let reason = tokio::select! {
        reason = wait_for_signal(&options.shutdown, &wiring.actors.commands.restart) => reason?,
        () = board.tenures().lost() => ExitReason::LeaseLost,
    };
    if reason == ExitReason::LeaseLost {
        // Another replica may serve the platform already and replay what is unfinished here:
        // stop at once, as a crash would, rather than finish turns it will run too.
        tracing::error!("this replica lost a platform's lease (it could not be renewed); stopping now to come back as a new replica");
        return Ok(reason);
    }
    notifier.stopping(&format!("{}; finishing running turns", exit_label(reason)));
    tracing::info!(?reason, "stopping: no new messages are accepted; finishing running turns");
    drain(&wiring, &inbox, ticking, Duration::from_secs(config.gateway.drain_timeout_secs)).await;
    let running = Running { adapters_stop, supervisors, admin_stop, side_tasks };
    running.stop().await;
    // Last, so no turn still calls a tool: every MCP child is killed and reaped.
    mcp_stop.cancel();
    wiring.mcp.shutdown().await;
    write_final_status(status, &status_path, &wiring, reason);
    if let Err(e) = std::fs::write(&marker, b"") {
        tracing::warn!(error = %e, "cannot write the clean-shutdown marker");
    }
    tracing::info!("gateway stopped");
    Ok(reason)
}

/// The enabled adapters; none at all is allowed, with a warning.
fn build_adapters(
    config: &Config,
    home: &Home,
    registry: &crate::registry::Registry,
) -> Result<Vec<Arc<dyn hermes_adapter::PlatformAdapter>>, GatewayError> {
    let adapters =
        ops::adapters::build_enabled_with(config, home, registry, &commands::menu()).map_err(|e| GatewayError::Config(e.to_string()))?;
    if adapters.is_empty() {
        tracing::warn!("no platform is enabled: set API_SERVER_ENABLED=true (or enable platforms in config.yaml) to talk to the agent");
    }
    Ok(adapters)
}

/// The inbox and the router behind it. Alone on its store, the approvals left open by the last
/// run are denied before the router starts, and its unfinished messages are replayed once it
/// runs; with a `shared` store both happen per platform as this replica takes it over
/// ([`take_over`], `intake::follow`).
async fn open_intake(
    wiring: &wiring::Wiring,
    config: &Config,
    shared: bool,
) -> Result<(Arc<intake::inbox::Inbox>, JoinHandle<()>), GatewayError> {
    let store = wiring.store.clone();
    let (router_tx, router_rx) = tokio::sync::mpsc::unbounded_channel();
    let tenures = wiring.health.tenures();
    let inbox = if !shared {
        intake::inbox::Inbox::new(store.clone(), router_tx)
    } else if tenures.served_where_accepted().is_empty() {
        intake::inbox::Inbox::shared(store.clone(), router_tx, tenures.clone())
    } else {
        let (holder, ttl) = (ops::lease::replica_name(config), ops::lease::lease_ttl(config));
        let claims = intake::accepted_here::AcceptedHere::start(store.clone(), holder, ttl, tenures);
        intake::inbox::Inbox::shared(store.clone(), router_tx, tenures.clone()).with_accepted_here(claims)
    };
    let inbox = Arc::new(inbox);
    if !shared {
        turn::approvals::deny_left_open(store.as_ref(), wiring.turns().deliverer.clone(), None).await;
    }
    let router = session::router::spawn(wiring.routing(), router_rx);
    if !shared {
        inbox.replay_unfinished().await?;
    }
    Ok((inbox, router))
}

/// What this replica does on taking a platform over from another, before serving it: the
/// approvals its last holder left open are denied, and their chats told.
fn take_over(wiring: &wiring::Wiring) -> ops::lease::tenures::OnTaken {
    let (store, deliverer) = (wiring.store.clone(), wiring.turns().deliverer.clone());
    Box::new(move |platform| {
        let (store, deliverer) = (store.clone(), deliverer.clone());
        Box::pin(async move { turn::approvals::deny_left_open(store.as_ref(), deliverer, Some(&platform)).await })
    })
}

/// What a platform handed over to another replica waits for: its turns routed here finished,
/// and no send of it in flight here.
struct Drain {
    inbox: Arc<intake::inbox::Inbox>,
    courier: Arc<delivery::courier::Courier>,
}

#[async_trait::async_trait]
impl ops::lease::tenures::Drain for Drain {
    async fn turns_finished(&self, platform: &str, bound: Duration) -> bool {
        self.inbox.drained_of(platform, bound).await.unwrap_or_else(|e| {
            tracing::warn!(platform, error = %e, "cannot read the inbox; the platform is not handed over now");
            false
        })
    }

    async fn sends_settled(&self, platform: &str, bound: Duration) -> bool {
        self.courier.settled(platform, bound).await
    }
}

/// What keeps one connection from being held twice: machine-wide credential locks, and with a
/// shared store, leases across replicas (which also say where each platform is served).
struct AdapterGuards {
    locks: Option<ops::supervisor::CredentialLocks>,
    leases: Option<ops::lease::ConnectionLeases>,
}

/// The adapters' supervisors, and the service manager's notifier with its watchdog task.
fn start_adapters(
    adapters: &[Arc<dyn hermes_adapter::PlatformAdapter>],
    contexts: &Contexts,
    guards: AdapterGuards,
    wiring: &wiring::Wiring,
    config: &Config,
) -> (Vec<JoinHandle<()>>, ops::notify::Notifier, Option<JoinHandle<()>>) {
    let board = &wiring.health;
    let links = ops::supervisor::SupervisorLinks { controls: wiring.actors.commands.platforms.clone(), pulse: Default::default() };
    let supervisors = supervise_adapters(adapters, contexts, guards, board, supervisor_policy(config), &links);
    let notifier = ops::notify::Notifier::from_env(config.secret_values());
    let watched = ops::notify::Watched { board: board.clone(), pulse: links.pulse.clone(), expected: adapters.len() };
    let notifying = ops::notify::spawn(notifier.clone(), watched);
    (supervisors, notifier, notifying)
}

/// What the side tasks are started from, beside the two already running (router, watchdog).
struct Chores {
    status: ops::status_file::StatusFile,
    status_path: std::path::PathBuf,
    media_cache: MediaCache,
    media_limits: CacheLimits,
    router: JoinHandle<()>,
    notifying: Option<JoinHandle<()>>,
    /// With a store shared by replicas: the watch that keeps the cluster's view on the board.
    cluster_watch: Option<JoinHandle<()>>,
    /// With a store shared by replicas: routes what other replicas accepted (`intake::follow`).
    inbox_follower: Option<JoinHandle<()>>,
    /// The store is shared by replicas: the courier listens for parts they queue.
    shared: bool,
}

/// Start the periodic chores and the courier's sweeper; returns every side task in the order
/// they are stopped.
fn spawn_side_tasks(wiring: &wiring::Wiring, config: &Config, chores: Chores) -> Vec<JoinHandle<()>> {
    let Chores { status, status_path, media_cache, media_limits, router, notifying, cluster_watch, inbox_follower, shared } = chores;
    let store = wiring.store.clone();
    let status_task = ops::chores::spawn_status_writer(status, status_path, wiring.status_sources());
    let housekeeping = ops::chores::spawn_inbox_pruning(store.clone(), store.clone());
    let media_sweeper = ops::media_sweep::spawn(media_cache, media_limits);
    let heap_trimmer = ops::heap_trim::spawn(std::time::Duration::from_secs(config.gateway.memory.trim_heap_every_secs));
    // Resumes what the last run left queued, and notices parts resent from the shell (or, with a
    // shared store, queued by another replica).
    let outbox_bell = shared.then(|| store.clone() as Arc<dyn crate::store::Wakeups>);
    let courier =
        tokio::spawn(delivery::sweeper::run(wiring.turns().deliverer.courier().clone(), outbox_bell, delivery::sweeper::SWEEP_EVERY));
    let mut side_tasks = vec![status_task, housekeeping, media_sweeper, router, courier];
    side_tasks.extend(heap_trimmer);
    side_tasks.extend(cluster_watch);
    side_tasks.extend(inbox_follower);
    // The watchdog keeps being fed through the drain; it stops after the supervisors.
    side_tasks.extend(notifying);
    side_tasks
}

/// Accept no new messages, then let turns and cron runs finish.
async fn drain(wiring: &wiring::Wiring, inbox: &intake::inbox::Inbox, ticking: JoinHandle<()>, timeout: Duration) {
    let limits = wiring.limits();
    wiring.health.set_draining();
    limits.running.set_draining();
    inbox.stop_accepting();
    // Turns and cron runs drain side by side; neither waits for the other's deadline.
    tokio::join!(wiring.cron.stop(ticking), drain_turns(limits, timeout));
}

/// The status file's last word: the adapters' and turns' final state and why the gateway stopped.
fn write_final_status(mut status: ops::status_file::StatusFile, path: &std::path::Path, wiring: &wiring::Wiring, reason: ExitReason) {
    status.apply(&wiring.health.snapshot(), wiring.limits().running.active());
    status.gateway_state = "stopped".into();
    status.exit_reason = Some(exit_label(reason).into());
    if let Err(e) = status.write(path) {
        tracing::warn!(error = %e, "cannot write the final status file");
    }
}

/// How an exit is named in the status file and to systemd.
fn exit_label(reason: ExitReason) -> &'static str {
    match reason {
        ExitReason::Stopped => "signal",
        ExitReason::RestartRequested => "restart_requested",
        ExitReason::LeaseLost => "lease_lost",
    }
}

/// Where this gateway's store is, from `store:`: SQLite in the home unless PostgreSQL is chosen
/// (which `Config::validate` allows only in a build with it, and with a URL).
pub fn store_location(config: &Config, home: &Home) -> crate::store::StoreLocation {
    #[cfg(feature = "postgres")]
    if config.store.backend() == crate::config::StoreBackendName::Postgres {
        let postgres = &config.store.postgres;
        return crate::store::StoreLocation::Postgres(crate::store::PostgresOptions {
            url: postgres.url.as_ref().map(|url| url.expose().to_string()).unwrap_or_default(),
            pool_size: postgres.pool_size.unwrap_or(crate::config::DEFAULT_POOL_SIZE),
        });
    }
    let memory = config.gateway.memory;
    let limits = crate::store::SqliteLimits { cache_kib: memory.sqlite_cache_kilobytes, read_connections: memory.sqlite_read_connections };
    crate::store::StoreLocation::Sqlite { path: crate::store::state_db(home), limits }
}

/// The agent and every handle over `store`, for `adapters` (running or not).
fn wire(
    config: &Arc<Config>,
    home: &Home,
    store: Store,
    folders: folders::Folders,
    adapters: &[Arc<dyn hermes_adapter::PlatformAdapter>],
    auth: Arc<AuthPolicy>,
) -> Result<wiring::Wiring, GatewayError> {
    let agent = agent_parts(config, home, &auth)?;
    Ok(wiring::Wiring::build(wiring::Parts {
        config: config.clone(),
        home: home.clone(),
        store,
        folders,
        adapters,
        auth,
        agent: agent.agent,
        paths: agent.paths,
        tool_settings: agent.tool_settings,
        guard: agent.guard,
        history_bytes: config.gateway.memory.history_cache_bytes(),
        mcp: agent.mcp,
    }))
}

/// The gateway's handles without its adapters receiving: what `hermes cron tick` and
/// `hermes cron run` run jobs with (the adapters only send, and with a store shared by replicas
/// not even that: the replicas do). No instance lock is taken, so this
/// works beside a running gateway; the cron locks keep the two from running an occurrence twice.
pub(crate) async fn headless(home: &Home, config: Config, registry: &crate::registry::Registry) -> Result<wiring::Wiring, GatewayError> {
    home.ensure_dirs().map_err(|e| GatewayError::Io(format!("cannot create HERMES_HOME {}: {e}", home.root().display())))?;
    let config = Arc::new(config);
    let adapters =
        ops::adapters::build_enabled_with(&config, home, registry, &commands::menu()).map_err(|e| GatewayError::Config(e.to_string()))?;
    let platform_names: Vec<String> = adapters.iter().map(|a| a.platform().to_string()).collect();
    let auth = Arc::new(intake::access::auth_policy(&config, &platform_names));
    let store: Store = store_location(&config, home).open().await?;
    let folders = folders::Folders::of(home, Some(&store));
    let wiring = wire(&config, home, store, folders, &adapters, auth)?;
    if config.store.shared_by_replicas() {
        // With a store shared by replicas, this process serves no platform: what it queues is
        // sent by the replica serving it (woken at once), never also from here, where nothing
        // would fence a second copy.
        wiring.health.tenures().share(Box::new(|_| Box::pin(async {})));
    }
    Ok(wiring)
}

/// What runs beside the turns once the gateway is up, stopped in this order at shutdown.
struct Running {
    adapters_stop: CancellationToken,
    supervisors: Vec<tokio::task::JoinHandle<()>>,
    admin_stop: CancellationToken,
    /// The status writer, inbox pruning, the media sweeper and the router: nothing to finish.
    side_tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Stop the adapters (each gets 5 s), then the admin listener and the side tasks.
    async fn stop(self) {
        self.adapters_stop.cancel();
        for s in self.supervisors {
            if tokio::time::timeout(Duration::from_secs(5), s).await.is_err() {
                tracing::warn!("an adapter did not stop within 5 s");
            }
        }
        self.admin_stop.cancel();
        for task in self.side_tasks {
            task.abort();
        }
    }
}

/// Make the process undumpable, create HERMES_HOME and take its single-instance lock (held until
/// the returned lock drops); returns the clean-shutdown marker, now removed.
fn claim_home(home: &Home, replace: bool) -> Result<(ops::instance_lock::InstanceLock, std::path::PathBuf), GatewayError> {
    if let Err(e) = ops::process_guard::make_undumpable() {
        tracing::warn!(error = %e, "could not make the gateway non-dumpable; its environment is readable by its own commands");
    }
    home.ensure_dirs().map_err(|e| GatewayError::Io(format!("cannot create HERMES_HOME {}: {e}", home.root().display())))?;
    // The single-instance lock comes before any heavy initialization.
    let lock = ops::instance_lock::acquire(&home.lock_file(), &home.pid_file(), replace)?;
    let marker = home.clean_shutdown_marker();
    if !marker.exists() && crate::store::state_db(home).exists() {
        tracing::warn!("the last run did not stop cleanly; unfinished messages will be replayed");
    }
    // Written back only by a clean stop; if it is absent at the next start, this run crashed.
    if let Err(e) = std::fs::remove_file(&marker)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(error = %e, "cannot remove the clean-shutdown marker; a crash of this run will not be noticed");
    }
    Ok((lock, marker))
}

/// The agent and what its tools run with.
struct AgentParts {
    agent: Arc<Agent>,
    paths: Arc<AgentPaths>,
    tool_settings: Arc<ToolSettings>,
    guard: Arc<GuardPolicy>,
    /// The MCP servers the agent's tools reach.
    mcp: Arc<crate::mcp::McpHub>,
}

/// Build the agent, its working folder, the command sandbox and the approval policy.
fn agent_parts(config: &Config, home: &Home, auth: &AuthPolicy) -> Result<AgentParts, GatewayError> {
    let provider = ProviderRouter::new(Duration::from_secs(config.model.request_timeout_secs.max(1)));
    // Nothing connects until the adapters are up (`McpHub::start`): a slow server never holds up start.
    let mcp = crate::mcp::McpHub::new(config.mcp_servers.clone(), crate::mcp::McpPaths { logs_dir: home.logs_dir() });
    let tools = crate::agent::tools::builtin().with_mcp(mcp.clone());
    let agent = Arc::new(Agent::new(Arc::new(provider), tools, config.agent.max_turns, RetryPolicy::default()));
    let paths = Arc::new(agent_paths(home, config));
    std::fs::create_dir_all(&paths.workdir).map_err(|e| GatewayError::Io(format!("cannot create {}: {e}", paths.workdir.display())))?;
    let confinement = Arc::new(confinement(config, home, &paths)?);
    let guard = Arc::new(approval_policy(config, home, &paths, &confinement));
    let tool_settings = Arc::new(ToolSettings { confinement, per_user_profiles: auth.serves_several_users(), ..tool_settings(config) });
    Ok(AgentParts { agent, paths, tool_settings, guard, mcp })
}

/// What every adapter's context is made of.
struct Contexts {
    inbox: Arc<intake::inbox::Inbox>,
    directory: Arc<intake::directory::StoreDirectory>,
    /// Asked by adapters before they fetch a sender's attachments.
    senders: Arc<AuthPolicy>,
    stop: CancellationToken,
}

fn supervisor_policy(config: &Config) -> SupervisorPolicy {
    SupervisorPolicy {
        backoff_base: Duration::from_secs(2),
        backoff_cap: Duration::from_secs(config.gateway.backoff_cap_secs.max(1)),
        reset_after: Duration::from_secs(config.gateway.backoff_reset_after_secs),
    }
}

/// One supervising task per adapter; each (re)builds its adapter's context from `contexts`.
fn supervise_adapters(
    adapters: &[Arc<dyn hermes_adapter::PlatformAdapter>],
    contexts: &Contexts,
    guards: AdapterGuards,
    board: &Arc<ops::health::HealthBoard>,
    policy: SupervisorPolicy,
    links: &ops::supervisor::SupervisorLinks,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut supervisors = Vec::new();
    for adapter in adapters {
        let (inbox, directory, senders) = (contexts.inbox.clone(), contexts.directory.clone(), contexts.senders.clone());
        let mut leases = guards.leases.clone();
        if adapter.answers_on_the_request().is_some() {
            // Served where its events are accepted (see `run`): no lease.
            leases = None;
        } else if adapter.takes_events_on_any_replica()
            && let Some(leases) = leases.take()
        {
            // A listener every replica runs (behind a load balancer): its lease only says where
            // its events are routed.
            supervisors.push(ops::lease::own(leases, adapter.as_ref(), board.tenures().clone(), contexts.stop.clone()));
        }
        let supervised = Supervised {
            adapter: adapter.clone(),
            make_context: Box::new(move |health, run_stop| {
                AdapterContext::new(inbox.clone(), directory.clone(), health, run_stop).with_sender_policy(senders.clone())
            }),
            credential_locks: guards.locks.clone(),
            leases,
        };
        supervisors.push(ops::supervisor::spawn(supervised, board.clone(), policy, links, contexts.stop.clone()));
    }
    supervisors
}

/// Start the admin listener when `gateway.admin_port` is set; returns it as the status file
/// names it.
async fn start_admin(
    config: &Config,
    wiring: &wiring::Wiring,
    stop: &CancellationToken,
) -> Result<serde_json::Map<String, serde_json::Value>, GatewayError> {
    let mut listeners = serde_json::Map::new();
    if let Some(port) = config.gateway.admin_port {
        let host: IpAddr = config.gateway.admin_host.parse().map_err(|_| {
            GatewayError::Config(format!("`gateway.admin_host`: expected an IP address, found {:?}", config.gateway.admin_host))
        })?;
        let bound = ops::admin::serve(SocketAddr::new(host, port), wiring.health.clone(), stop.clone())
            .await
            .map_err(|e| GatewayError::Io(format!("cannot bind the admin listener on {host}:{port}: {e}")))?;
        tracing::info!(%bound, "admin listener ready (/health, /readyz, /metrics)");
        listeners.insert("admin".into(), serde_json::json!(bound.to_string()));
    }
    Ok(listeners)
}

/// Start the MCP server when `mcp_serve` has a key; returns it as the status file names it.
async fn start_mcp_serve(
    config: &Config,
    wiring: &wiring::Wiring,
    stop: &CancellationToken,
) -> Result<serde_json::Map<String, serde_json::Value>, GatewayError> {
    let mut listeners = serde_json::Map::new();
    if let Some(listen) = config.mcp_serve.listen() {
        let addr = SocketAddr::new(listen.host, listen.port);
        let bound = mcp_serve::serve(addr, listen.key, wiring.mcp_serve_handles(), stop.clone())
            .await
            .map_err(|e| GatewayError::Io(format!("cannot bind the MCP server (mcp_serve) on {addr}: {e}")))?;
        tracing::info!(%bound, "MCP server ready at /mcp (hermes mcp serve)");
        listeners.insert("mcp".into(), serde_json::json!(bound.to_string()));
    }
    Ok(listeners)
}

/// Let running turns finish within `timeout`; then interrupt them (they stay in the inbox and
/// are replayed after the restart) and give them 5 s to stop.
async fn drain_turns(limits: &turn::limits::TurnLimits, timeout: Duration) {
    if tokio::time::timeout(timeout, limits.running.wait_idle()).await.is_err() {
        tracing::warn!(
            running = limits.running.active(),
            "drain timeout: interrupting the remaining turns; they are replayed after the restart"
        );
        limits.abort.cancel();
        if tokio::time::timeout(Duration::from_secs(5), limits.running.wait_idle()).await.is_err() {
            tracing::warn!(running = limits.running.active(), "some turns did not stop within 5 s of the interrupt");
        }
    }
}

/// SIGTERM or SIGINT stop the gateway (as does cancelling `shutdown`, for a caller running it
/// in-process); SIGUSR1 or `/restart` (`restart`) ask for a restart.
async fn wait_for_signal(shutdown: &CancellationToken, restart: &CancellationToken) -> Result<ExitReason, GatewayError> {
    let io = |e: std::io::Error| GatewayError::Io(format!("cannot install signal handlers: {e}"));
    let mut term = signal(SignalKind::terminate()).map_err(io)?;
    let mut int = signal(SignalKind::interrupt()).map_err(io)?;
    let mut usr1 = signal(SignalKind::user_defined1()).map_err(io)?;
    Ok(tokio::select! {
        _ = term.recv() => ExitReason::Stopped,
        _ = int.recv() => ExitReason::Stopped,
        _ = usr1.recv() => ExitReason::RestartRequested,
        _ = restart.cancelled() => ExitReason::RestartRequested,
        _ = shutdown.cancelled() => ExitReason::Stopped,
    })
}
