//! `patch`: exact search/replace in a file. A missing match (with a hint when only whitespace
//! differs) or an ambiguous one is a clear error; the write is atomic.

use super::write_file::forbidden;
use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct Patch;

#[async_trait]
impl Tool for Patch {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "patch".into(),
            description: "Replace an exact piece of text in a file. `old_string` must match exactly once (copy it from read_file \
                          output without the line numbers) unless `replace_all` is true."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "old_string": {"type": "string"},
                    "new_string": {"type": "string"},
                    "replace_all": {"type": "boolean"}
                },
                "required": ["path", "old_string", "new_string"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "file"
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let (path, old, new) = match (required_str(&args, "path"), required_str(&args, "old_string"), required_str(&args, "new_string")) {
            (Ok(p), Ok(o), Ok(n)) => (ctx.paths.resolve(p), o.to_string(), n.to_string()),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return e,
        };
        if old.is_empty() {
            return ToolOutput::error("`old_string` is empty; give the exact text to replace (use write_file to create a file).");
        }
        if let Some(why) = forbidden(ctx, &path) {
            return ToolOutput::error(format!("refused to change {}: {why}", path.display()));
        }
        let replace_all = args.get("replace_all").and_then(Value::as_bool).unwrap_or(false);
        let result = tokio::task::spawn_blocking(move || apply(&path, &old, &new, replace_all)).await;
        match result {
            Ok(Ok(summary)) => ToolOutput::ok(summary),
            Ok(Err(e)) => ToolOutput::error(e),
            Err(e) => ToolOutput::error(format!("patching failed: {e}")),
        }
    }
}

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte].matches('\n').count() + 1
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn apply(path: &std::path::Path, old: &str, new: &str, replace_all: bool) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let positions: Vec<usize> = text.match_indices(old).map(|(i, _)| i).collect();
    match positions.len() {
        0 => {
            let hint = if text.lines().any(|l| !squash(l).is_empty() && squash(old).contains(&squash(l)))
                || squash(&text).contains(&squash(old))
            {
                let first = old.lines().find(|l| !l.trim().is_empty()).unwrap_or(old).trim();
                let near =
                    text.lines().enumerate().find(|(_, l)| l.contains(first)).map(|(i, l)| format!(" Closest line {}: {:?}.", i + 1, l));
                format!(" The text exists with different whitespace or indentation; copy it exactly.{}", near.unwrap_or_default())
            } else {
                " Read the file again and copy the text exactly.".to_string()
            };
            Err(format!("`old_string` was not found in {}.{hint}", path.display()))
        }
        n if n > 1 && !replace_all => {
            let lines: Vec<String> = positions.iter().take(10).map(|&p| line_of(&text, p).to_string()).collect();
            Err(format!(
                "`old_string` matches {n} places (lines {}); add surrounding context to make it unique, or set replace_all",
                lines.join(", ")
            ))
        }
        n => {
            let first_line = line_of(&text, positions[0]);
            let updated = if replace_all { text.replace(old, new) } else { text.replacen(old, new, 1) };
            crate::agent::memory::write_atomically(path, &updated).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(format!(
                "Patched {}: {n} replacement(s), first at line {first_line} (-{} +{} lines each).",
                path.display(),
                old.lines().count().max(1),
                new.lines().count().max(1)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::{AgentPaths, ToolSettings};

    #[tokio::test]
    async fn unique_ambiguous_missing_and_replace_all() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::detached(AgentPaths::under(dir.path()), ToolSettings::default());
        let file = dir.path().join("main.py");
        std::fs::write(&file, "def f():\n    return 1\n\nx = 1\ny = 1\n").unwrap();
        let out = Patch.call(&ctx, json!({"path": "main.py", "old_string": "return 1", "new_string": "return 2"})).await;
        assert!(!out.is_error && out.content.contains("line 2"), "{}", out.content);
        let out = Patch.call(&ctx, json!({"path": "main.py", "old_string": " = 1", "new_string": " = 3"})).await;
        assert!(out.is_error && out.content.contains("matches 2 places (lines 4, 5)"), "{}", out.content);
        let out = Patch.call(&ctx, json!({"path": "main.py", "old_string": "def f():\n  return 2", "new_string": "z"})).await;
        assert!(out.is_error && out.content.contains("different whitespace"), "{}", out.content);
        let out = Patch.call(&ctx, json!({"path": "main.py", "old_string": "nothing like it", "new_string": "z"})).await;
        assert!(out.is_error && out.content.contains("not found"), "{}", out.content);
        let out = Patch.call(&ctx, json!({"path": "main.py", "old_string": " = 1", "new_string": " = 3", "replace_all": true})).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "def f():\n    return 2\n\nx = 3\ny = 3\n");
        assert!(Patch.call(&ctx, json!({"path": "main.py", "old_string": "", "new_string": "z"})).await.is_error);
    }
}
