//! MCP servers' tools for the agent: one supervised session per configured server (stdio child
//! or streamable HTTP), connected in the background, reconnected forever with capped backoff, and
//! its tools offered under stable names (`mcp__<server>__<tool>`) whether or not the server is up
//! at the moment. Knows no agent and no gateway: the agent's tool registry asks [`McpHub`] for
//! its tools and calls; the gateway starts it, reloads it and reads its status.

// Without the `mcp` feature nothing connects, so listing, shaping and the breaker are never
// reached; they still compile (and their table tests run) in that build.
#![cfg_attr(not(feature = "mcp"), allow(dead_code))]

mod breaker;
#[cfg(feature = "mcp")]
mod child;
mod interpolate;
mod naming;
mod registry;
mod result;
mod schema;
mod server;
#[cfg(feature = "mcp")]
mod stderr_log;
#[cfg(test)]
mod tests;
#[cfg(all(test, feature = "mcp"))]
mod tests_live;
#[cfg(feature = "mcp")]
mod transport;

use crate::config::{Env, McpServerConfig, McpServers};
use registry::{Contribution, Listed, Registry, Target};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// One MCP tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// `mcp__<server>__<tool>`, `[A-Za-z0-9_]`, at most 64 characters.
    pub name: String,
    /// The configured server name.
    pub server: String,
    /// `mcp-<server>`.
    pub toolset: String,
    /// The server's own name for the tool.
    pub original: String,
    /// Description, cleaned (Unicode tag characters stripped).
    pub description: String,
    /// The input schema, repaired for providers.
    pub parameters: Value,
    /// The server says the tool only reads (`readOnlyHint: true`).
    pub read_only: bool,
    /// The server is `trust: untrusted` and the tool is not read-only: a person approves each call.
    pub needs_approval: bool,
}

/// What a call returned, as the model reads it (a JSON string: `{"result": …}` or `{"error": …}`).
#[derive(Debug, Clone, PartialEq)]
pub struct McpOutcome {
    pub content: String,
    pub is_error: bool,
}

/// Where a server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// `enabled: false`.
    Disabled,
    /// Not yet connected since start (or reload).
    Connecting,
    Connected,
    /// Was connected or tried; reconnecting with backoff.
    Down,
}

impl ServerState {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Disabled => "disabled",
            ServerState::Connecting => "connecting",
            ServerState::Connected => "connected",
            ServerState::Down => "down",
        }
    }
}

/// One server's state for `/status`, `hermes gateway status`, `/readyz` and `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerStatus {
    pub name: String,
    pub state: ServerState,
    /// Tools registered from it (kept while it is down).
    pub tools: usize,
    /// The last connection or transport error, credentials redacted.
    pub last_error: Option<String>,
}

/// What `/reload-mcp` changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReloadReport {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Kept, torn down and connected again (changed or not).
    pub reconnected: Vec<String>,
    /// Tools now registered, and from how many servers.
    pub tools: usize,
    pub servers: usize,
}

/// Where the hub keeps what it writes.
#[derive(Debug, Clone)]
pub struct McpPaths {
    /// `HERMES_HOME/logs`: each server's stderr goes to `mcp-<server>.log`, rotated.
    pub logs_dir: PathBuf,
}

/// The four per-server utility tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Utility {
    ListResources,
    ReadResource,
    ListPrompts,
    GetPrompt,
}

/// Every configured MCP server, supervised.
pub struct McpHub {
    inner: Arc<Inner>,
    /// The supervisors of the current set, and the token that stops them.
    run: tokio::sync::Mutex<Option<Run>>,
    /// The token given to [`McpHub::start`]; a reload starts the new set under it.
    parent: Mutex<Option<CancellationToken>>,
}

