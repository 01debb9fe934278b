//! The gateway: wires the store, the inbox, the router, session actors, supervised adapters and
//! the admin listener together, runs until a signal, then drains.
//!
//! - [`supervisor`] and [`backoff`]: one task per adapter, restarts with backoff, parking.
//! - [`instance_lock`] and [`credential_lock`]: one gateway per HERMES_HOME, one per bot token.
//! - [`health`], [`admin`], [`status_file`]: what operators see.
//! - [`inbox`]: durable, deduplicated intake; replay after a crash.
//! - [`router`], [`auth`], [`session_key`]: who may talk, and to which session.
//! - [`actor`], [`turn`], [`turns`]: one actor per session; turns; drain accounting.
//! - [`commands`]: slash commands, one file each.
//! - [`outbound`]: render, chunk, outbox, send with retries.
//! - [`directory`]: sessions for HTTP surfaces.
//! - [`media_sweep`]: the attachment cache kept private and within its limits.

pub mod actor;
pub mod adapters;
pub mod admin;
pub mod auth;
pub mod background_slots;
pub mod backoff;
pub mod clarify;
pub mod commands;
pub mod compaction;
#[cfg(test)]
mod crash_tests;
pub mod credential_lock;
pub mod directory;
pub mod health;
pub mod history_cache;
pub mod inbox;
pub mod instance_lock;
pub mod media_sweep;
pub mod outbound;
pub mod process_guard;
pub mod router;
pub mod services;
pub mod session_key;
pub mod status_file;
pub mod stream_edit;
#[cfg(test)]
mod stream_edit_tests;
pub mod supervisor;
#[cfg(test)]
mod test_support;
pub mod tool_host;
pub mod turn;
pub mod turns;
mod typing;

/// Message text kept in memory between turns (recent sessions' history).
const HISTORY_CACHE_BYTES: usize = 4 * 1024 * 1024;

