//! The tool registry the turn loop consults. Each tool is one file in this folder that implements
//! [`Tool`] (its JSON schema, its toolset, when it is available, its handler) and is registered
//! once in [`builtin`]. Toolsets switch groups of tools on and off per platform and for cron; a
//! result longer than the configured cap is truncated with a note; errors are results too, so the
//! model can read them and recover. The tools of MCP servers join them through [`mcp`]
//! ([`ToolRegistry::with_mcp`]); each server is the toolset `mcp-<server>`.

pub(crate) mod context;

mod clarify;
pub(crate) mod cronjob;
mod delegate_task;
pub(crate) mod mcp;
mod memory;
mod patch;
mod read_file;
mod search_files;
mod send_message;
mod session_search;
mod skill_manage;
mod skill_view;
mod skills_list;
mod terminal;
mod vision_analyze;
mod write_file;

pub use crate::config::{TOOLSETS, toolset_acts};
pub use context::{AgentPaths, DetachedHost, HostError, PastMessage, SendId, SessionScope, ToolContext, ToolHost, ToolSettings};
pub use vision_analyze::VisionAssist;

use async_trait::async_trait;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A tool's JSON schema as sent to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSchema {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// The result of running a tool; errors are results too (the model reads them).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self { content: content.into(), is_error: false }
    }
    pub fn error(content: impl Into<String>) -> Self {
        Self { content: format!("Error: {}", content.into()), is_error: true }
    }
}

#[async_trait]
pub trait Tool: Send + Sync + 'static {
    fn schema(&self) -> ToolSchema;
    /// The group this tool belongs to (`terminal`, `file`, `memory`, `skills`, `messaging`, …).
    fn toolset(&self) -> &'static str;
    /// Why this tool cannot be offered in `ctx`, or `None` when it can.
    fn unavailable(&self, _ctx: &ToolContext) -> Option<String> {
        None
    }
    /// What the tool returns comes from outside the conversation (a file, a command's output, a
    /// web page): it reaches the model inside the turn's untrusted-data fence.
    fn returns_outside_content(&self) -> bool {
        false
    }
    async fn call(&self, ctx: &ToolContext, arguments: Value) -> ToolOutput;
}

/// Which MCP servers' tools a turn may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum McpAllow {
    /// Every server's (the default on every platform).
    #[default]
    All,
    /// Only these servers' (configured names).
    Only(BTreeSet<String>),
    /// None (`no_mcp`).
    None,
}

impl McpAllow {
    pub fn allows(&self, server: &str) -> bool {
        match self {
            McpAllow::All => true,
            McpAllow::Only(servers) => servers.contains(server),
            McpAllow::None => false,
        }
    }

    /// What both allow.
    pub fn narrowed(self, other: McpAllow) -> McpAllow {
        match (self, other) {
            (McpAllow::None, _) | (_, McpAllow::None) => McpAllow::None,
            (McpAllow::All, other) | (other, McpAllow::All) => other,
            (McpAllow::Only(a), McpAllow::Only(b)) => McpAllow::Only(a.intersection(&b).cloned().collect()),
        }
    }
}

/// Which tools a turn may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// When set, only these built-in toolsets (MCP servers are chosen by `mcp`).
    pub enabled_toolsets: Option<BTreeSet<String>>,
    /// Never these toolsets (`mcp-<server>` included).
    pub disabled_toolsets: BTreeSet<String>,
    /// Never these tools (by name), whatever their toolset.
    pub disabled_tools: BTreeSet<String>,
    /// The MCP servers whose tools may be used.
    pub mcp: McpAllow,
}

impl ToolFilter {
    /// No tools at all.
    pub fn none() -> Self {
        Self { enabled_toolsets: Some(BTreeSet::new()), mcp: McpAllow::None, ..Self::default() }
    }

    /// Whether MCP server `server`'s tools may be used.
    pub fn allows_mcp_server(&self, server: &str) -> bool {
        self.mcp.allows(server) && !self.disabled_toolsets.contains(&crate::config::mcp_toolset(server))
    }

    /// Whether MCP tool `tool` may be used.
    pub fn allows_mcp(&self, tool: &crate::mcp::McpTool) -> bool {
        !self.disabled_tools.contains(&tool.name) && !self.disabled_toolsets.contains(&tool.toolset) && self.allows_mcp_server(&tool.server)
    }

    /// Whether the tool named `name`, of toolset `toolset`, may be used.
    pub fn allows(&self, name: &str, toolset: &str) -> bool {
        !self.disabled_tools.contains(name) && self.allows_toolset(toolset)
    }

    pub fn allows_toolset(&self, set: &str) -> bool {
        !self.disabled_toolsets.contains(set) && self.enabled_toolsets.as_ref().is_none_or(|e| e.contains(set))
    }

    /// This filter with more toolsets switched off.
    pub fn without_toolsets(mut self, sets: &[&str]) -> Self {
        self.disabled_toolsets.extend(sets.iter().map(|s| s.to_string()));
        self
    }
}

