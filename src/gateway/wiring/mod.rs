//! Start-up wiring: every handle is built once here, in an order without cycles, and each part
//! of the gateway is handed the handles it uses. The order is what removes the back-pointers:
//!
//! 1. [`Models`], the [`Deliverer`] (adapters, outbox, file roots) and the [`ClarifyBoard`]
//!    own nothing that needs them back.
//! 2. The approval policy ([`ChatApprovals`]) gets the classifier, the store's approvals and the deliverer
//!    (for its prompts); its board is shared with the commands that answer it and the actors.
//! 3. The [`GatewayToolHost`] gets the session log and routes, the deliverer, the clarify board and the home
//!    channels; the agent's tools reach it through each turn's tool context, and nothing it
//!    holds owns the agent.
//! 4. The [`StoreDirectory`] (handed to the adapters when they start) gets the routes and the
//!    session log, the key policy and the models — not the adapters.
//! 5. The cron parts ([`crate::gateway::cron::ticker`]): the jobs (also handed to the tool host for the
//!    `cronjob` tool), then, once the turn's handles exist, the host of scheduled runs and the
//!    ticker; the commands get the jobs, the home channels and the ticker's health.
//! 6. The turn's, the commands' and the actors' handles are assembled from the above.
//!
//! [`Wiring`] is the one value that holds everything, the whole store among it (each part gets
//! only the store concerns it uses); only `gateway::run` (and the tests' in-process gateway)
//! keep it, and they hand out its parts.

use super::commands::{self, CommandHandles};
use super::conversation::prompt::Prompts;
use super::turn::TurnHandles;
use crate::agent::Agent;
use crate::agent::approval::GuardPolicy;
use crate::agent::tools::{AgentPaths, ToolSettings};
use crate::config::{Config, Home};
use crate::cron::manage::CronJobs;
use crate::gateway::conversation::compaction::Compactor;
use crate::gateway::conversation::history_cache::HistoryCache;
use crate::gateway::conversation::models::Models;
use crate::gateway::conversation::sessions::Sessions;
use crate::gateway::delivery::deliverer::Deliverer;
use crate::gateway::delivery::home_channels::HomeChannels;
use crate::gateway::delivery::outbound::FileRoots;
use crate::gateway::delivery::stream_edit::StreamSettings;
use crate::gateway::intake::auth::AuthPolicy;
use crate::gateway::intake::directory::StoreDirectory;
use crate::gateway::intake::session_key::KeyPolicy;
use crate::gateway::ops::health::HealthBoard;
use crate::gateway::ops::lease::fenced_writes::FencedWrites;
use crate::gateway::session::actor::ActorHandles;
use crate::gateway::session::decide::Behaviour;
use crate::gateway::session::router::Routing;
use crate::gateway::turn::approvals::board::ApprovalBoard;
use crate::gateway::turn::approvals::rules::{ApprovalRules, Mode};
use crate::gateway::turn::approvals::smart::SmartJudge;
use crate::gateway::turn::approvals::{ApprovalHandles, ChatApprovals};
use crate::gateway::turn::clarify::ClarifyBoard;
use crate::gateway::turn::limits::TurnLimits;
use crate::gateway::turn::tool_access::ToolAccess;
use crate::gateway::turn::tool_host::{GatewayToolHost, HostStore};
use crate::store::Store;
use hermes_adapter::PlatformAdapter;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What the wiring is built from: the parts `gateway::run` prepares first (they can fail, or
/// tests choose them).
pub(crate) struct Parts<'a> {
    pub config: Arc<Config>,
    pub home: Home,
    pub store: Store,
    /// Where the cron jobs and pairing documents are (the store's, when it shares them).
    pub folders: crate::gateway::folders::Folders,
    pub adapters: &'a [Arc<dyn PlatformAdapter>],
    pub auth: Arc<AuthPolicy>,
    pub agent: Arc<Agent>,
    pub paths: Arc<AgentPaths>,
    pub tool_settings: Arc<ToolSettings>,
    /// The command classifier, under the gateway's approval policy.
    pub guard: Arc<GuardPolicy>,
    /// Message text kept in memory between turns (recent sessions' history).
    pub history_bytes: usize,
    /// The MCP servers the agent's tools reach.
    pub mcp: Arc<crate::mcp::McpHub>,
}

pub(crate) struct Wiring {
    pub store: Store,
    /// The jobs, the ticker and the home channels.
    pub cron: crate::gateway::cron::ticker::CronParts,
    pub health: Arc<HealthBoard>,
    pub key_policy: KeyPolicy,
    pub actors: Arc<ActorHandles>,
    /// Sessions for the adapters' HTTP surfaces.
    pub directory: Arc<StoreDirectory>,
    /// The MCP servers: started after the adapters, stopped (children reaped) last.
    pub mcp: Arc<crate::mcp::McpHub>,
}