use crate::agent::Agent;
use crate::agent::approval::GuardPolicy;
use crate::agent::providers::ProviderRouter;
use crate::agent::sandbox::Confinement;
use crate::agent::tools::{AgentPaths, ToolSettings};
use crate::agent::turn::RetryPolicy;
use crate::config::{Config, Home};
use crate::store::{SqliteStore, Store};
use auth::AuthPolicy;
use health::HealthBoard;
use hermes_adapter::AdapterContext;
use hermes_guard::sandbox::SandboxError;
use session_key::KeyPolicy;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use supervisor::{Supervised, SupervisorPolicy};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Why the gateway stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReason {
    /// SIGTERM / SIGINT: exit 0.
    Stopped,
    /// SIGUSR1 (or `/restart` later): exit 75 so the service manager starts us again.
    RestartRequested,
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// Exit 78: the configuration cannot work; restarting will not help.
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Lock(#[from] instance_lock::LockError),
    #[error("cannot open the state database: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Io(String),
}

#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub replace: bool,
    /// The machine-wide directory of credential locks ([`credential_lock`]); `None` runs without
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
pub fn agent_paths(home: &Home, config: &Config) -> AgentPaths {
    let mut paths = AgentPaths::under(home.root());
    paths.memories = home.memories_dir();
    paths.skills = home.skills_dir();
    paths.workdir = config.terminal.cwd.as_ref().map(std::path::PathBuf::from).unwrap_or_else(|| home.root().join("workspace"));
    paths
}

/// Tool limits from the configuration; every configured secret is kept out of commands' env and
/// scrubbed from tool results.
pub fn tool_settings(config: &Config) -> ToolSettings {
    ToolSettings {
        terminal_timeout: Duration::from_secs(config.terminal.timeout.max(1)),
        terminal_output_cap: config.terminal.output_cap.max(1000),
        secret_env_names: crate::config::SECRET_ENV_NAMES.iter().map(|s| s.to_string()).collect(),
        secrets: Arc::new(crate::observe::secret_forms::SecretScrubber::new(&config.secret_values())),
        memory_char_limit: config.memory.memory_char_limit,
        user_char_limit: config.memory.user_char_limit,
        clarify_timeout: Duration::from_secs(config.agent.clarify_timeout.max(1)),
        ..ToolSettings::default()
    }
}

/// The sandbox every command runs in, prepared once from `terminal.sandbox`. No Landlock on this
/// kernel is a loud warning (commands then run unconfined and flagged ones are refused); a policy
/// that cannot hide HERMES_HOME (it lies inside `terminal.cwd`) is a configuration error.
pub fn confinement(config: &Config, home: &Home, paths: &AgentPaths) -> Result<Confinement, GatewayError> {
    let confinement = Confinement::prepare(config.terminal.sandbox, &paths.workdir, &home.root()).map_err(|e| match e {
        SandboxError::UnsafePolicy(_) => {
            GatewayError::Config(format!("terminal.sandbox: {e}; choose a terminal.cwd that does not contain HERMES_HOME"))
        }
        other => GatewayError::Io(format!("cannot prepare the command sandbox: {other}")),
    })?;
    match confinement.degraded() {
        Some(why) => tracing::warn!(
            reason = %why,
            "the command sandbox is unavailable: {why}. Commands run unconfined (HERMES_HOME is readable to them) and every flagged command is refused, whatever approvals.mode says"
        ),
        None => tracing::info!(mode = ?confinement.mode(), availability = %confinement.availability(), "command sandbox ready"),
    }
    Ok(confinement)
}

/// The classifier-backed approval policy for this gateway's workspace and sandbox.
pub fn approval_policy(config: &Config, home: &Home, paths: &AgentPaths, confinement: &Confinement) -> GuardPolicy {
    let context = GuardPolicy::context_for(&paths.workdir, &home.root(), confinement.private_tmp());
    GuardPolicy::new(config.approvals.mode == "off", context)
}

pub fn auth_policy(config: &Config, platforms: &[String]) -> AuthPolicy {
    let mut policy =
        AuthPolicy::new(config.gateway.allowed_users.clone(), config.gateway.allow_all_users).with_admins_named(config.admins_named());
    for p in platforms {
        policy = policy.with_platform(p, config.allowed_users(p), config.allow_all(p)).with_admins(p, config.admin_users(p));
    }
    policy
}

/// Parked (poisoned) inbox events the status file lists.
const PARKED_SHOWN: usize = 20;

pub async fn run(home: Home, config: Config, options: RunOptions) -> Result<ExitReason, GatewayError> {
    if let Err(e) = process_guard::make_undumpable() {
        tracing::warn!(error = %e, "could not make the gateway non-dumpable; its environment is readable by its own commands");
    }
    home.ensure_dirs().map_err(|e| GatewayError::Io(format!("cannot create HERMES_HOME {}: {e}", home.root().display())))?;
    // The single-instance lock comes before any heavy initialization.
    let _lock = instance_lock::acquire(&home.lock_file(), &home.pid_file(), options.replace)?;
    let marker = home.clean_shutdown_marker();
    if !marker.exists() && home.state_db().exists() {
        tracing::warn!("the last run did not stop cleanly; unfinished messages will be replayed");
    }
    let _ = std::fs::remove_file(&marker);
    let media_cache = media_sweep::open(&home).map_err(GatewayError::Io)?;
    let media_limits = config.gateway.media_cache.limits();
    media_sweep::sweep(&media_cache, media_limits).await;

    let config = Arc::new(config);
    let adapters = adapters::build_enabled_with(&config, &home, &options.registry).map_err(|e| GatewayError::Config(e.to_string()))?;
    if adapters.is_empty() {
        tracing::warn!("no platform is enabled: set API_SERVER_ENABLED=true (or enable platforms in config.yaml) to talk to the agent");
    }
    let platform_names: Vec<String> = adapters.iter().map(|a| a.platform().to_string()).collect();
    let auth = Arc::new(auth_policy(&config, &platform_names));
    if auth.nothing_allowed() {
        tracing::warn!(
            "no allowlist is configured: every chat user is denied (API and webhook requests are authorized by their key or signature). Set <PLATFORM>_ALLOWED_USERS or GATEWAY_ALLOWED_USERS (or GATEWAY_ALLOW_ALL_USERS=true) to let people in"
        );
    }

    let store: Store = Arc::new(SqliteStore::open(&home.state_db()).await?);
    let provider = ProviderRouter::new(Duration::from_secs(config.model.request_timeout_secs.max(1)));
    let agent = Arc::new(Agent::new(Arc::new(provider), crate::agent::tools::builtin(), config.agent.max_turns, RetryPolicy::default()));
    let paths = Arc::new(agent_paths(&home, &config));
    std::fs::create_dir_all(&paths.workdir).map_err(|e| GatewayError::Io(format!("cannot create {}: {e}", paths.workdir.display())))?;
    let confinement = Arc::new(confinement(&config, &home, &paths)?);
    let approval = Arc::new(approval_policy(&config, &home, &paths, &confinement));
    let tool_settings = Arc::new(ToolSettings { confinement, per_user_profiles: auth.serves_several_users(), ..tool_settings(&config) });
    let tool_host = Arc::new(tool_host::GatewayToolHost::default());
    let board = Arc::new(HealthBoard::new());
    let (router_tx, router_rx) = tokio::sync::mpsc::unbounded_channel();
    let directory = Arc::new(directory::StoreDirectory::new());
    let services = Arc::new(services::Services {
        store: store.clone(),
        config: config.clone(),
        agent,
        adapters: adapters.iter().map(|a| (a.platform().to_string(), a.clone())).collect::<HashMap<_, _>>(),
        health: board.clone(),
        commands: commands::registry(),
        auth: auth.clone(),
        key_policy: KeyPolicy {
            group_sessions_per_user: config.gateway.group_sessions_per_user,
            thread_sessions_per_user: config.gateway.thread_sessions_per_user,
        },
        turn_slots: config.gateway.max_concurrent_sessions.map(|n| Arc::new(Semaphore::new(n.max(1)))),
        turns_abort: CancellationToken::new(),
        turns: turns::TurnTracker::new(),
        home: home.clone(),
        paths,
        tool_settings,
        tool_host: tool_host.clone(),
        approval,
        clarify: clarify::ClarifyBoard::default(),
        global_model: std::sync::RwLock::new(None),
        history: history_cache::HistoryCache::new(HISTORY_CACHE_BYTES),
        background: Default::default(),
    });
    directory.bind(&services);
    tool_host.bind(&services);
    let inbox = Arc::new(inbox::Inbox::new(store.clone(), router_tx));
    let router = router::spawn(services.clone(), router_rx);
    inbox.replay_unfinished().await?;

    let adapters_stop = CancellationToken::new();
    let policy = SupervisorPolicy {
        backoff_base: Duration::from_secs(2),
        backoff_cap: Duration::from_secs(config.gateway.backoff_cap_secs.max(1)),
        reset_after: Duration::from_secs(config.gateway.backoff_reset_after_secs),
    };
    let mut supervisors = Vec::new();
    for adapter in &adapters {
        let (inbox, directory, stop, senders) = (inbox.clone(), directory.clone(), adapters_stop.clone(), auth.clone());
        let supervised = Supervised {
            adapter: adapter.clone(),
            make_context: Box::new(move |health| {
                AdapterContext::new(inbox.clone(), directory.clone(), health, stop.clone()).with_sender_policy(senders.clone())
            }),
            credential_locks: options
                .credential_lock_dir
                .clone()
                .map(|dir| supervisor::CredentialLocks { dir, home: home.root().to_path_buf() }),
        };
        supervisors.push(supervisor::spawn(supervised, board.clone(), policy, adapters_stop.clone()));
    }

    let admin_stop = CancellationToken::new();
    let mut listeners = serde_json::Map::new();
    if let Some(port) = config.gateway.admin_port {
        let host: IpAddr = config.gateway.admin_host.parse().map_err(|_| {
            GatewayError::Config(format!("`gateway.admin_host`: expected an IP address, found {:?}", config.gateway.admin_host))
        })?;
        let bound = admin::serve(SocketAddr::new(host, port), board.clone(), admin_stop.clone())
            .await
            .map_err(|e| GatewayError::Io(format!("cannot bind the admin listener on {host}:{port}: {e}")))?;
        tracing::info!(%bound, "admin listener ready (/health, /readyz)");
        listeners.insert("admin".into(), serde_json::json!(bound.to_string()));
    }

    let status_path = home.status_file();
    let mut status = status_file::StatusFile::new(chrono::Utc::now());
    status.listeners = listeners.into();
    let status_task = {
        let (board, services, path, mut status) = (board.clone(), services.clone(), status_path.clone(), status.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(2));
            loop {
                tick.tick().await;
                status.apply(&board.snapshot(), services.turns.active());
                match services.store.inbox_poisoned(PARKED_SHOWN).await {
                    Ok(rows) => {
                        status.poisoned = rows
                            .into_iter()
                            .map(|r| status_file::ParkedEvent {
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
    };
    let housekeeping = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(3600));
            loop {
                tick.tick().await;
                // Finished inbox rows are kept a day: redeliveries within that window are dropped.
                if let Err(e) = store.inbox_prune(Duration::from_secs(24 * 3600)).await {
                    tracing::warn!(error = %e, "inbox pruning failed");
                }
            }
        })
    };
    let media_sweeper = media_sweep::spawn(media_cache, media_limits);
    tracing::info!(platforms = ?platform_names, home = %home.root().display(), "gateway running");

    let reason = wait_for_signal(&options.shutdown).await?;
    tracing::info!(?reason, "stopping: no new messages are accepted; finishing running turns");
    board.set_draining();
    services.turns.set_draining();
    inbox.stop_accepting();
    let drain = Duration::from_secs(config.gateway.drain_timeout_secs);
    if tokio::time::timeout(drain, services.turns.wait_idle()).await.is_err() {
        tracing::warn!(
            running = services.turns.active(),
            "drain timeout: interrupting the remaining turns; they are replayed after the restart"
        );
        services.turns_abort.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), services.turns.wait_idle()).await;
    }
    adapters_stop.cancel();
    for s in supervisors {
        if tokio::time::timeout(Duration::from_secs(5), s).await.is_err() {
            tracing::warn!("an adapter did not stop within 5 s");
        }
    }
    admin_stop.cancel();
    status_task.abort();
    housekeeping.abort();
    media_sweeper.abort();
    router.abort();
    status.apply(&board.snapshot(), services.turns.active());
    status.gateway_state = "stopped".into();
    status.exit_reason = Some(match reason {
        ExitReason::Stopped => "signal".into(),
        ExitReason::RestartRequested => "restart_requested".into(),
    });
    if let Err(e) = status.write(&status_path) {
        tracing::warn!(error = %e, "cannot write the final status file");
    }
    if let Err(e) = std::fs::write(&marker, b"") {
        tracing::warn!(error = %e, "cannot write the clean-shutdown marker");
    }
    tracing::info!("gateway stopped");
    Ok(reason)
}

async fn wait_for_signal(shutdown: &CancellationToken) -> Result<ExitReason, GatewayError> {
    let io = |e: std::io::Error| GatewayError::Io(format!("cannot install signal handlers: {e}"));
    let mut term = signal(SignalKind::terminate()).map_err(io)?;
    let mut int = signal(SignalKind::interrupt()).map_err(io)?;
    let mut usr1 = signal(SignalKind::user_defined1()).map_err(io)?;
    Ok(tokio::select! {
        _ = term.recv() => ExitReason::Stopped,
        _ = int.recv() => ExitReason::Stopped,
        _ = usr1.recv() => ExitReason::RestartRequested,
        _ = shutdown.cancelled() => ExitReason::Stopped,
    })
}
