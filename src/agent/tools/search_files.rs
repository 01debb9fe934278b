//! `search_files`: regex search over a directory tree, honouring `.gitignore` / `.ignore` and
//! skipping hidden and binary files, with an optional glob filter and a result cap.

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::io::BufRead;
use std::path::PathBuf;

const DEFAULT_MAX: usize = 100;
const HARD_MAX: usize = 1000;
const MAX_LINE_CHARS: usize = 300;

pub struct SearchFiles;

#[async_trait]
impl Tool for SearchFiles {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "search_files".into(),
            description: "Search file contents with a regular expression under a directory (default: the working directory). \
                          Respects .gitignore. Returns `path:line: text` lines."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "A regular expression (Rust regex syntax)."},
                    "path": {"type": "string"},
                    "glob": {"type": "string", "description": "Only files matching this glob, e.g. `*.rs`."},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": HARD_MAX},
                    "case_insensitive": {"type": "boolean"}
                },
                "required": ["pattern"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "file"
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let pattern = match required_str(&args, "pattern") {
            Ok(p) => p,
            Err(e) => return e,
        };
        let insensitive = args.get("case_insensitive").and_then(Value::as_bool).unwrap_or(false);
        let regex = match regex::RegexBuilder::new(pattern).case_insensitive(insensitive).build() {
            Ok(r) => r,
            Err(e) => return ToolOutput::error(format!("invalid regular expression {pattern:?}: {e}")),
        };
        let root = args.get("path").and_then(Value::as_str).map(|p| ctx.paths.resolve(p)).unwrap_or_else(|| ctx.paths.workdir.clone());
        let glob = args.get("glob").and_then(Value::as_str).map(str::to_string);
        let max = args.get("max_results").and_then(Value::as_u64).map(|m| m as usize).unwrap_or(DEFAULT_MAX).clamp(1, HARD_MAX);
        let result = tokio::task::spawn_blocking(move || search(&root, &regex, glob.as_deref(), max)).await;
        match result {
            Ok(Ok(text)) => ToolOutput::ok(text),
            Ok(Err(e)) => ToolOutput::error(e),
            Err(e) => ToolOutput::error(format!("search failed: {e}")),
        }
    }
}

fn search(root: &PathBuf, regex: &regex::Regex, glob: Option<&str>, max: usize) -> Result<String, String> {
    if !root.exists() {
        return Err(format!("{} does not exist", root.display()));
    }
    let mut builder = ignore::WalkBuilder::new(root);
    builder.require_git(false);
    if let Some(g) = glob {
        let mut overrides = ignore::overrides::OverrideBuilder::new(root);
        overrides.add(g).map_err(|e| format!("invalid glob {g:?}: {e}"))?;
        builder.overrides(overrides.build().map_err(|e| format!("invalid glob {g:?}: {e}"))?);
    }
    let mut hits = Vec::new();
    let mut total = 0usize;
    for entry in builder.build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(file) = std::fs::File::open(entry.path()) else { continue };
        let rel = entry.path().strip_prefix(root).unwrap_or(entry.path()).display().to_string();
        let mut reader = std::io::BufReader::new(file);
        if reader.fill_buf().map(|b| b.iter().take(8192).any(|&c| c == 0)).unwrap_or(true) {
            continue; // binary
        }
        for (i, line) in reader.lines().enumerate() {
            let Ok(line) = line else { break };
            if regex.is_match(&line) {
                total += 1;
                if hits.len() < max {
                    let text: String = line.trim().chars().take(MAX_LINE_CHARS).collect();
                    hits.push(format!("{rel}:{}: {text}", i + 1));
                }
            }
        }
    }
    if hits.is_empty() {
        return Ok(format!("No matches for /{}/ under {}.", regex.as_str(), root.display()));
    }
    let mut out = hits.join("\n");
    if total > hits.len() {
        out.push_str(&format!("\n[{total} matches (truncated at {max}); narrow the pattern, path or glob]"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::{AgentPaths, ToolSettings};

    #[tokio::test]
    async fn respects_gitignore_globs_and_caps() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::detached(AgentPaths::under(dir.path()), ToolSettings::default());
        std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
        std::fs::create_dir_all(dir.path().join("target")).unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("target/out.rs"), "fn needle() {}\n").unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "// intro\nfn needle() {}\n").unwrap();
        std::fs::write(dir.path().join("notes.md"), "needle in notes\n").unwrap();
        let out = SearchFiles.call(&ctx, json!({"pattern": "needle"})).await.content;
        assert!(out.contains("src/lib.rs:2: fn needle() {}") && out.contains("notes.md:1:"), "{out}");
        assert!(!out.contains("target/"), "ignored files are skipped: {out}");
        let out = SearchFiles.call(&ctx, json!({"pattern": "NEEDLE", "glob": "*.rs", "case_insensitive": true})).await.content;
        assert!(out.contains("src/lib.rs") && !out.contains("notes.md"), "{out}");
        let bad = SearchFiles.call(&ctx, json!({"pattern": "(unclosed"})).await;
        assert!(bad.is_error && bad.content.contains("invalid regular expression"));
        std::fs::write(dir.path().join("many.txt"), "needle\n".repeat(20)).unwrap();
        let out = SearchFiles.call(&ctx, json!({"pattern": "needle", "max_results": 5})).await.content;
        assert!(out.contains("matches (truncated at 5)"), "{out}");
    }
}