struct Run {
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// What the supervisors share with the hub.
pub(crate) struct Inner {
    paths: McpPaths,
    slots: RwLock<BTreeMap<String, Arc<Slot>>>,
    registry: RwLock<Registry>,
    generation: AtomicU64,
    /// One pooled client for every HTTP server without headers of its own, built at the first
    /// HTTP connect (the process-wide TLS provider is installed by then).
    #[cfg(feature = "mcp")]
    http: std::sync::OnceLock<reqwest::Client>,
}

/// One configured server: its config, where it is, what it last listed.
pub(crate) struct Slot {
    name: String,
    config: McpServerConfig,
    enabled: bool,
    status: Mutex<SlotStatus>,
    #[cfg(feature = "mcp")]
    peer: Mutex<Option<transport::McpPeer>>,
    /// `true` while the supervisor re-lists after `tools/list_changed`.
    #[cfg(feature = "mcp")]
    relisting: tokio::sync::watch::Sender<bool>,
    breaker: Mutex<breaker::Breaker>,
}

struct SlotStatus {
    state: ServerState,
    last_error: Option<String>,
    tools: Vec<Listed>,
    resources: bool,
    prompts: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves plain data behind; keep serving.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Slot {
    fn new(name: String, config: McpServerConfig) -> Self {
        // Validation refused a bad `enabled` already; a hub built around it keeps the server off.
        let enabled = config.is_enabled().unwrap_or(false);
        let threshold = config.circuit_breaker.threshold.unwrap_or(3);
        let cooldown = Duration::from_secs_f64(config.circuit_breaker.cooldown.unwrap_or(60.0));
        let state = if enabled { ServerState::Connecting } else { ServerState::Disabled };
        Self {
            name,
            config,
            enabled,
            status: Mutex::new(SlotStatus { state, last_error: None, tools: Vec::new(), resources: false, prompts: false }),
            #[cfg(feature = "mcp")]
            peer: Mutex::new(None),
            #[cfg(feature = "mcp")]
            relisting: tokio::sync::watch::channel(false).0,
            breaker: Mutex::new(breaker::Breaker::new(threshold, cooldown)),
        }
    }

    fn lock_status(&self) -> MutexGuard<'_, SlotStatus> {
        lock(&self.status)
    }

    fn set_down(&self, error: String) {
        let error = result::redact(&error);
        tracing::warn!(server = %self.name, error = %error, "MCP server down");
        let mut status = self.lock_status();
        status.state = ServerState::Down;
        status.last_error = Some(error);
    }

    #[cfg(feature = "mcp")]
    fn set_peer(&self, peer: Option<transport::McpPeer>) {
        *lock(&self.peer) = peer;
    }

    #[cfg(feature = "mcp")]
    fn set_offer(&self, offer: transport::Offer) {
        let filter = &self.config.tools;
        let tools: Vec<Listed> = offer
            .tools
            .iter()
            .filter_map(|t| registry::listed(&self.name, t))
            .filter(|t| naming::allowed(&t.original, filter.include.as_deref(), &filter.exclude))
            .collect();
        let mut status = self.lock_status();
        status.tools = tools;
        status.resources = offer.resources && filter.resources != Some(false);
        status.prompts = offer.prompts && filter.prompts != Some(false);
    }

