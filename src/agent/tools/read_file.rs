//! `read_file`: a text file's lines, numbered, from an optional offset; binary files are
//! refused and big files are read a window at a time.

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::io::{BufRead, Read};

const DEFAULT_LIMIT: usize = 2000;
const MAX_LINE_CHARS: usize = 2000;

pub struct ReadFile;

#[async_trait]
impl Tool for ReadFile {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "read_file".into(),
            description: "Read a text file. Lines come numbered (`   12|text`). For long files pass `offset` (first line, 1-based) \
                          and `limit` (number of lines)."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Absolute, or relative to the working directory."},
                    "offset": {"type": "integer", "minimum": 1},
                    "limit": {"type": "integer", "minimum": 1}
                },
                "required": ["path"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "file"
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let path = match required_str(&args, "path") {
            Ok(p) => ctx.paths.resolve(p),
            Err(e) => return e,
        };
        let offset = args.get("offset").and_then(Value::as_u64).map(|o| o.max(1) as usize);
        let limit = args.get("limit").and_then(Value::as_u64).map(|l| l.max(1) as usize);
        let max_bytes = ctx.settings.max_read_bytes;
        let result = tokio::task::spawn_blocking(move || read(&path, offset, limit, max_bytes)).await;
        match result {
            Ok(Ok(text)) => ToolOutput::ok(text),
            Ok(Err(e)) => ToolOutput::error(e),
            Err(e) => ToolOutput::error(format!("reading failed: {e}")),
        }
    }
}

fn read(path: &std::path::Path, offset: Option<usize>, limit: Option<usize>, max_bytes: usize) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("file not found: {}. Check the path (search_files can find it).", path.display()),
        _ => format!("cannot read {}: {e}", path.display()),
    })?;
    if meta.is_dir() {
        return Err(format!("{} is a directory; use search_files or terminal `ls` to list it", path.display()));
    }
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut head = vec![0u8; 8192];
    let n = file.read(&mut head).map_err(|e| e.to_string())?;
    if head[..n].contains(&0) {
        return Err(format!("{} looks like a binary file ({} bytes); it cannot be shown as text", path.display(), meta.len()));
    }
    if meta.len() as usize > max_bytes && offset.is_none() && limit.is_none() {
        return Err(format!(
            "{} is {} bytes, over the {max_bytes}-byte limit for one read; pass offset and limit to read part of it",
            path.display(),
            meta.len()
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let start = offset.unwrap_or(1);
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    let mut out = String::new();
    let mut total = 0usize;
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let number = i + 1;
        total = number;
        if number < start || number >= start + limit {
            continue;
        }
        let line = line.map_err(|e| format!("{} is not valid UTF-8 text ({e})", path.display()))?;
        let line: String = if line.chars().count() > MAX_LINE_CHARS {
            format!("{}… [line cut at {MAX_LINE_CHARS} characters]", line.chars().take(MAX_LINE_CHARS).collect::<String>())
        } else {
            line
        };
        out.push_str(&format!("{number:>6}|{line}\n"));
    }
    if total == 0 {
        return Ok(format!("{} is empty.", path.display()));
    }
    if start > total {
        return Err(format!("offset {start} is past the end: the file has {total} lines"));
    }
    let last_shown = (start + limit - 1).min(total);
    if last_shown < total {
        out.push_str(&format!("… {} more lines; call again with offset={}\n", total - last_shown, last_shown + 1));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::{AgentPaths, ToolSettings};

    fn ctx(dir: &std::path::Path) -> ToolContext {
        ToolContext::detached(AgentPaths::under(dir), ToolSettings { max_read_bytes: 200, ..ToolSettings::default() })
    }

    #[tokio::test]
    async fn numbered_lines_windows_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
        let out = ReadFile.call(&ctx(dir.path()), json!({"path": "a.txt"})).await;
        assert_eq!(out.content, "     1|one\n     2|two\n     3|three\n");
        let out = ReadFile.call(&ctx(dir.path()), json!({"path": "a.txt", "offset": 2, "limit": 1})).await;
        assert_eq!(out.content, "     2|two\n… 1 more lines; call again with offset=3\n");
        std::fs::write(dir.path().join("bin"), [0u8, 1, 2, 3]).unwrap();
        assert!(ReadFile.call(&ctx(dir.path()), json!({"path": "bin"})).await.content.contains("binary"));
        let missing = ReadFile.call(&ctx(dir.path()), json!({"path": "nope.txt"})).await;
        assert!(missing.is_error && missing.content.contains("file not found"));
        std::fs::write(dir.path().join("big.txt"), "line\n".repeat(100)).unwrap();
        let big = ReadFile.call(&ctx(dir.path()), json!({"path": "big.txt"})).await;
        assert!(big.is_error && big.content.contains("offset and limit"), "{}", big.content);
        let window = ReadFile.call(&ctx(dir.path()), json!({"path": "big.txt", "offset": 99})).await;
        assert_eq!(window.content, "    99|line\n   100|line\n");
    }
}
