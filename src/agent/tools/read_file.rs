//! `read_file`: returns a text file's lines numbered `     1|text`, a window of them with
//! `offset`/`limit`, streaming large files so only the requested lines are held; refuses binary
//! files and whole reads over the configured size; reads only what the sandbox's policy allows
//! (never HERMES_HOME outside the workspace, judged on the canonical path) and only regular files.

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::Path;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, BufReader};

pub(super) struct ReadFile;

/// Lines returned when no `limit` is given.
const DEFAULT_LIMIT: usize = 2000;
/// Bytes inspected for NUL to decide a file is binary.
const SNIFF_BYTES: usize = 8 * 1024;
/// Characters of one line shown; longer lines (minified code, data) are cut.
const MAX_LINE_CHARS: usize = 2000;

#[async_trait]
impl Tool for ReadFile {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "read_file".into(),
            description: "Read a text file. Lines come back numbered as `     N|text` (the number and `|` are not part of \
                the file). Reads up to 2000 lines from `offset`; a note says when more remain and which offset to \
                continue from. Large files must be read in windows with offset and limit."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to read; relative paths resolve against the working directory."},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to return, 1-based. Optional, default 1."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Most lines to return. Optional, default 2000."}
                },
                "required": ["path"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "file"
    }

    fn returns_outside_content(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> ToolOutput {
        match read(ctx, &arguments).await {
            Ok(listing) | Err(listing) => listing,
        }
    }
}

/// The lines a call asked for.
struct Window {
    offset: usize,
    limit: usize,
    /// `offset` or `limit` was given: a file over the whole-read size limit may be read.
    explicit: bool,
}

/// What reading a window found.
struct Listing {
    /// The numbered lines.
    text: String,
    /// Lines in the file.
    lines: usize,
    shown: usize,
    /// Lines after the window (or after the output byte limit, which cut it short).
    remaining: usize,
    /// The output reached its byte limit before the window's end.
    cut_by_size: bool,
}

async fn read(ctx: &ToolContext, arguments: &Value) -> Result<ToolOutput, ToolOutput> {
    let path = required_str(arguments, "path")?;
    let window = window(arguments)?;
    let file_path = ctx.paths.resolve(path);
    let reader = open_text(ctx, &file_path, window.explicit).await?;
    let max_bytes = ctx.settings.max_read_bytes;
    let listing = number_lines(reader, &window, max_bytes)
        .await
        .map_err(|e| ToolOutput::error(format!("could not read {}: {e}", file_path.display())))?;
    if listing.lines == 0 {
        return Ok(ToolOutput::ok(format!("{} is empty.", file_path.display())));
    }
    if listing.shown == 0 {
        let lines = listing.lines;
        return Err(ToolOutput::error(format!(
            "offset {} is past the end of {}, which has {lines} lines; pass an offset between 1 and {lines}.",
            window.offset,
            file_path.display()
        )));
    }
    let mut out = listing.text;
    if listing.remaining > 0 {
        let next = window.offset + listing.shown;
        let why = if listing.cut_by_size { format!(" (stopped at the {max_bytes}-byte output limit)") } else { String::new() };
        let _ = write!(out, "… {} more lines{why}; call again with offset={next} to continue.", listing.remaining);
    }
    Ok(ToolOutput::ok(out))
}

fn window(arguments: &Value) -> Result<Window, ToolOutput> {
    let offset = positive(arguments, "offset")?;
    let limit = positive(arguments, "limit")?;
    Ok(Window { explicit: offset.is_some() || limit.is_some(), offset: offset.unwrap_or(1), limit: limit.unwrap_or(DEFAULT_LIMIT) })
}

