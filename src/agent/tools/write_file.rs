//! `write_file`: creates or overwrites one whole file atomically (temp file in the same directory,
//! then rename), creating parent directories; also owns the write guard and the atomic write that
//! `patch` shares (no writes into the memory store or into a `.git` directory, none outside the
//! sandbox's writable directories judged on the real path, none onto a FIFO or a device).

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::path::{Component, Path, PathBuf};

pub(super) struct WriteFile;

#[async_trait]
impl Tool for WriteFile {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "write_file".into(),
            description: "Create a file or replace its entire content. Parent directories are created as needed and the \
                write is atomic. Overwrites without asking, so read the file first if it may exist; to change part \
                of an existing file use `patch` instead."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to write; relative paths resolve against the working directory."},
                    "content": {"type": "string", "description": "The complete new content of the file."}
                },
                "required": ["path", "content"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "file"
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> ToolOutput {
        let (path, content) = match (required_str(&arguments, "path"), required_str(&arguments, "content")) {
            (Ok(p), Ok(c)) => (p, c),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        if path.trim().is_empty() {
            return ToolOutput::error("`path` is empty; pass the file to write.");
        }
        let target = match writable_target(ctx, path).await {
            Ok(t) => t,
            Err(e) => return e,
        };
        if tokio::fs::metadata(&target).await.is_ok_and(|m| m.is_dir()) {
            return ToolOutput::error(format!("{} is a directory; pass the path of a file inside it.", target.display()));
        }
        let existed = tokio::fs::try_exists(&target).await.unwrap_or(false);
        if let Some(parent) = target.parent()
            && let Err(e) = tokio::fs::create_dir_all(parent).await
        {
            return ToolOutput::error(format!("could not create the directory {}: {e}", parent.display()));
        }
        if let Err(e) = crate::fs_atomic::write_async(&target, content.as_bytes().to_vec()).await {
            return ToolOutput::error(format!("could not write {}: {e}", target.display()));
        }
        ToolOutput::ok(format!(
            "{} {}: {} bytes, {} lines",
            if existed { "overwrote" } else { "created" },
            target.display(),
            content.len(),
            content.lines().count()
        ))
    }
}

/// `path` resolved against the working directory (and through a symlink at the final component,
/// so the link's target is what gets written), or a tool error when writing there is not allowed:
/// outside the sandbox's writable directories (a symlink leading out included), onto something
/// that is not a regular file, into the memory store (the memory tool's) or a `.git` directory
/// (git's).
pub(super) async fn writable_target(ctx: &ToolContext, path: &str) -> Result<PathBuf, ToolOutput> {
    let mut target = normalize(&ctx.paths.resolve(path));
    if tokio::fs::symlink_metadata(&target).await.is_ok_and(|m| m.file_type().is_symlink())
        && let Ok(real) = tokio::fs::canonicalize(&target).await
    {
        target = real;
    }
    let confinement = &ctx.settings.confinement;
    if let Err(refusal) = confinement.writable(&target).and_then(|_| crate::agent::sandbox::files::refuse_special(&target)) {
        return Err(ToolOutput::error(refusal.to_string()));
    }
    let real = real_path(&target).await;
    let memory_dirs = [ctx.paths.home.join("memories"), ctx.paths.memories.clone()];
    for dir in memory_dirs {
        let dir = normalize(&dir);
        let real_dir = real_path(&dir).await;
        if target.starts_with(&dir) || real.starts_with(&real_dir) {
            return Err(ToolOutput::error(format!(
                "{} is inside the memory store ({}); files there are managed by the `memory` tool. Use `memory` to add, \
                 replace or remove entries instead.",
                target.display(),
                dir.display()
            )));
        }
    }
    if target.components().chain(real.components()).any(|c| c.as_os_str() == ".git") {
        return Err(ToolOutput::error(format!(
            "{} is inside a `.git` directory; git's internal files must not be edited directly. Use git commands through \
             the `terminal` tool instead.",
            target.display()
        )));
    }
    Ok(target)
}

/// `path` with `.` and `..` components removed lexically (so `a/../memories` cannot slip past a
/// prefix check).
pub(super) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(c);
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` with its longest existing ancestor canonicalized (symlinks resolved), the rest appended.
async fn real_path(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = tokio::fs::canonicalize(&existing).await {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.file_name().map(|n| n.to_os_string()), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::{AgentPaths, ToolSettings};

    fn ctx(dir: &Path) -> ToolContext {
        ToolContext::detached(AgentPaths::under(dir), ToolSettings::default())
    }

    #[tokio::test]
    async fn creates_parent_directories_and_reports_size() {
        let dir = tempfile::tempdir().unwrap();
        let out = WriteFile.call(&ctx(dir.path()), json!({"path": "a/b/c.txt", "content": "one\ntwo\n"})).await;
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.starts_with("created ") && out.content.ends_with("8 bytes, 2 lines"), "{}", out.content);
        assert_eq!(std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(), "one\ntwo\n");
    }

    #[tokio::test]
    async fn overwrites_atomically_without_leaving_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.txt");
        std::fs::write(&file, "old").unwrap();
        let out = WriteFile.call(&ctx(dir.path()), json!({"path": file.to_str().unwrap(), "content": "new"})).await;
        assert!(out.content.starts_with("overwrote "), "{}", out.content);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("f.txt")]);
    }

    #[tokio::test]
    async fn refuses_the_memory_store_and_git_internals() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        for path in ["memories/MEMORY.md", "sub/../memories/USER.md"] {
            let out = WriteFile.call(&ctx, json!({"path": path, "content": "x"})).await;
            assert!(out.is_error && out.content.contains("`memory` tool"), "{path}: {}", out.content);
        }
        let out = WriteFile.call(&ctx, json!({"path": "repo/.git/config", "content": "x"})).await;
        assert!(out.is_error && out.content.contains("git commands"), "{}", out.content);
        assert!(!dir.path().join("memories").exists() && !dir.path().join("repo").exists());
    }

    #[tokio::test]
    async fn missing_arguments_and_directories_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let out = WriteFile.call(&ctx, json!({"path": "x.txt"})).await;
        assert!(out.is_error && out.content.contains("`content`"), "{}", out.content);
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let out = WriteFile.call(&ctx, json!({"path": "d", "content": "x"})).await;
        assert!(out.is_error && out.content.contains("is a directory"), "{}", out.content);
    }
}
