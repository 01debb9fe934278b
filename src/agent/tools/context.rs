//! What a tool sees when it runs: who and where the conversation is ([`SessionScope`]), the
//! directories it may use ([`AgentPaths`]), its limits ([`ToolSettings`]), and the traits through
//! which it reaches outward ([`ToolHost`] for the gateway, [`ApprovalPolicy`] for commands). The
//! agent core knows no gateway: everything outward goes through these traits.

use crate::agent::approval::ApprovalPolicy;
use crate::agent::providers::ModelSpec;
use async_trait::async_trait;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The conversation a tool call belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionScope {
    pub session_id: String,
    pub session_key: String,
    pub platform: String,
    pub chat_id: String,
    pub chat_name: Option<String>,
    pub thread_id: Option<String>,
    pub user_id: Option<String>,
    /// A person can answer a question here, if not at once (an approval, a clarify question):
    /// false for cron, webhooks, HTTP clients and sub-agents.
    pub interactive: bool,
    /// A scheduled (cron) run: commands that need approval follow `approvals.cron_mode`.
    pub scheduled: bool,
    /// The user may change what every user shares (`MEMORY.md`, skills); see `gateway::intake::auth`.
    pub is_admin: bool,
}

/// Directories under `HERMES_HOME` the tools use.
#[derive(Debug, Clone)]
pub struct AgentPaths {
    pub home: PathBuf,
    /// `MEMORY.md` and `USER.md`.
    pub memories: PathBuf,
    /// One folder per skill, each with a `SKILL.md`.
    pub skills: PathBuf,
    /// Where `terminal` runs and relative file paths resolve.
    pub workdir: PathBuf,
}

impl AgentPaths {
    pub fn under(home: impl Into<PathBuf>) -> Self {
        let home = home.into();
        Self { memories: home.join("memories"), skills: home.join("skills"), workdir: home.clone(), home }
    }

    /// `path` made absolute against the working directory.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = PathBuf::from(path);
        if p.is_absolute() { p } else { self.workdir.join(p) }
    }
}

/// Limits and switches of the tools.
#[derive(Debug, Clone)]
pub struct ToolSettings {
    /// Longest a terminal command may run.
    pub terminal_timeout: Duration,
    /// Characters of command output kept (head and tail).
    pub terminal_output_cap: usize,
    /// Environment variables never passed to commands (the gateway's secrets).
    pub secret_env_names: Vec<String>,
    /// Secret values scrubbed, in any of their forms, from anything a tool returns.
    pub secrets: Arc<crate::observe::secret_forms::SecretScrubber>,
    /// A tool result longer than this is truncated with a note.
    pub max_result_chars: usize,
    /// Character budget of `MEMORY.md`.
    pub memory_char_limit: usize,
    /// Character budget of `USER.md`.
    pub user_char_limit: usize,
    /// How long `clarify` waits for the user.
    pub clarify_timeout: Duration,
    /// Largest file `read_file` returns in one call.
    pub max_read_bytes: usize,
    /// Several people may talk to the agent: each user's `USER.md` is their own.
    pub per_user_profiles: bool,
    /// The sandbox commands run in and the path policy of the file tools.
    pub confinement: Arc<crate::agent::sandbox::Confinement>,
}

impl Default for ToolSettings {
    fn default() -> Self {
        Self {
            terminal_timeout: Duration::from_secs(180),
            terminal_output_cap: 50_000,
            secret_env_names: Vec::new(),
            secrets: Arc::default(),
            max_result_chars: 100_000,
            memory_char_limit: 2_200,
            user_char_limit: 1_375,
            clarify_timeout: Duration::from_secs(3600),
            max_read_bytes: 512 * 1024,
            per_user_profiles: false,
            confinement: Arc::default(),
        }
    }
}

/// One stored message found by `session_search`.
#[derive(Debug, Clone, PartialEq)]
pub struct PastMessage {
    pub session_id: String,
    pub role: String,
    pub snippet: String,
    pub timestamp: i64,
}

/// Why the gateway's side of a tool could not do what was asked; the text is written for the
/// model (it says what to do instead).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HostError {
    /// Not possible in this run (no gateway, a platform that only answers requests).
    #[error("{0}")]
    Unavailable(String),
    /// Not allowed for this conversation or user; the text names the rule.
    #[error("{0}")]
    Refused(String),
    /// The target could not be understood or is not configured.
    #[error("{0}")]
    BadTarget(String),
    /// The gateway is stopping.
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// The session store failed.
    #[error("the session store is unavailable: {0}")]
    Store(String),
    /// The platform refused or could not be reached.
    #[error("{0}")]
    Delivery(String),
    /// Nobody answered in time, or the question was withdrawn.
    #[error("{0}")]
    NoAnswer(String),
}