/// A reader of `file_path` once it is known to be a readable regular text file (not binary; not
/// over the whole-read size limit unless a window was asked for), or the tool error saying why
/// not and what to do instead.
async fn open_text(ctx: &ToolContext, file_path: &Path, windowed: bool) -> Result<impl AsyncBufRead + Unpin, ToolOutput> {
    let confinement = &ctx.settings.confinement;
    confinement.readable(file_path).map_err(|refusal| ToolOutput::error(refusal.to_string()))?;
    let meta = match tokio::fs::metadata(file_path).await {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ToolOutput::error(format!(
                "file not found: {}. Check the path (relative paths resolve against {}); use search_files or \
                 `ls` in the terminal to find the right one.",
                file_path.display(),
                ctx.paths.workdir.display()
            )));
        }
        Err(e) => return Err(ToolOutput::error(format!("could not read {}: {e}", file_path.display()))),
    };
    if meta.is_dir() {
        return Err(ToolOutput::error(format!(
            "{} is a directory, not a file; list it with `ls` in the terminal or search it with search_files.",
            file_path.display()
        )));
    }
    let file = match confinement.open_for_read(file_path) {
        Ok((f, _)) => tokio::fs::File::from_std(f),
        Err(refusal) => return Err(ToolOutput::error(refusal.to_string())),
    };
    let mut reader = BufReader::new(file);

    // Binary check on the first bytes; they are chained back in front for the line pass.
    let mut sniff = Vec::with_capacity(SNIFF_BYTES);
    if let Err(e) = (&mut reader).take(SNIFF_BYTES as u64).read_to_end(&mut sniff).await {
        return Err(ToolOutput::error(format!("could not read {}: {e}", file_path.display())));
    }
    if sniff.contains(&0) {
        return Err(ToolOutput::error(format!(
            "{} looks like a binary file (it contains NUL bytes); read_file only shows text. Inspect it with the \
             terminal instead (e.g. `file`, `xxd | head`, or a tool that understands the format).",
            file_path.display()
        )));
    }
    let max_bytes = ctx.settings.max_read_bytes;
    if meta.len() > max_bytes as u64 && !windowed {
        return Err(ToolOutput::error(format!(
            "{} is {} bytes, over the {max_bytes}-byte limit for reading a whole file. Read it in windows with \
             `offset` and `limit` (e.g. offset=1, limit=500), or find the lines you need with search_files.",
            file_path.display(),
            meta.len()
        )));
    }
    Ok(std::io::Cursor::new(sniff).chain(reader))
}

/// Number the window's lines, streaming: only the window is held, and the output stops growing
/// at `max_bytes` (the rest is counted, for the note on where to continue).
async fn number_lines(mut reader: impl AsyncBufRead + Unpin, window: &Window, max_bytes: usize) -> std::io::Result<Listing> {
    let mut listing = Listing { text: String::new(), lines: 0, shown: 0, remaining: 0, cut_by_size: false };
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).await? == 0 {
            return Ok(listing);
        }
        listing.lines += 1;
        let number = listing.lines;
        if number < window.offset {
            continue;
        }
        if listing.shown >= window.limit || listing.cut_by_size {
            listing.remaining += 1;
            continue;
        }
        if listing.text.len() >= max_bytes {
            listing.cut_by_size = true;
            listing.remaining += 1;
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let _ = if text.chars().count() > MAX_LINE_CHARS {
            let cut: String = text.chars().take(MAX_LINE_CHARS).collect();
            writeln!(listing.text, "{number:>6}|{cut}… [line cut at {MAX_LINE_CHARS} characters]")
        } else {
            writeln!(listing.text, "{number:>6}|{text}")
        };
        listing.shown += 1;
    }
}