    #[cfg(feature = "mcp")]
    fn tool_count(&self) -> usize {
        let status = self.lock_status();
        status.tools.len() + 2 * usize::from(status.resources) + 2 * usize::from(status.prompts)
    }
}

impl Inner {
    fn slots(&self) -> Vec<Arc<Slot>> {
        self.slots.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    fn slot(&self, name: &str) -> Option<Arc<Slot>> {
        self.slots.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// Rebuild the tool table from every server's last listing and bump the generation.
    fn publish(&self) {
        let slots = self.slots();
        let statuses: Vec<_> = slots.iter().map(|s| s.lock_status()).collect();
        let contributions: Vec<Contribution<'_>> = slots
            .iter()
            .zip(&statuses)
            .filter(|(slot, _)| slot.enabled)
            .map(|(slot, status)| Contribution {
                server: &slot.name,
                untrusted: slot.config.is_untrusted(),
                tools: &status.tools,
                resources: status.resources,
                prompts: status.prompts,
            })
            .collect();
        let table = registry::build(&contributions);
        drop(statuses);
        *self.registry.write().unwrap_or_else(|p| p.into_inner()) = table;
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// `.env` in HERMES_HOME (the logs folder's parent) under the process environment, read at
    /// connect time so a changed secret is picked up by the next connection.
    #[cfg(feature = "mcp")]
    fn env(&self) -> Env {
        let Some(home) = self.paths.logs_dir.parent() else { return Env::from_process() };
        Env::layered(&home.join(".env"), Env::from_process()).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read .env for MCP server settings; using the process environment");
            Env::from_process()
        })
    }
}

#[cfg(not(feature = "mcp"))]
impl Inner {
    #[allow(dead_code)]
    fn env(&self) -> Env {
        Env::from_process()
    }
}

fn slots_for(servers: &McpServers) -> BTreeMap<String, Arc<Slot>> {
    servers.iter().map(|(name, config)| (name.clone(), Arc::new(Slot::new(name.clone(), config.clone())))).collect()
}

impl McpHub {
    /// A hub for `servers`; nothing connects until [`McpHub::start`].
    pub fn new(servers: McpServers, paths: McpPaths) -> Arc<Self> {
        let inner = Inner {
            paths,
            slots: RwLock::new(slots_for(&servers)),
            registry: RwLock::new(Registry::default()),
            generation: AtomicU64::new(0),
            #[cfg(feature = "mcp")]
            http: std::sync::OnceLock::new(),
        };
        Arc::new(Self { inner: Arc::new(inner), run: tokio::sync::Mutex::new(None), parent: Mutex::new(None) })
    }

    /// Connect every enabled server in the background; returns at once. `stop` ends the
    /// supervisors (then call [`McpHub::shutdown`] to reap the children).
    pub fn start(self: &Arc<Self>, stop: CancellationToken) {
        *lock(&self.parent) = Some(stop.clone());
        let run = self.spawn_all(&stop);
        // `try_lock`: start is called once, before any reload or shutdown could hold the lock.
        if let Ok(mut slot) = self.run.try_lock() {
            *slot = Some(run);
        } else {
            tracing::error!("McpHub::start raced a reload or shutdown; the new supervisors are stopped");
            run.stop.cancel();
        }
    }

    fn spawn_all(&self, parent: &CancellationToken) -> Run {
        let stop = parent.child_token();
        let tasks = self
            .inner
            .slots()
            .into_iter()
            .filter(|slot| slot.enabled)
            .map(|slot| tokio::spawn(server::supervise(self.inner.clone(), slot, stop.clone())))
            .collect();
        Run { stop, tasks }
    }

    /// The tools registered now, sorted by name. Cheap: a shared snapshot.
    pub fn tools(&self) -> Arc<Vec<McpTool>> {
        self.inner.registry.read().unwrap_or_else(|p| p.into_inner()).tools.clone()
    }

    /// Bumped whenever [`McpHub::tools`] changes (a server connected, listed anew, reloaded).
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::SeqCst)
    }

    fn entry(&self, name: &str) -> Option<registry::Entry> {
        self.inner.registry.read().unwrap_or_else(|p| p.into_inner()).entries.get(name).cloned()
    }

    /// Check `arguments` against the tool's input schema: `Err` names what is wrong.
    pub fn validate(&self, name: &str, arguments: &Value) -> Result<(), String> {
        let entry = self.entry(name).ok_or_else(|| format!("unknown MCP tool `{name}`"))?;
        check_arguments(name, &entry, arguments)
    }

    /// Call tool `name` (prefixed) with `arguments`: validated first, bounded by the server's
    /// `timeout`, ended early by `cancel`. Never blocks on a server that is down.
    pub async fn call(&self, name: &str, arguments: Value, cancel: &CancellationToken) -> McpOutcome {
        let Some(entry) = self.entry(name) else { return failure(&format!("unknown MCP tool `{name}`")) };
        if let Err(problem) = check_arguments(name, &entry, &arguments) {
            return failure(&problem);
        }
        let Some(slot) = self.inner.slot(&entry.server) else { return failure(&format!("unknown MCP tool `{name}`")) };
        call_slot(&slot, name, &entry.target, arguments, cancel).await
    }