/// Which tool call a `send_message` delivery comes from: the host turns it into the delivery's
/// idempotency key, so a turn replayed after a crash does not send the message twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendId {
    pub turn_id: String,
    pub call_id: String,
}

/// The gateway's side of the tools that reach outward. Each call is scoped to the conversation
/// the tool runs in; the host enforces who may see and reach what.
#[async_trait]
pub trait ToolHost: Send + Sync + 'static {
    /// Full-text search over past sessions of the same user and origin as `scope`.
    async fn search_sessions(&self, scope: &SessionScope, query: &str, limit: usize) -> Result<Vec<PastMessage>, HostError>;
    /// Deliver `text` to a target (`platform:chat[:thread]`, `home`, `origin`). `id` names the
    /// call, so a replayed call delivers at most once. Returns a short confirmation.
    async fn send_message(&self, scope: &SessionScope, target: &str, text: &str, id: &SendId) -> Result<String, HostError>;
    /// Ask the user a question and wait for the answer.
    async fn clarify(&self, scope: &SessionScope, question: &str, choices: &[String], timeout: Duration) -> Result<String, HostError>;
    /// Manage scheduled jobs for the user of `scope` (the `cronjob` tool).
    async fn cronjob(&self, _scope: &SessionScope, _args: super::cronjob::CronJobArgs) -> Result<String, HostError> {
        Err(HostError::Unavailable("scheduled jobs are not available here".into()))
    }
}

/// A host for runs without a gateway (tests, sub-agents' defaults): nothing reaches outward.
pub struct DetachedHost;

#[async_trait]
impl ToolHost for DetachedHost {
    async fn search_sessions(&self, _: &SessionScope, _: &str, _: usize) -> Result<Vec<PastMessage>, HostError> {
        Err(HostError::Unavailable("session search is not available here".into()))
    }
    async fn send_message(&self, _: &SessionScope, _: &str, _: &str, _: &SendId) -> Result<String, HostError> {
        Err(HostError::Unavailable("sending messages is not available here".into()))
    }
    async fn clarify(&self, _: &SessionScope, _: &str, _: &[String], _: Duration) -> Result<String, HostError> {
        Err(HostError::Unavailable("nobody is available to answer questions here; decide yourself and say what you assumed".into()))
    }
}

/// What `delegate_task` needs to start a sub-agent.
#[derive(Clone)]
pub struct Delegation {
    pub agent: Arc<crate::agent::Agent>,
    pub model: ModelSpec,
    pub fallbacks: Vec<ModelSpec>,
    /// The parent turn's tools; a sub-agent gets these minus the ones it may not use.
    pub filter: super::ToolFilter,
    /// 0 for the user's own turn, 1 inside a sub-agent, …
    pub depth: u8,
    /// Sub-agents running at once from one turn.
    pub slots: Arc<Semaphore>,
}

/// Everything a tool call gets.
#[derive(Clone)]
pub struct ToolContext {
    pub scope: SessionScope,
    pub paths: Arc<AgentPaths>,
    pub settings: Arc<ToolSettings>,
    pub host: Arc<dyn ToolHost>,
    pub approval: Arc<dyn ApprovalPolicy>,
    pub delegation: Option<Delegation>,
    /// Cancelled when the turn is stopped; long-running tools stop with it.
    pub cancel: CancellationToken,
    /// Distinguishes this call's side effects (idempotency keys).
    pub call_id: String,
    pub turn_id: String,
    /// This turn's fence for what tools bring in from outside.
    pub fence: Arc<crate::agent::fence::Fence>,
    /// The vision model `vision_analyze` asks; set only when the turn's own model does not see
    /// images (`None` keeps the tool off).
    pub vision: Option<super::VisionAssist>,
}

impl ToolContext {
    /// A context for tests and detached runs.
    pub fn detached(paths: AgentPaths, settings: ToolSettings) -> Self {
        use crate::agent::approval::GuardPolicy;
        let context = GuardPolicy::context_for(&paths.workdir, &paths.home, settings.confinement.private_tmp());
        Self {
            // A detached run is started by the operator (tests, the CLI), never by a chat user.
            scope: SessionScope { is_admin: true, ..SessionScope::default() },
            paths: Arc::new(paths),
            settings: Arc::new(settings),
            host: Arc::new(DetachedHost),
            approval: Arc::new(GuardPolicy::new(false, context)),
            delegation: None,
            cancel: CancellationToken::new(),
            call_id: String::new(),
            turn_id: String::new(),
            fence: Arc::default(),
            vision: None,
        }
    }

    /// `text` with every configured secret masked, in any of its forms.
    pub fn scrub(&self, text: &str) -> String {
        self.settings.secrets.scrub(text)
    }
}
