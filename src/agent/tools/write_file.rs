//! `write_file`: create or replace a file atomically (temporary file + rename), creating parent
//! directories. Memory files and `.git` internals are refused: they have their own tools.

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::path::{Component, Path};

pub struct WriteFile;

/// Why `path` may not be written by the file tools, if it may not.
pub(super) fn forbidden(ctx: &ToolContext, path: &Path) -> Option<String> {
    if path.components().any(|c| matches!(c, Component::Normal(n) if n == ".git")) {
        return Some("files inside .git are managed by git; use git commands through the terminal".into());
    }
    if path.starts_with(&ctx.paths.memories) {
        return Some("memory files are changed with the memory tool, which screens and budgets them".into());
    }
    None
}

#[async_trait]
impl Tool for WriteFile {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "write_file".into(),
            description: "Create or overwrite a file with the given content (parent directories are created). To change part of \
                          an existing file, prefer `patch`."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"}
                },
                "required": ["path", "content"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "file"
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let (path, content) = match (required_str(&args, "path"), required_str(&args, "content")) {
            (Ok(p), Ok(c)) => (ctx.paths.resolve(p), c.to_string()),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        if let Some(why) = forbidden(ctx, &path) {
            return ToolOutput::error(format!("refused to write {}: {why}", path.display()));
        }
        let shown = path.display().to_string();
        let result = tokio::task::spawn_blocking(move || crate::agent::memory::write_atomically(&path, &content).map(|_| content)).await;
        match result {
            Ok(Ok(content)) => ToolOutput::ok(format!("Wrote {} bytes ({} lines) to {shown}.", content.len(), content.lines().count())),
            Ok(Err(e)) => ToolOutput::error(format!("cannot write {shown}: {e}")),
            Err(e) => ToolOutput::error(format!("writing failed: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::{AgentPaths, ToolSettings};

    #[tokio::test]
    async fn creates_directories_and_refuses_memory_and_git() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::detached(AgentPaths::under(dir.path()), ToolSettings::default());
        let out = WriteFile.call(&ctx, json!({"path": "deep/er/notes.md", "content": "a\nb\n"})).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(std::fs::read_to_string(dir.path().join("deep/er/notes.md")).unwrap(), "a\nb\n");
        let out = WriteFile.call(&ctx, json!({"path": "memories/MEMORY.md", "content": "x"})).await;
        assert!(out.is_error && out.content.contains("memory tool"));
        let out = WriteFile.call(&ctx, json!({"path": "repo/.git/config", "content": "x"})).await;
        assert!(out.is_error && out.content.contains(".git"));
        assert!(!dir.path().join("repo/.git/config").exists());
    }
}
