//! `patch`: exact search-and-replace inside one text file, written atomically — refuses ambiguous
//! or missing matches with line numbers and whitespace hints, and answers with a short
//! unified-style summary of the change.

use super::write_file::writable_target;
use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::fmt::Write as _;

pub(super) struct Patch;

/// Lines of each side shown in the summary's hunk.
const HUNK_LINES: usize = 30;
/// Line numbers listed for an ambiguous match.
const LISTED_MATCHES: usize = 20;

#[async_trait]
impl Tool for Patch {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "patch".into(),
            description: "Edit a text file by replacing an exact piece of text. `old_string` must match the file exactly, \
                including indentation and line breaks, and (unless replace_all is set) exactly once: include enough \
                surrounding lines to make it unique. Copy it from read_file output without the `N|` line-number \
                prefix. To create a file or rewrite it entirely, use write_file."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to edit; relative paths resolve against the working directory."},
                    "old_string": {"type": "string", "description": "The exact text to replace (not empty)."},
                    "new_string": {"type": "string", "description": "The text to put in its place (may be empty to delete)."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring a unique match. Optional, default false."}
                },
                "required": ["path", "old_string", "new_string"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "file"
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> ToolOutput {
        match patch_file(ctx, &arguments).await {
            Ok(summary) | Err(summary) => summary,
        }
    }
}

/// The arguments of one call, already checked for sense.
struct Request<'a> {
    path: &'a str,
    old: &'a str,
    new: &'a str,
    replace_all: bool,
}

/// The steps of one call; every early refusal is the tool's answer.
async fn patch_file(ctx: &ToolContext, arguments: &Value) -> Result<ToolOutput, ToolOutput> {
    let request = Request::parse(arguments)?;
    let target = writable_target(ctx, request.path).await?;
    let shown = target.display().to_string();
    let content = read_for_patch(ctx, &target, &shown).await?;
    let (old, new) = matching_line_endings(&content, request.old, request.new);
    let matches = Matches::find(&content, &old, &shown, request.replace_all)?;
    let updated = if request.replace_all { content.replace(&old, &new) } else { content.replacen(&old, &new, 1) };
    if let Err(e) = crate::fs_atomic::write_async(&target, updated.as_bytes().to_vec()).await {
        return Err(ToolOutput::error(format!("could not write {shown}: {e}")));
    }
    let hunk = Hunk::at(&content, matches.first(), &old, &new);
    Ok(ToolOutput::ok(summary(&shown, &matches, &content, &updated, &hunk)))
}

impl<'a> Request<'a> {
    fn parse(arguments: &'a Value) -> Result<Self, ToolOutput> {
        let (path, old, new) =
            match (required_str(arguments, "path"), required_str(arguments, "old_string"), required_str(arguments, "new_string")) {
                (Ok(p), Ok(o), Ok(n)) => (p, o, n),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return Err(e),
            };
        let replace_all = match arguments.get("replace_all") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => true,
            Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => false,
            Some(_) => return Err(ToolOutput::error("`replace_all` must be true or false.")),
        };
        if old.is_empty() {
            return Err(ToolOutput::error(
                "`old_string` is empty. Put the exact text to replace in it; to insert text, include a neighbouring line in \
                 both old_string and new_string; to create or rewrite a whole file, use write_file.",
            ));
        }
        if old == new {
            return Err(ToolOutput::error("`old_string` and `new_string` are identical, so there is nothing to change."));
        }
        Ok(Self { path, old, new, replace_all })
    }
}

/// Reads the file, turning each way it can fail into advice for the model.
async fn read_for_patch(ctx: &ToolContext, target: &std::path::Path, shown: &str) -> Result<String, ToolOutput> {
    match read_text(ctx, target).await {
        Ok(c) => Ok(c),
        Err(ReadError::Refused(why)) => Err(ToolOutput::error(why)),
        Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(ToolOutput::error(format!("file not found: {shown}. Check the path, or create the file with write_file.")))
        }
        Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
            Err(ToolOutput::error(format!("{shown} is not UTF-8 text; patch only edits text files.")))
        }
        Err(ReadError::Io(e)) => Err(ToolOutput::error(format!("could not read {shown}: {e}"))),
    }
}