/// The tools by name, each with its schema built once (a schema is fixed for the life of the
/// process; building it on every model call was a visible share of a reply's CPU).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Registered>,
    /// The MCP servers' tools, when the registry has them.
    mcp: Option<mcp::McpTools>,
}

#[derive(Clone)]
struct Registered {
    tool: Arc<dyn Tool>,
    schema: Arc<ToolSchema>,
}

impl Registered {
    fn allowed_by(&self, filter: &ToolFilter) -> bool {
        filter.allows(&self.schema.name, self.tool.toolset())
    }
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let schema = Arc::new(tool.schema());
        self.tools.insert(schema.name.clone(), Registered { tool, schema });
    }

    /// This registry with the tools of the MCP servers `hub` supervises (`mcp__<server>__<tool>`).
    pub fn with_mcp(mut self, hub: Arc<dyn mcp::McpSource>) -> Self {
        self.mcp = Some(mcp::McpTools::new(hub));
        self
    }

    /// The MCP hub behind this registry's MCP tools, if it has any.
    pub(crate) fn mcp_source(&self) -> Option<Arc<dyn mcp::McpSource>> {
        self.mcp.as_ref().map(|m| m.source().clone())
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// Schemas of the tools `filter` allows and that are available in `ctx`, sorted by name so the
    /// request (and the provider's prompt cache) is stable.
    pub fn schemas_for(&self, filter: &ToolFilter, ctx: &ToolContext) -> Vec<Arc<ToolSchema>> {
        let builtin = self.tools.values().filter(|t| t.allowed_by(filter) && t.tool.unavailable(ctx).is_none()).map(|t| t.schema.clone());
        let mut schemas: Vec<Arc<ToolSchema>> = builtin.collect();
        if let Some(mcp) = &self.mcp {
            schemas.extend(mcp.schemas_for(filter));
            schemas.sort_by(|a, b| a.name.cmp(&b.name));
        }
        schemas
    }

    /// Every schema, unfiltered.
    pub fn schemas(&self) -> Vec<Arc<ToolSchema>> {
        self.tools.values().map(|t| t.schema.clone()).collect()
    }

    /// Run one call. Unknown or filtered tools and malformed JSON arguments come back as tool
    /// errors; results are scrubbed of secrets and truncated to the cap.
    pub async fn call(&self, filter: &ToolFilter, ctx: &ToolContext, name: &str, raw_arguments: &str) -> ToolOutput {
        if name.starts_with(mcp::PREFIX)
            && let Some(mcp) = &self.mcp
            && let Some(tool) = mcp.find(filter, name)
        {
            let arguments = match parse_arguments(name, raw_arguments) {
                Ok(arguments) => arguments,
                Err(out) => return out,
            };
            let out = mcp::call(mcp.source().as_ref(), &tool, ctx, arguments).await;
            // Fenced: a result whole; an error only where it quotes the server (hermes' own
            // refusals are instructions the model should follow).
            return mcp::finish(ctx, name, out);
        }
        let Some(tool) = self.tools.get(name).filter(|t| t.allowed_by(filter)).map(|t| &t.tool) else {
            return ToolOutput::error(format!(
                "tool `{name}` is not available. Use one of the tools you were given, or answer without it."
            ));
        };
        if let Some(why) = tool.unavailable(ctx) {
            return ToolOutput::error(format!("tool `{name}` is not available here: {why}"));
        }
        let arguments = match parse_arguments(name, raw_arguments) {
            Ok(arguments) => arguments,
            Err(out) => return out,
        };
        let out = tool.call(ctx, arguments).await;
        let fenced = tool.returns_outside_content() && !out.is_error;
        finish(ctx, name, out, fenced)
    }
}

/// The call's arguments: a JSON object (empty when none were given), or the tool error to answer.
fn parse_arguments(name: &str, raw_arguments: &str) -> Result<Value, ToolOutput> {
    if raw_arguments.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(raw_arguments) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(ToolOutput::error(format!("the arguments for `{name}` must be a JSON object."))),
        Err(e) => Err(ToolOutput::error(format!("the arguments for `{name}` are not valid JSON ({e}). Send a JSON object."))),
    }
}

/// `out` scrubbed of secrets, truncated to the cap and, when it came from outside, fenced.
fn finish(ctx: &ToolContext, name: &str, mut out: ToolOutput, fenced: bool) -> ToolOutput {
    out.content = truncate_result(&ctx.scrub(&out.content), ctx.settings.max_result_chars);
    if fenced {
        out.content = ctx.fence.wrap(&format!("what `{name}` returned"), &out.content);
    }
    out
}

