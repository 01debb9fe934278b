//! The rmcp side (cargo feature `mcp`): connect a stdio child or a streamable HTTP endpoint, list
//! what the server offers, and make calls. Results leave here as JSON (the MCP wire shape), so the
//! rest of the hub does not depend on rmcp's types.

use super::child::{self, ServerChild};
use crate::config::{Env, McpServerConfig};
use rmcp::model::{CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService, ServiceError};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use std::path::Path;
use std::sync::OnceLock;
use tokio::sync::mpsc;

/// Hears `notifications/tools/list_changed` for the supervisor.
pub(crate) struct Handler {
    changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.changed.send(());
        std::future::ready(())
    }
}

/// One live connection.
pub(crate) struct Session {
    pub(crate) running: RunningService<RoleClient, Handler>,
    pub(crate) child: Option<ServerChild>,
    /// One message per `tools/list_changed`.
    pub(crate) changed: mpsc::UnboundedReceiver<()>,
}

pub(crate) type McpPeer = Peer<RoleClient>;

/// Spawn or reach `server` (interpolated) and finish `initialize`.
pub(crate) async fn connect(
    name: &str,
    server: &McpServerConfig,
    env: &Env,
    logs_dir: &Path,
    http: &OnceLock<reqwest::Client>,
) -> Result<Session, String> {
    let (tx, changed) = mpsc::unbounded_channel();
    let handler = Handler { changed: tx };
    if server.command.is_some() {
        let (mut child, stdout, stdin) = child::spawn(name, server, env, logs_dir)
            .map_err(|e| format!("cannot start {:?}: {e}", server.command.as_deref().unwrap_or_default()))?;
        match handler.serve((stdout, stdin)).await {
            Ok(running) => Ok(Session { running, child: Some(child), changed }),
            Err(e) => {
                child.kill_and_reap().await;
                Err(format!("initialize failed: {e}"))
            }
        }
    } else {
        let url = server.url.clone().unwrap_or_default();
        let client = http_client(server, http)?;
        let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url);
        let transport = rmcp::transport::StreamableHttpClientTransport::with_client(client, config);
        let running = handler.serve(transport).await.map_err(|e| format!("initialize failed: {e}"))?;
        Ok(Session { running, child: None, changed })
    }
}