/// A file with Windows line endings still matches an old_string written with `\n`.
fn matching_line_endings(content: &str, old: &str, new: &str) -> (String, String) {
    if !content.contains(old) && content.contains("\r\n") && !old.contains('\r') {
        (old.replace('\n', "\r\n"), new.replace('\n', "\r\n"))
    } else {
        (old.to_string(), new.to_string())
    }
}

/// Where old_string occurs: byte offsets and their 1-based line numbers.
struct Matches {
    positions: Vec<usize>,
    lines: Vec<usize>,
}

impl Matches {
    /// Refuses a missing match, and an ambiguous one unless every occurrence is to be replaced.
    fn find(content: &str, old: &str, shown: &str, replace_all: bool) -> Result<Self, ToolOutput> {
        let positions: Vec<usize> = content.match_indices(old).map(|(i, _)| i).collect();
        if positions.is_empty() {
            return Err(not_found(content, old, shown));
        }
        let lines: Vec<usize> = positions.iter().map(|&p| line_of(content, p)).collect();
        if positions.len() > 1 && !replace_all {
            return Err(ToolOutput::error(format!(
                "old_string matches {} places in {shown} (lines {}); add surrounding context to make it unique or set replace_all",
                positions.len(),
                list(&lines)
            )));
        }
        Ok(Self { positions, lines })
    }

    fn first(&self) -> usize {
        // `find` never builds a `Matches` with no positions.
        self.positions[0]
    }
}

/// The answer: where the change landed, how the line count moved, and the first hunk.
fn summary(shown: &str, matches: &Matches, content: &str, updated: &str, hunk: &Hunk) -> String {
    let (positions, lines) = (&matches.positions, &matches.lines);
    let mut out = if positions.len() == 1 {
        format!("patched {shown}: 1 replacement at line {}", lines[0])
    } else {
        format!("patched {shown}: {} replacements at lines {}", positions.len(), list(lines))
    };
    let delta = updated.lines().count() as i64 - content.lines().count() as i64;
    let _ = writeln!(out, "; {} became {}, {delta:+} in the file", plural(hunk.old.len()), plural(hunk.new.len()));
    let _ = writeln!(out, "@@ -{},{} +{},{} @@", hunk.line, hunk.old.len(), hunk.line, hunk.new.len());
    for (sign, side) in [('-', &hunk.old), ('+', &hunk.new)] {
        for l in side.iter().take(HUNK_LINES) {
            let _ = writeln!(out, "{sign}{l}");
        }
        if side.len() > HUNK_LINES {
            let _ = writeln!(out, "{sign}… {} more lines", side.len() - HUNK_LINES);
        }
    }
    if positions.len() > 1 {
        out.push_str("(first replacement shown)\n");
    }
    out.trim_end().to_string()
}

/// The whole lines around one replacement, before and after.
struct Hunk {
    line: usize,
    old: Vec<String>,
    new: Vec<String>,
}