/// An optional positive integer argument (0 is read as "from the start" for `offset`, as models
/// sometimes count from 0), or a tool error naming it.
fn positive(arguments: &Value, key: &str) -> Result<Option<usize>, ToolOutput> {
    let bad = || ToolOutput::error(format!("`{key}` must be a positive whole number of lines."));
    let n = match arguments.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_u64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64)),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        Some(_) => None,
    }
    .ok_or_else(bad)?;
    match (n, key) {
        (0, "offset") => Ok(Some(1)),
        (0, _) => Err(bad()),
        (n, _) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::{AgentPaths, ToolSettings};
    use std::path::Path;
    use std::sync::Arc;

    fn ctx(dir: &Path) -> ToolContext {
        ToolContext::detached(AgentPaths::under(dir), ToolSettings::default())
    }

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[tokio::test]
    async fn numbers_every_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "alpha\r\nbeta\n\ngamma").unwrap();
        let out = ReadFile.call(&ctx(dir.path()), json!({"path": "a.txt"})).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(out.content, "     1|alpha\n     2|beta\n     3|\n     4|gamma\n");
    }

    #[tokio::test]
    async fn offset_and_limit_select_a_window_and_say_what_remains() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), numbered(10)).unwrap();
        let ctx = ctx(dir.path());
        let out = ReadFile.call(&ctx, json!({"path": "a.txt", "offset": 3, "limit": 2})).await;
        assert_eq!(out.content, "     3|line 3\n     4|line 4\n… 6 more lines; call again with offset=5 to continue.");
        let out = ReadFile.call(&ctx, json!({"path": "a.txt", "offset": 9})).await;
        assert_eq!(out.content, "     9|line 9\n    10|line 10\n");
        let out = ReadFile.call(&ctx, json!({"path": "a.txt", "offset": 11})).await;
        assert!(out.is_error && out.content.contains("has 10 lines"), "{}", out.content);
        let out = ReadFile.call(&ctx, json!({"path": "a.txt", "limit": "lots"})).await;
        assert!(out.is_error && out.content.contains("`limit`"), "{}", out.content);
    }

    #[tokio::test]
    async fn default_limit_is_2000_lines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), numbered(2500)).unwrap();
        let out = ReadFile.call(&ctx(dir.path()), json!({"path": "a.txt"})).await;
        assert!(out.content.contains("  2000|line 2000\n") && !out.content.contains("line 2001"));
        assert!(out.content.ends_with("… 500 more lines; call again with offset=2001 to continue."), "{}", out.content);
    }

    #[tokio::test]
    async fn refuses_binary_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.bin"), b"\x7fELF\x00\x01\x02").unwrap();
        let out = ReadFile.call(&ctx(dir.path()), json!({"path": "b.bin"})).await;
        assert!(out.is_error && out.content.contains("binary"), "{}", out.content);
    }

    #[tokio::test]
    async fn missing_files_and_directories_are_explained() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let out = ReadFile.call(&ctx, json!({"path": "nope.txt"})).await;
        assert!(out.is_error, "{}", out.content);
        assert!(out.content.contains("file not found: ") && out.content.contains("nope.txt") && out.content.contains("search_files"));
        let out = ReadFile.call(&ctx, json!({"path": "."})).await;
        assert!(out.is_error && out.content.contains("is a directory"), "{}", out.content);
        let out = ReadFile.call(&ctx, json!({})).await;
        assert!(out.is_error && out.content.contains("`path`"), "{}", out.content);
    }

    #[tokio::test]
    async fn large_files_need_a_window() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.txt"), numbered(300)).unwrap();
        let mut ctx = ctx(dir.path());
        ctx.settings = Arc::new(ToolSettings { max_read_bytes: 1000, ..ToolSettings::default() });
        let out = ReadFile.call(&ctx, json!({"path": "big.txt"})).await;
        assert!(out.is_error && out.content.contains("over the 1000-byte limit") && out.content.contains("offset"), "{}", out.content);
        let out = ReadFile.call(&ctx, json!({"path": "big.txt", "offset": 250, "limit": 2})).await;
        assert_eq!(out.content, "   250|line 250\n   251|line 251\n… 49 more lines; call again with offset=252 to continue.");
        // A window larger than the byte limit stops early and says where to resume.
        let out = ReadFile.call(&ctx, json!({"path": "big.txt", "offset": 1, "limit": 300})).await;
        assert!(out.content.len() < 1200, "{}", out.content.len());
        assert!(out.content.contains("byte output limit); call again with offset="), "{}", out.content);
    }
}