/// `text` cut to `cap` characters (head and tail kept) with a note saying how much was dropped.
pub fn truncate_result(text: &str, cap: usize) -> String {
    let total = text.chars().count();
    if total <= cap {
        return text.to_string();
    }
    let head_len = cap * 2 / 3;
    let tail_len = cap - head_len;
    let head: String = text.chars().take(head_len).collect();
    let tail: String = text.chars().skip(total - tail_len).collect();
    format!(
        "{head}\n\n[… {} characters truncated: the result was {total} characters, over the {cap}-character limit. Narrow the request to see the rest …]\n\n{tail}",
        total - cap
    )
}

/// A required string argument, or a tool error naming it.
pub(crate) fn required_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolOutput> {
    args.get(key).and_then(Value::as_str).ok_or_else(|| ToolOutput::error(format!("missing required string argument `{key}`.")))
}

/// Every built-in tool, each registered once.
pub fn builtin() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    r.register(Arc::new(terminal::Terminal));
    r.register(Arc::new(read_file::ReadFile));
    r.register(Arc::new(write_file::WriteFile));
    r.register(Arc::new(patch::Patch));
    r.register(Arc::new(search_files::SearchFiles));
    r.register(Arc::new(memory::Memory));
    r.register(Arc::new(session_search::SessionSearch));
    r.register(Arc::new(send_message::SendMessage));
    r.register(Arc::new(cronjob::CronJob));
    r.register(Arc::new(skills_list::SkillsList));
    r.register(Arc::new(skill_view::SkillView));
    r.register(Arc::new(skill_manage::SkillManage));
    r.register(Arc::new(clarify::Clarify));
    r.register(Arc::new(delegate_task::DelegateTask));
    r.register(Arc::new(vision_analyze::VisionAnalyze));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::QUIET_TOOLSETS;

    struct Echo;
    #[async_trait]
    impl Tool for Echo {
        fn schema(&self) -> ToolSchema {
            ToolSchema { name: "echo".into(), description: "echo".into(), parameters: serde_json::json!({"type": "object"}) }
        }
        fn toolset(&self) -> &'static str {
            "file"
        }
        async fn call(&self, _ctx: &ToolContext, arguments: Value) -> ToolOutput {
            ToolOutput::ok(arguments["text"].as_str().unwrap_or_default().to_string())
        }
    }

    fn ctx(cap: usize) -> ToolContext {
        let settings = ToolSettings {
            max_result_chars: cap,
            secrets: Arc::new(crate::observe::secret_forms::SecretScrubber::new(&["sk-supersecret".into()])),
            ..ToolSettings::default()
        };
        ToolContext::detached(AgentPaths::under(std::env::temp_dir()), settings)
    }

    #[tokio::test]
    async fn filtered_unknown_and_malformed_calls_are_tool_errors() {
        let mut r = ToolRegistry::new();
        r.register(Arc::new(Echo));
        let all = ToolFilter::default();
        assert_eq!(r.call(&all, &ctx(100), "echo", r#"{"text":"hi"}"#).await, ToolOutput::ok("hi"));
        let out = r.call(&all, &ctx(100), "nope", "{}").await;
        assert!(out.is_error && out.content.contains("`nope` is not available"));
        let out = r.call(&all, &ctx(100), "echo", "{\"text\": ").await;
        assert!(out.is_error && out.content.contains("not valid JSON"));
        let no_files = ToolFilter::default().without_toolsets(&["file"]);
        assert!(r.call(&no_files, &ctx(100), "echo", "{}").await.is_error);
        assert!(r.schemas_for(&no_files, &ctx(100)).is_empty());
    }

    #[tokio::test]
    async fn long_results_are_truncated_with_a_note_and_secrets_scrubbed() {
        let mut r = ToolRegistry::new();
        r.register(Arc::new(Echo));
        let text = format!("sk-supersecret {}", "x".repeat(500));
        let args = serde_json::json!({ "text": text }).to_string();
        let out = r.call(&ToolFilter::default(), &ctx(120), "echo", &args).await;
        assert!(out.content.contains("characters truncated"), "{}", out.content);
        assert!(out.content.starts_with("[REDACTED]"));
        assert!(!out.content.contains("sk-supersecret"));
    }

    #[test]
    fn every_builtin_tool_declares_a_known_toolset() {
        let r = builtin();
        for t in r.tools.values() {
            assert!(TOOLSETS.contains(&t.tool.toolset()), "{} declares {}", t.schema.name, t.tool.toolset());
        }
        assert_eq!(r.names().len(), 15);
        for set in TOOLSETS {
            assert!(r.tools.values().any(|t| t.tool.toolset() == *set), "no built-in tool declares the toolset {set}");
        }
        for set in QUIET_TOOLSETS {
            assert!(TOOLSETS.contains(set), "{set} is classified but not a toolset");
        }
        let acting: Vec<&str> = TOOLSETS.iter().copied().filter(|s| toolset_acts(s)).collect();
        assert_eq!(acting, ["terminal", "file", "memory", "messaging", "skills", "delegation"]);
        assert!(toolset_acts("some_new_toolset"), "an unclassified toolset counts as acting");
    }
}
