//! The tool table the model sees, rebuilt from every server's last listing whenever one changes:
//! final names (collisions settled), utility tools, validators, and a generation counter.

use super::naming::{self, Claim};
use super::{McpTool, Utility};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// One tool as a server listed it, cleaned and with its validator compiled once.
#[derive(Clone)]
pub(crate) struct Listed {
    pub(crate) original: String,
    pub(crate) description: String,
    pub(crate) parameters: Value,
    pub(crate) read_only: bool,
    pub(crate) validator: Option<Arc<jsonschema::Validator>>,
}

/// Where a registered name leads.
#[derive(Clone)]
pub(crate) enum Target {
    Native(String),
    Utility(Utility),
}

#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) server: String,
    pub(crate) target: Target,
    pub(crate) validator: Option<Arc<jsonschema::Validator>>,
}

/// What one server contributes: its filtered tools and which utility tools it gets.
pub(crate) struct Contribution<'a> {
    pub(crate) server: &'a str,
    pub(crate) untrusted: bool,
    pub(crate) tools: &'a [Listed],
    pub(crate) resources: bool,
    pub(crate) prompts: bool,
}

#[derive(Default)]
pub(crate) struct Registry {
    pub(crate) tools: Arc<Vec<McpTool>>,
    pub(crate) entries: HashMap<String, Entry>,
}

/// A server's tool from its wire JSON (`tools/list` item); `None` when it has no name.
pub(crate) fn listed(server: &str, tool: &Value) -> Option<Listed> {
    let original = tool["name"].as_str()?.to_string();
    let description = super::result::strip_tags(tool["description"].as_str().unwrap_or_default().trim());
    let description = if description.is_empty() { format!("MCP tool {original} from {server}") } else { description };
    let parameters = super::schema::repair(&tool["inputSchema"]);
    let validator = match jsonschema::validator_for(&parameters) {
        Ok(v) => Some(Arc::new(v)),
        Err(e) => {
            tracing::warn!(server, tool = %original, error = %e, "MCP tool schema does not compile; its arguments are not checked before calls");
            None
        }
    };
    let read_only = tool["annotations"]["readOnlyHint"] == json!(true);
    Some(Listed { original, description, parameters, read_only, validator })
}

fn utility_tool(kind: Utility) -> Listed {
    let (original, description, parameters) = match kind {
        Utility::ListResources => {
            ("list_resources", "List the resources this MCP server offers.", json!({"type": "object", "properties": {}}))
        }
        Utility::ReadResource => (
            "read_resource",
            "Read one resource of this MCP server by URI.",
            json!({"type": "object", "properties": {"uri": {"type": "string", "description": "The resource URI"}}, "required": ["uri"]}),
        ),
        Utility::ListPrompts => ("list_prompts", "List the prompts this MCP server offers.", json!({"type": "object", "properties": {}})),
        Utility::GetPrompt => (
            "get_prompt",
            "Get one prompt of this MCP server by name, with its arguments.",
            json!({"type": "object", "properties": {"name": {"type": "string"}, "arguments": {"type": "object", "additionalProperties": {"type": "string"}}}, "required": ["name"]}),
        ),
    };
    let validator = jsonschema::validator_for(&parameters).ok().map(Arc::new);
    Listed { original: original.into(), description: description.into(), parameters, read_only: true, validator }
}

/// The table for `contributions` (servers in name order).
pub(crate) fn build(contributions: &[Contribution<'_>]) -> Registry {
    let mut rows: Vec<(String, Listed, Target, bool)> = Vec::new();
    for c in contributions {
        for tool in c.tools {
            rows.push((c.server.to_string(), tool.clone(), Target::Native(tool.original.clone()), c.untrusted));
        }
        let mut kinds = Vec::new();
        if c.resources {
            kinds.extend([Utility::ListResources, Utility::ReadResource]);
        }
        if c.prompts {
            kinds.extend([Utility::ListPrompts, Utility::GetPrompt]);
        }
        for kind in kinds {
            rows.push((c.server.to_string(), utility_tool(kind), Target::Utility(kind), c.untrusted));
        }
    }
    let claims: Vec<Claim> = rows
        .iter()
        .map(|(server, tool, target, _)| Claim {
            server: server.clone(),
            original: tool.original.clone(),
            utility: matches!(target, Target::Utility(_)),
        })
        .collect();
    let names = naming::assign(&claims);
    let mut tools = Vec::new();
    let mut entries = HashMap::new();
    for ((server, tool, target, untrusted), name) in rows.into_iter().zip(names) {
        let Some(name) = name else { continue };
        entries.insert(name.clone(), Entry { server: server.clone(), target, validator: tool.validator.clone() });
        tools.push(McpTool {
            name,
            toolset: format!("mcp-{server}"),
            server,
            original: tool.original,
            description: tool.description,
            parameters: tool.parameters,
            read_only: tool.read_only,
            needs_approval: untrusted && !tool.read_only,
        });
    }
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    Registry { tools: Arc::new(tools), entries }
}