impl Hunk {
    fn at(content: &str, start: usize, old: &str, new: &str) -> Self {
        let end = start + old.len();
        let line_start = content[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = if end > line_start && content[..end].ends_with('\n') {
            end
        } else {
            content[end..].find('\n').map_or(content.len(), |i| end + i)
        };
        let before = &content[line_start..line_end];
        let after = format!("{}{new}{}", &content[line_start..start], &content[end..line_end]);
        let split = |s: &str| s.lines().map(|l| l.strip_suffix('\r').unwrap_or(l).to_string()).collect();
        Self { line: line_of(content, start), old: split(before), new: split(&after) }
    }
}

/// 1-based line number of byte offset `pos`.
/// Why the file to patch could not be read.
enum ReadError {
    /// The sandbox's policy, or not a regular file.
    Refused(String),
    Io(std::io::Error),
}

/// The file's text, opened as the sandbox's policy allows (never blocking on a FIFO).
async fn read_text(ctx: &ToolContext, target: &std::path::Path) -> Result<String, ReadError> {
    use crate::agent::sandbox::files::Refusal;
    use tokio::io::AsyncReadExt;
    if let Err(e) = tokio::fs::metadata(target).await {
        return Err(ReadError::Io(e));
    }
    let mut file = match ctx.settings.confinement.open_for_read(target) {
        Ok((file, _)) => tokio::fs::File::from_std(file),
        Err(Refusal::Io { source, .. }) => return Err(ReadError::Io(source)),
        Err(refusal) => return Err(ReadError::Refused(refusal.to_string())),
    };
    let mut content = String::new();
    file.read_to_string(&mut content).await.map_err(ReadError::Io)?;
    Ok(content)
}

fn line_of(content: &str, pos: usize) -> usize {
    content[..pos].matches('\n').count() + 1
}

fn plural(n: usize) -> String {
    if n == 1 { "1 line".to_string() } else { format!("{n} lines") }
}

fn list(lines: &[usize]) -> String {
    let mut s = lines.iter().take(LISTED_MATCHES).map(|l| l.to_string()).collect::<Vec<_>>().join(", ");
    if lines.len() > LISTED_MATCHES {
        let _ = write!(s, ", … {} more", lines.len() - LISTED_MATCHES);
    }
    s
}

/// The error for an `old_string` that is not in the file, with the best hint we can give.
fn not_found(content: &str, old: &str, shown: &str) -> ToolOutput {
    let mut msg = format!("old_string was not found in {shown}.");
    if let Some((first, last)) = whitespace_insensitive_match(content, old) {
        let last = last.min(first + 9);
        let _ = writeln!(msg, " It matches line {first} if whitespace is ignored: the indentation/whitespace differs. The file has there:");
        for (i, l) in content.lines().enumerate().skip(first - 1).take(last + 1 - first) {
            let _ = writeln!(msg, "{:>6}|{}", i + 1, l.strip_suffix('\r').unwrap_or(l));
        }
        msg.push_str("Copy old_string exactly as the file has it (without the `N|` prefix) and try again.");
    } else if let Some((line, text)) = first_line_hint(content, old) {
        let _ = write!(
            msg,
            " Its first line appears at line {line} (`{text}`), but what follows differs. Read the file around line {line} \
             with read_file and copy the text exactly."
        );
    } else {
        msg.push_str(" The file may have changed: read it again with read_file and copy the text to replace exactly.");
    }
    ToolOutput::error(msg)
}

/// First and last line of a match of `old` in `content` when all whitespace is ignored.
fn whitespace_insensitive_match(content: &str, old: &str) -> Option<(usize, usize)> {
    let needle: String = old.chars().filter(|c| !c.is_whitespace()).collect();
    if needle.is_empty() {
        return None;
    }
    let mut haystack = String::with_capacity(content.len());
    // Byte offset in `content` of every byte of `haystack`.
    let mut origin = Vec::with_capacity(content.len());
    for (i, c) in content.char_indices().filter(|(_, c)| !c.is_whitespace()) {
        haystack.push(c);
        origin.extend(std::iter::repeat_n(i, c.len_utf8()));
    }
    let at = haystack.find(&needle)?;
    let start = *origin.get(at)?;
    let end = *origin.get(at + needle.len() - 1)?;
    Some((line_of(content, start), line_of(content, end)))
}

/// Where the first non-blank line of `old` (trimmed) occurs in `content`, with that line.
fn first_line_hint(content: &str, old: &str) -> Option<(usize, String)> {
    let first = old.lines().map(str::trim).find(|l| l.chars().count() >= 3)?;
    content.lines().enumerate().find(|(_, l)| l.contains(first)).map(|(i, l)| {
        let l = l.trim();
        let shown: String = l.chars().take(120).collect();
        (i + 1, if shown.len() < l.len() { format!("{shown}…") } else { shown })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::{AgentPaths, ToolSettings};
    use std::path::Path;

    fn ctx(dir: &Path) -> ToolContext {
        ToolContext::detached(AgentPaths::under(dir), ToolSettings::default())
    }

    const SOURCE: &str = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n    let y = 1;\n}\n";

    async fn patch(dir: &Path, args: Value) -> ToolOutput {
        std::fs::write(dir.join("main.rs"), SOURCE).unwrap();
        let mut args = args;
        args["path"] = json!("main.rs");
        Patch.call(&ctx(dir), args).await
    }

    fn read(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("main.rs")).unwrap()
    }

    #[tokio::test]
    async fn replaces_a_unique_match_and_summarises() {
        let dir = tempfile::tempdir().unwrap();
        let out = patch(dir.path(), json!({"old_string": "let x = 1;", "new_string": "let x = 2;\n    let z = 3;"})).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(read(dir.path()), SOURCE.replace("let x = 1;", "let x = 2;\n    let z = 3;"));
        assert!(out.content.contains("1 replacement at line 2"), "{}", out.content);
        assert!(out.content.contains("; 1 line became 2 lines, +1 in the file\n"), "{}", out.content);
        assert!(out.content.contains("@@ -2,1 +2,2 @@\n-    let x = 1;\n+    let x = 2;\n+    let z = 3;"), "{}", out.content);
    }

    #[tokio::test]
    async fn ambiguous_match_lists_the_lines_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = patch(dir.path(), json!({"old_string": " = 1;", "new_string": " = 2;"})).await;
        assert!(out.is_error, "{}", out.content);
        assert!(out.content.contains("matches 2 places in") && out.content.contains("(lines 2, 4)"), "{}", out.content);
        assert!(out.content.contains("add surrounding context to make it unique or set replace_all"));
        assert_eq!(read(dir.path()), SOURCE);
    }

