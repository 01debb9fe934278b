//! The tool registry the turn loop consults. Each tool will be one file that registers its schema
//! and handler; until tools land, the registry is empty and any call the model makes is answered
//! with a clear tool error so the model can recover.

use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A tool's JSON schema as sent to the model.
#[derive(Debug, Clone)]
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

#[async_trait]
pub trait Tool: Send + Sync + 'static {
    fn schema(&self) -> ToolSchema;
    async fn call(&self, arguments: Value) -> ToolOutput;
}

#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.schema().name, tool);
    }
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.tools.values().map(|t| t.schema()).collect()
    }
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Run one call. Unknown tools and malformed JSON arguments come back as tool errors.
    pub async fn call(&self, name: &str, raw_arguments: &str) -> ToolOutput {
        let Some(tool) = self.tools.get(name) else {
            return ToolOutput { content: format!("Error: tool `{name}` is not available. Answer without it."), is_error: true };
        };
        let arguments = if raw_arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str(raw_arguments) {
                Ok(v) => v,
                Err(e) => {
                    return ToolOutput {
                        content: format!("Error: the arguments for `{name}` are not valid JSON ({e}). Send a JSON object."),
                        is_error: true,
                    };
                }
            }
        };
        tool.call(arguments).await
    }
}