    /// Every configured server's state, sorted by name.
    pub fn status(&self) -> Vec<ServerStatus> {
        let tools = self.tools();
        self.inner
            .slots()
            .iter()
            .map(|slot| {
                let status = slot.lock_status();
                ServerStatus {
                    name: slot.name.clone(),
                    state: status.state,
                    tools: tools.iter().filter(|t| t.server == slot.name).count(),
                    last_error: status.last_error.clone(),
                }
            })
            .collect()
    }

    /// Replace the configuration: tear down every server, connect the new set; reports what
    /// changed once the new set has connected or failed (bounded by `connect_timeout`).
    pub async fn reload(&self, servers: McpServers) -> ReloadReport {
        let old: Vec<String> = self.inner.slots().iter().filter(|s| s.enabled).map(|s| s.name.clone()).collect();
        self.shutdown().await;
        *self.inner.slots.write().unwrap_or_else(|p| p.into_inner()) = slots_for(&servers);
        self.inner.publish();
        let parent = lock(&self.parent).clone().unwrap_or_default();
        let run = self.spawn_all(&parent);
        *self.run.lock().await = Some(run);
        let new: Vec<Arc<Slot>> = self.inner.slots().into_iter().filter(|s| s.enabled).collect();
        let wait = new.iter().map(|s| s.config.connect_timeout()).max().unwrap_or_default().min(Duration::from_secs(60));
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline && new.iter().any(|s| s.lock_status().state == ServerState::Connecting) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let names: Vec<String> = new.iter().map(|s| s.name.clone()).collect();
        let tools = self.tools();
        let mut contributing: Vec<&str> = tools.iter().map(|t| t.server.as_str()).collect();
        contributing.dedup();
        ReloadReport {
            added: names.iter().filter(|n| !old.contains(n)).cloned().collect(),
            removed: old.iter().filter(|n| !names.contains(n)).cloned().collect(),
            reconnected: names.iter().filter(|n| old.contains(n)).cloned().collect(),
            tools: tools.len(),
            servers: contributing.len(),
        }
    }

    /// Stop every server: close, kill each child's process group and reap it.
    pub async fn shutdown(&self) {
        let Some(run) = self.run.lock().await.take() else { return };
        run.stop.cancel();
        for task in run.tasks {
            let _ = task.await;
        }
    }
}

fn failure(message: &str) -> McpOutcome {
    McpOutcome { content: result::error_json(message), is_error: true }
}

fn check_arguments(name: &str, entry: &registry::Entry, arguments: &Value) -> Result<(), String> {
    if !arguments.is_object() {
        return Err(format!("invalid arguments for {name}: expected a JSON object"));
    }
    let Some(validator) = &entry.validator else { return Ok(()) };
    let problems: Vec<String> = validator
        .iter_errors(arguments)
        .take(3)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() { e.to_string() } else { format!("{at}: {e}") }
        })
        .collect();
    if problems.is_empty() { Ok(()) } else { Err(format!("invalid arguments for {name}: {}", problems.join("; "))) }
}

#[cfg(not(feature = "mcp"))]
async fn call_slot(slot: &Slot, _name: &str, _target: &Target, _arguments: Value, _cancel: &CancellationToken) -> McpOutcome {
    let last_error = slot.lock_status().last_error.clone();
    McpOutcome { content: result::not_connected(&slot.name, last_error.as_deref()), is_error: true }
}