/// The shared pooled client, or one with this server's headers when it has any.
fn http_client(server: &McpServerConfig, shared: &OnceLock<reqwest::Client>) -> Result<reqwest::Client, String> {
    if server.headers.is_empty() {
        if let Some(client) = shared.get() {
            return Ok(client.clone());
        }
        let client = reqwest::Client::builder().build().map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        return Ok(shared.get_or_init(|| client).clone());
    }
    let mut headers = reqwest::header::HeaderMap::new();
    for (key, value) in &server.headers {
        let name = reqwest::header::HeaderName::from_bytes(key.as_bytes()).map_err(|_| format!("header name {key:?} is not valid"))?;
        let mut value =
            reqwest::header::HeaderValue::from_str(value).map_err(|_| format!("header {key:?} has a value that cannot be sent"))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    reqwest::Client::builder().default_headers(headers).build().map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// What the server offers: its tools (wire JSON) and whether it has resources / prompts.
pub(crate) struct Offer {
    pub(crate) tools: Vec<Value>,
    pub(crate) resources: bool,
    pub(crate) prompts: bool,
}

pub(crate) async fn list(peer: &McpPeer) -> Result<Offer, String> {
    let tools = list_tools_raw(peer).await?;
    let info = peer.peer_info().and_then(|i| serde_json::to_value(&*i).ok()).unwrap_or_default();
    let capabilities = &info["capabilities"];
    Ok(Offer { tools, resources: !capabilities["resources"].is_null(), prompts: !capabilities["prompts"].is_null() })
}

/// Every page of `tools/list` as wire JSON, one value per tool. Asked as a custom request so a
/// tool rmcp's types refuse (a hostile or sloppy server: `readOnlyHint: "true"`, a schema that is
/// not an object) cannot fail the whole listing; each tool is judged on its own when registered.
async fn list_tools_raw(peer: &McpPeer) -> Result<Vec<Value>, String> {
    use rmcp::model::{ClientRequest, CustomRequest, ServerResult};
    // A server that hands out cursors forever must not hold the listing forever.
    const MAX_PAGES: usize = 100;
    let mut tools = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.take().map(|c| serde_json::json!({ "cursor": c }));
        let request = ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
        let page = match peer.send_request(request).await.map_err(|e| format!("tools/list failed: {e}"))? {
            ServerResult::ListToolsResult(page) => serde_json::to_value(page).map_err(|e| format!("tools/list failed: {e}"))?,
            ServerResult::CustomResult(page) => page.0,
            _ => return Err("tools/list failed: the answer is not a tool list".into()),
        };
        let Some(listed) = page["tools"].as_array() else { return Err("tools/list failed: the answer has no `tools` array".into()) };
        tools.extend(listed.iter().cloned());
        match page.get("nextCursor") {
            Some(next) if !next.is_null() && !listed.is_empty() => cursor = Some(next.clone()),
            _ => return Ok(tools),
        }
    }
    tracing::warn!(pages = MAX_PAGES, tools = tools.len(), "MCP server's tools/list still had more pages; keeping what was listed");
    Ok(tools)
}

/// Why a call failed: the transport (counts towards the breaker) or the server said no.
pub(crate) enum CallError {
    Transport(String),
    Refused(String),
}

fn classify(e: ServiceError) -> CallError {
    match e {
        ServiceError::McpError(data) => CallError::Refused(data.message.to_string()),
        ServiceError::UnexpectedResponse => CallError::Refused(e.to_string()),
        other => CallError::Transport(other.to_string()),
    }
}

/// `tools/call`; the wire JSON of the result (content, structuredContent, isError). Dropping the
/// future (timeout, cancel) sends `notifications/cancelled` (rmcp's cancel-on-drop request).
pub(crate) async fn call_tool(peer: &McpPeer, tool: &str, arguments: serde_json::Map<String, Value>) -> Result<Value, CallError> {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    match peer.call_tool_once(params).await.map_err(classify)? {
        rmcp::model::CallToolResponse::Complete(result) => serde_json::to_value(result).map_err(|e| CallError::Refused(e.to_string())),
        _ => Err(CallError::Refused("the server asked for input or started a task, which this client does not support".into())),
    }
}

/// The four utility tools; the wire JSON of their result.
pub(crate) async fn utility(peer: &McpPeer, kind: super::Utility, arguments: &Value) -> Result<Value, CallError> {
    use super::Utility;
    let to_json = |v: Result<Value, serde_json::Error>| v.map_err(|e| CallError::Refused(e.to_string()));
    match kind {
        Utility::ListResources => to_json(serde_json::to_value(peer.list_all_resources().await.map_err(classify)?)),
        Utility::ListPrompts => to_json(serde_json::to_value(peer.list_all_prompts().await.map_err(classify)?)),
        Utility::ReadResource => {
            let uri = arguments["uri"].as_str().unwrap_or_default().to_string();
            match peer.read_resource_once(ReadResourceRequestParams::new(uri)).await.map_err(classify)? {
                rmcp::model::ReadResourceResponse::Complete(result) => to_json(serde_json::to_value(result)),
                _ => Err(CallError::Refused("the server asked for input, which this client does not support".into())),
            }
        }
        Utility::GetPrompt => {
            let mut params = GetPromptRequestParams::new(arguments["name"].as_str().unwrap_or_default().to_string());
            if let Some(args) = arguments.get("arguments").and_then(Value::as_object) {
                params.arguments = Some(args.clone());
            }
            match peer.get_prompt_once(params).await.map_err(classify)? {
                rmcp::model::GetPromptResponse::Complete(result) => to_json(serde_json::to_value(result)),
                _ => Err(CallError::Refused("the server asked for input, which this client does not support".into())),
            }
        }
    }
}