impl Wiring {
    /// What the status file is written from.
    pub(crate) fn status_sources(&self) -> crate::gateway::ops::chores::StatusSources {
        let limits = self.limits().clone();
        crate::gateway::ops::chores::StatusSources {
            board: self.health.clone(),
            turns_running: Arc::new(move || limits.running.active()),
            inbox: self.store.clone(),
            outbox: self.store.clone(),
            ticker: Some(self.cron.ticker.health.clone()),
        }
    }

    pub(crate) fn build(parts: Parts<'_>) -> Wiring {
        let Parts { config, home, store, folders, adapters, auth, agent, paths, tool_settings, guard, history_bytes, mcp } = parts;
        let ground = Ground::new(config, home, store, &folders, adapters, paths.workdir.clone());
        let tools = ground.tools(&agent, &paths, &tool_settings, guard);
        let sessions = ground.sessions(&agent, paths, tool_settings.per_user_profiles, history_bytes);
        let turns = ground.turns(sessions, tools, agent, auth.clone());
        // The turns' writes are fenced by this replica's tenures (`ops::lease::fenced_writes`).
        let inbox = ground.fenced_writes();
        let Ground { config, home, store, models, approvals, health, clarify, homes, jobs, .. } = ground;
        let cron = crate::gateway::cron::ticker::CronParts::build(&config, &home, &turns, jobs, homes, CancellationToken::new());
        let commands = CommandHandles {
            routes: store.clone(),
            session_log: store.clone(),
            usage: store.clone(),
            outbox: store.clone(),
            models: models.clone(),
            auth,
            health: health.clone(),
            registry: Arc::new(commands::registry()),
            turns: turns.clone(),
            approvals: approvals.clone(),
            cron: cron.commands(home.env_file()),
            platforms: Default::default(),
            restart: CancellationToken::new(),
            mcp: commands::McpCommandHandles { hub: mcp.clone(), home: home.clone(), pending: Default::default() },
        };
        health.watch_mcp(mcp.clone());
        let behaviour = Behaviour::from_config(&config);
        let session_claims = crate::gateway::ops::lease::replica_session_claims(&config, &store, health.tenures());
        let actors = Arc::new(ActorHandles { turns, inbox, commands, clarify, approvals: approvals.board, behaviour, session_claims });
        let key_policy = KeyPolicy {
            group_sessions_per_user: config.gateway.group_sessions_per_user,
            thread_sessions_per_user: config.gateway.thread_sessions_per_user,
        };
        let directory = Arc::new(StoreDirectory::new(store.clone(), store.clone(), key_policy, models));
        Wiring { store, cron, health, key_policy, actors, directory, mcp }
    }

    /// What the router works with.
    pub(crate) fn routing(&self) -> Routing {
        Routing {
            auth: self.actors.turns.auth.clone(),
            key_policy: self.key_policy,
            inbox: self.actors.inbox.clone(),
            actors: self.actors.clone(),
        }
    }

    /// The turn slots, the drain count and the abort.
    pub(crate) fn limits(&self) -> &Arc<TurnLimits> {
        &self.actors.turns.limits
    }

    /// What a turn runs with.
    pub(crate) fn turns(&self) -> &TurnHandles {
        &self.actors.turns
    }

    /// What the MCP server's tools reach (`hermes mcp serve`).
    pub(crate) fn mcp_serve_handles(&self) -> crate::gateway::mcp_serve::ServeHandles {
        let turns = self.turns();
        crate::gateway::mcp_serve::ServeHandles {
            routes: self.store.clone(),
            log: self.store.clone(),
            approvals: turns.approvals.clone(),
            deliverer: turns.deliverer.clone(),
        }
    }
}

/// Step 1's handles, which own nothing that needs them back; the later steps draw on them.
struct Ground {
    config: Arc<Config>,
    home: Home,
    store: Store,
    models: Arc<Models>,
    approvals: ApprovalHandles,
    health: Arc<HealthBoard>,
    deliverer: Arc<Deliverer>,
    clarify: Arc<ClarifyBoard>,
    homes: HomeChannels,
    jobs: CronJobs,
}

/// The HTTP client of the speech services: built lazily like the model's, so a gateway that
/// never hears a voice note never loads the system's certificates for it.
fn speech_client(timeout_secs: u64) -> crate::agent::providers::http::ModelClient {
    crate::agent::providers::http::ModelClient::new(std::time::Duration::from_secs(timeout_secs))
}