    #[tokio::test]
    async fn replace_all_replaces_every_match() {
        let dir = tempfile::tempdir().unwrap();
        let out = patch(dir.path(), json!({"old_string": " = 1;", "new_string": " = 2;", "replace_all": true})).await;
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.contains("2 replacements at lines 2, 4"), "{}", out.content);
        assert_eq!(read(dir.path()), SOURCE.replace(" = 1;", " = 2;"));
    }

    #[tokio::test]
    async fn missing_text_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let out = patch(dir.path(), json!({"old_string": "let w = 9;", "new_string": "x"})).await;
        assert!(out.is_error && out.content.contains("old_string was not found"), "{}", out.content);
        assert!(!out.content.contains("whitespace differs"), "{}", out.content);
        let out = patch(dir.path(), json!({"old_string": "let x = 1;\n    let q", "new_string": "x"})).await;
        assert!(out.content.contains("first line appears at line 2"), "{}", out.content);
        assert_eq!(read(dir.path()), SOURCE);
    }

    #[tokio::test]
    async fn whitespace_differences_are_pointed_out() {
        let dir = tempfile::tempdir().unwrap();
        let out = patch(dir.path(), json!({"old_string": "let x = 1;\nprintln!(\"{x}\");", "new_string": "x"})).await;
        assert!(out.is_error, "{}", out.content);
        assert!(out.content.contains("matches line 2 if whitespace is ignored: the indentation/whitespace differs"), "{}", out.content);
        assert!(out.content.contains("     2|    let x = 1;\n     3|    println!(\"{x}\");\n"), "{}", out.content);
        assert_eq!(read(dir.path()), SOURCE);
    }

    #[tokio::test]
    async fn bad_arguments_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let out = patch(dir.path(), json!({"old_string": "", "new_string": "x"})).await;
        assert!(out.is_error && out.content.contains("`old_string` is empty"), "{}", out.content);
        let out = patch(dir.path(), json!({"old_string": "x", "new_string": "x"})).await;
        assert!(out.is_error && out.content.contains("identical"), "{}", out.content);
        let out = Patch.call(&ctx(dir.path()), json!({"path": "nope.rs", "old_string": "a", "new_string": "b"})).await;
        assert!(out.is_error && out.content.contains("file not found") && out.content.contains("write_file"), "{}", out.content);
        let out = Patch.call(&ctx(dir.path()), json!({"path": "memories/MEMORY.md", "old_string": "a", "new_string": "b"})).await;
        assert!(out.is_error && out.content.contains("`memory` tool"), "{}", out.content);
    }

    #[tokio::test]
    async fn crlf_files_match_lf_old_strings() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("w.txt"), "a\r\nb\r\nc\r\n").unwrap();
        let out = Patch.call(&ctx(dir.path()), json!({"path": "w.txt", "old_string": "a\nb", "new_string": "a\nB"})).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(std::fs::read_to_string(dir.path().join("w.txt")).unwrap(), "a\r\nB\r\nc\r\n");
    }
}