#[cfg(feature = "mcp")]
async fn call_slot(slot: &Slot, name: &str, target: &Target, arguments: Value, cancel: &CancellationToken) -> McpOutcome {
    // The breaker first: while it is open the answer is the same whether or not the server is
    // reconnected at this moment (a server that dies on every call is both, in turn).
    {
        let breaker = lock(&slot.breaker);
        if let Some(left) = breaker.open_for(Instant::now()) {
            return McpOutcome { content: result::breaker_open(&slot.name, breaker.failures(), left.as_secs().max(1)), is_error: true };
        }
    }
    let peer = lock(&slot.peer).clone();
    let Some(peer) = peer else {
        let last_error = slot.lock_status().last_error.clone();
        return McpOutcome { content: result::not_connected(&slot.name, last_error.as_deref()), is_error: true };
    };
    let limit = slot.config.call_timeout();
    let call = async {
        match target {
            Target::Native(original) => {
                let Value::Object(arguments) = arguments else {
                    return Err(transport::CallError::Refused("arguments must be an object".into()));
                };
                transport::call_tool(&peer, original, arguments).await.map(|wire| shape_call(&wire))
            }
            Target::Utility(kind) => transport::utility(&peer, *kind, &arguments).await.map(|wire| (shape_utility(&wire), false)),
        }
    };
    let outcome = tokio::select! {
        _ = cancel.cancelled() => return failure(&format!("MCP tool {name} was cancelled")),
        outcome = tokio::time::timeout(limit, call) => outcome,
    };
    match outcome {
        Err(_) => failure(&format!(
            "MCP tool {name} timed out after {}s; the call was cancelled (the server stays connected)",
            limit.as_secs_f64()
        )),
        Ok(Err(transport::CallError::Transport(e))) => {
            lock(&slot.breaker).record_failure(Instant::now());
            // The detail may carry what an HTTP server answered.
            failure(&format!("MCP server '{}' transport error: {}", slot.name, result::server_words(&e)))
        }
        Ok(Err(transport::CallError::Refused(e))) => {
            lock(&slot.breaker).record_success();
            failure(&format!("MCP server '{}' refused the call: {}", slot.name, result::server_words(&e)))
        }
        Ok(Ok((content, is_error))) => {
            lock(&slot.breaker).record_success();
            // A server that changed its tools announced it before this answer: let the re-list
            // land first, so the model's next request offers the new tools.
            let _ = tokio::time::timeout(limit, slot.relisting.subscribe().wait_for(|busy| !*busy)).await;
            McpOutcome { content, is_error }
        }
    }
}

/// A `tools/call` result (wire JSON) as the model reads it.
pub(crate) fn shape_call(wire: &Value) -> (String, bool) {
    let blocks: Vec<result::Block> = wire["content"].as_array().map(|items| items.iter().filter_map(block).collect()).unwrap_or_default();
    let structured = wire.get("structuredContent").filter(|v| !v.is_null());
    result::shape(&blocks, structured, wire["isError"] == Value::Bool(true))
}

fn block(item: &Value) -> Option<result::Block> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    match item["type"].as_str()? {
        "text" => Some(result::Block::Text(text(&item["text"]))),
        kind @ ("image" | "audio") => {
            // base64: 3 bytes per 4 characters, less the padding.
            let data = item["data"].as_str().unwrap_or_default();
            let bytes = data.len() / 4 * 3 - data.bytes().rev().take_while(|&b| b == b'=').count().min(2);
            let kind = if kind == "image" { "image" } else { "audio" };
            Some(result::Block::Media { kind, mime: text(&item["mimeType"]), bytes })
        }
        "resource" => {
            let resource = &item["resource"];
            let body = resource["text"].as_str().map(str::to_string).unwrap_or_else(|| format!("[resource: {}]", text(&resource["uri"])));
            Some(result::Block::Resource(body))
        }
        "resource_link" => Some(result::Block::Resource(format!("[resource link: {}]", text(&item["uri"])))),
        _ => None,
    }
}

/// A utility tool's result (resources, prompts): `{"result": <the JSON>}`, tags stripped.
fn shape_utility(wire: &Value) -> String {
    let cleaned: Value = serde_json::from_str(&result::strip_tags(&wire.to_string())).unwrap_or(Value::Null);
    serde_json::json!({ "result": cleaned }).to_string()
}