impl Ground {
    /// `workdir`: where the deliverer may take files from, beside the home.
    fn new(
        config: Arc<Config>,
        home: Home,
        store: Store,
        folders: &crate::gateway::folders::Folders,
        adapters: &[Arc<dyn PlatformAdapter>],
        workdir: PathBuf,
    ) -> Ground {
        let models = Arc::new(Models::new(config.clone(), home.config_file()));
        let approvals = ApprovalHandles {
            board: Arc::new(ApprovalBoard::with_bound(config.gateway.memory.approval_sessions)),
            rules: Arc::new(ApprovalRules::from_config(&config, home.config_file())),
        };
        let files = FileRoots { home: home.clone(), workdir };
        let health = Arc::new(HealthBoard::new());
        let retry = crate::gateway::delivery::courier::RetryPolicy::with_window(config.delivery.retry_window());
        let deliverer = Arc::new(Deliverer::new(adapters, store.clone(), files, Some(health.clone()), retry));
        let clarify = Arc::new(ClarifyBoard::default());
        let homes = HomeChannels::from_config(&config);
        let jobs = crate::gateway::cron::ticker::jobs(&config, &home, folders);
        Ground { config, home, store, models, approvals, health, deliverer, clarify, homes, jobs }
    }

    /// Steps 2 and 3: the approval policy and the tool host, behind the agent's tools.
    fn tools(
        &self,
        agent: &Arc<Agent>,
        paths: &Arc<AgentPaths>,
        tool_settings: &Arc<ToolSettings>,
        guard: Arc<GuardPolicy>,
    ) -> Arc<ToolAccess> {
        let host_store = HostStore { log: self.store.clone(), routes: self.store.clone() };
        let host = GatewayToolHost::new(host_store, self.deliverer.clone(), self.clarify.clone(), self.homes.clone(), self.jobs.clone());
        let smart = (self.approvals.rules.mode == Mode::Smart).then(|| SmartJudge::new(agent.clone(), self.models.clone()));
        let store = self.store.clone();
        let policy = ChatApprovals::new(guard, self.approvals.clone(), smart, store, self.deliverer.clone(), tool_settings.secrets.clone());
        let access = ToolAccess::new(&self.config, paths.clone(), tool_settings.clone(), Arc::new(host), Arc::new(policy));
        Arc::new(access.with_mcp(agent.tools().mcp_source()))
    }

    /// The transcript a turn works on: the session log, its history cache, prompts and compaction.
    fn sessions(&self, agent: &Arc<Agent>, paths: Arc<AgentPaths>, per_user_profiles: bool, history_bytes: usize) -> Arc<Sessions> {
        let config = &self.config;
        let prompts = Prompts::new(
            self.store.clone(),
            paths,
            config.memory.clone(),
            per_user_profiles,
            config.agent.system_prompt.clone(),
            self.deliverer.chat_platforms(),
        );
        let compactor = Compactor::new(config.compression.clone(), agent.clone(), self.models.clone(), self.store.clone());
        Arc::new(Sessions {
            turns: self.fenced_writes(),
            log: self.store.clone(),
            routes: self.store.clone(),
            history: HistoryCache::new(history_bytes),
            prompts,
            compactor,
        })
    }

    /// The store as a turn writes to it: only while this replica's tenures hold (`ops::lease::fenced_writes`).
    fn fenced_writes(&self) -> Arc<FencedWrites> {
        FencedWrites::new(self.store.clone(), self.health.tenures().clone())
    }

    /// Step 6, first part: what every turn runs with.
    fn turns(&self, sessions: Arc<Sessions>, tools: Arc<ToolAccess>, agent: Arc<Agent>, auth: Arc<AuthPolicy>) -> TurnHandles {
        TurnHandles {
            sessions,
            inbox: self.fenced_writes(),
            models: self.models.clone(),
            deliverer: self.deliverer.clone(),
            tools,
            agent,
            limits: Arc::new(TurnLimits::new(self.config.gateway.max_concurrent_sessions)),
            auth,
            stream: Arc::new(StreamSettings::from_config(&self.config)),
            approvals: self.approvals.board.clone(),
            media: Arc::new(self.turn_media()),
            voice: Arc::new(self.voice()),
        }
    }

    /// What a turn hears voice notes and prepares pictures with (`stt:`, `vision:`).
    fn turn_media(&self) -> crate::gateway::turn::perceive::TurnMedia {
        let config = &self.config;
        crate::gateway::turn::perceive::TurnMedia {
            transcriber: crate::media::stt::Transcriber::from_config(&config.stt, &config.model, speech_client(config.stt.timeout_secs)),
            cache: hermes_adapter::MediaCache::new(self.home.cache_dir()),
            max_audio_secs: config.stt.max_duration_secs,
            echo_transcript: config.stt.echo_transcript,
            stt_price_per_minute: config.stt.price_per_minute,
            stt_label: self.models.stt_label(),
        }
    }

    /// What `/voice` speaks answers with (`tts:`).
    fn voice(&self) -> crate::gateway::delivery::spoken::Voice {
        let config = &self.config;
        crate::gateway::delivery::spoken::Voice {
            speaker: crate::media::tts::Speaker::from_config(&config.tts, &config.model, speech_client(config.tts.timeout_secs)),
            cache: hermes_adapter::MediaCache::new(self.home.cache_dir()),
            max_chars: config.tts.max_chars_per_part,
            price_per_million_chars: config.tts.price_per_million_chars,
            label: self.models.tts_label(),
        }
    }
}
