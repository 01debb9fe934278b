//! `search_files`: regex search over a directory tree that honours `.gitignore`/`.ignore` and
//! skips hidden and binary files, answering `path:line: text` lines with a count and a note when
//! the results were capped. What the sandbox keeps unreadable (HERMES_HOME outside the
//! workspace, judged on canonical paths) is neither searched nor named, and only regular files
//! are opened (a FIFO would hang the search).

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use crate::agent::sandbox::Confinement;
use crate::agent::sandbox::files::Refusal;
use async_trait::async_trait;
use ignore::WalkBuilder;
use ignore::overrides::{Override, OverrideBuilder};
use regex::{Regex, RegexBuilder};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub(super) struct SearchFiles;

const DEFAULT_RESULTS: usize = 100;
const MAX_RESULTS: usize = 1000;
/// Characters of a matching line shown.
const MAX_LINE_CHARS: usize = 300;
/// Bytes inspected for NUL to decide a file is binary.
const SNIFF_BYTES: usize = 8 * 1024;
/// Files larger than this are skipped (logs, dumps, data).
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

#[async_trait]
impl Tool for SearchFiles {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "search_files".into(),
            description: "Search file contents with a regular expression (Rust regex syntax, like ripgrep) under a \
                directory. Files ignored by .gitignore/.ignore, hidden files and binary files are skipped. Each result \
                is `path:line: text` with the path relative to the working directory, ready for read_file or patch."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression to look for in each line, e.g. `fn\\s+main` or `TODO|FIXME`. Escape literal ( [ . * + ? with a backslash."},
                    "path": {"type": "string", "description": "Directory (or single file) to search; relative paths resolve against the working directory. Optional, default the working directory."},
                    "glob": {"type": "string", "description": "Only search files whose path matches this glob, e.g. `*.rs` or `src/**/*.py`. Optional."},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "Most matching lines to return. Optional, default 100, at most 1000."},
                    "case_insensitive": {"type": "boolean", "description": "Ignore letter case. Optional, default false."}
                },
                "required": ["pattern"]
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
        match search_files(ctx, &arguments).await {
            Ok(report) | Err(report) => report,
        }
    }
}

/// The steps of one call, arguments checked in the order they are reported; every early refusal
/// is the tool's answer.
async fn search_files(ctx: &ToolContext, arguments: &Value) -> Result<ToolOutput, ToolOutput> {
    let pattern = required_str(arguments, "pattern")?;
    if pattern.is_empty() {
        return Err(ToolOutput::error("`pattern` is empty; pass the regular expression to search for."));
    }
    let case_insensitive = case_insensitive(arguments)?;
    let max_results = max_results(arguments)?;
    let root = search_root(ctx, arguments)?;
    let regex = compile(pattern, case_insensitive)?;
    let glob = glob_filter(arguments, &root)?;

    let search = Search {
        root: root.clone(),
        workdir: ctx.paths.workdir.clone(),
        regex,
        max_results,
        cancel: ctx.cancel.clone(),
        confinement: ctx.settings.confinement.clone(),
    };
    let filter = glob.as_ref().map(|(_, o)| o.clone());
    let found = match tokio::task::spawn_blocking(move || search.run(filter)).await {
        Ok(found) => found,
        Err(e) => return Err(ToolOutput::error(format!("the search failed: {e}"))),
    };
    Ok(ToolOutput::ok(found.report(pattern, &root, glob.as_ref().map(|(g, _)| g.as_str()), max_results)))
}

fn case_insensitive(arguments: &Value) -> Result<bool, ToolOutput> {
    match arguments.get("case_insensitive") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ToolOutput::error("`case_insensitive` must be true or false.")),
    }
}

/// Models often send numbers as strings; both are accepted, and capped at [`MAX_RESULTS`].
fn max_results(arguments: &Value) -> Result<usize, ToolOutput> {
    match arguments.get("max_results") {
        None | Some(Value::Null) => Ok(DEFAULT_RESULTS),
        Some(v) => match v.as_u64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok())) {
            Some(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(MAX_RESULTS).min(MAX_RESULTS)),
            _ => Err(ToolOutput::error("`max_results` must be a whole number from 1 to 1000.")),
        },
    }
}

/// The directory or file to search: the working directory by default, and only where the
/// sandbox lets the agent read.
fn search_root(ctx: &ToolContext, arguments: &Value) -> Result<PathBuf, ToolOutput> {
    let root = match arguments.get("path") {
        None | Some(Value::Null) => ctx.paths.workdir.clone(),
        Some(Value::String(p)) if p.trim().is_empty() => ctx.paths.workdir.clone(),
        Some(Value::String(p)) => ctx.paths.resolve(p),
        Some(_) => return Err(ToolOutput::error("`path` must be a string.")),
    };
    if let Err(refusal) = ctx.settings.confinement.readable(&root) {
        return Err(ToolOutput::error(refusal.to_string()));
    }
    if !root.exists() {
        return Err(ToolOutput::error(format!(
            "path not found: {}. Pass an existing directory or file (relative paths resolve against {}), or leave `path` out.",
            root.display(),
            ctx.paths.workdir.display()
        )));
    }
    Ok(root)
}

fn compile(pattern: &str, case_insensitive: bool) -> Result<Regex, ToolOutput> {
    RegexBuilder::new(pattern).case_insensitive(case_insensitive).build().map_err(|e| {
        ToolOutput::error(format!(
            "invalid regex `{pattern}`: {e}\nFix the pattern; escape characters meant literally, e.g. `\\(` or `\\.`."
        ))
    })
}

/// The optional `glob` argument, kept as written (for the report) beside its compiled filter.
fn glob_filter(arguments: &Value, root: &Path) -> Result<Option<(String, Override)>, ToolOutput> {
    match arguments.get("glob") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(g)) if g.trim().is_empty() => Ok(None),
        Some(Value::String(g)) => match file_filter(root, g) {
            Ok(o) => Ok(Some((g.clone(), o))),
            Err(e) => Err(ToolOutput::error(format!("invalid glob `{g}`: {e}. Use a pattern like `*.rs` or `src/**/*.py`."))),
        },
        Some(_) => Err(ToolOutput::error("`glob` must be a string such as `*.rs`.")),
    }
}

/// The glob as a whitelist override rooted at the directory searched.
fn file_filter(root: &Path, glob: &str) -> Result<Override, ignore::Error> {
    let base = if root.is_file() { root.parent().unwrap_or(root) } else { root };
    let mut builder = OverrideBuilder::new(base);
    builder.add(glob)?;
    builder.build()
}

struct Search {
    root: PathBuf,
    workdir: PathBuf,
    regex: Regex,
    max_results: usize,
    cancel: CancellationToken,
    confinement: Arc<Confinement>,
}

/// Why a file was left out of the search.
enum Skip {
    Hidden,
    Unreadable,
}

#[derive(Default)]
struct Found {
    lines: Vec<String>,
    total: usize,
    files: usize,
    skipped_large: usize,
    unreadable: usize,
    cancelled: bool,
    /// Files the sandbox keeps unreadable, skipped without being named.
    hidden: usize,
}

impl Search {
    fn run(&self, filter: Option<Override>) -> Found {
        let mut found = Found::default();
        for entry in self.walk(filter) {
            if self.cancel.is_cancelled() {
                found.cancelled = true;
                break;
            }
            let Ok(entry) = entry else {
                found.unreadable += 1;
                continue;
            };
            if let Some(bytes) = self.searchable_bytes(&entry, &mut found) {
                self.collect_matches(entry.path(), &bytes, &mut found);
            }
        }
        found
    }

    /// The tree under the root in file-name order, minus what ignore files and the glob leave out.
    fn walk(&self, filter: Option<Override>) -> ignore::Walk {
        let mut builder = WalkBuilder::new(&self.root);
        // Honour .gitignore outside git repositories too (a fresh project folder, a download).
        builder.require_git(false).sort_by_file_name(|a, b| a.cmp(b));
        if let Some(filter) = filter {
            builder.overrides(filter);
        }
        builder.build()
    }

    /// A regular, not too large, readable, non-binary file's bytes; each skip that the report
    /// mentions is counted in `found`.
    fn searchable_bytes(&self, entry: &ignore::DirEntry, found: &mut Found) -> Option<Vec<u8>> {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return None;
        }
        if entry.metadata().is_ok_and(|m| m.len() > MAX_FILE_BYTES) {
            found.skipped_large += 1;
            return None;
        }
        let bytes = match self.read(entry.path()) {
            Ok(bytes) => bytes,
            Err(Skip::Hidden) => {
                found.hidden += 1;
                return None;
            }
            Err(Skip::Unreadable) => {
                found.unreadable += 1;
                return None;
            }
        };
        let binary = bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0);
        (!binary).then_some(bytes)
    }

    /// Counts every matching line of one file, keeping the first `max_results` overall.
    fn collect_matches(&self, path: &Path, bytes: &[u8], found: &mut Found) {
        let shown = self.display(path);
        let mut matched_here = false;
        for (i, line) in String::from_utf8_lossy(bytes).lines().enumerate() {
            if !self.regex.is_match(line) {
                continue;
            }
            matched_here = true;
            found.total += 1;
            if found.lines.len() < self.max_results {
                let line = line.trim_end();
                let text: String = line.chars().take(MAX_LINE_CHARS).collect();
                let cut = if text.len() < line.len() { "…" } else { "" };
                found.lines.push(format!("{shown}:{}: {text}{cut}", i + 1));
            }
        }
        found.files += usize::from(matched_here);
    }

    /// A file's bytes, if the sandbox's policy lets it be read and it is a regular file.
    fn read(&self, path: &Path) -> Result<Vec<u8>, Skip> {
        use std::io::Read;
        let (mut file, _) = self.confinement.open_for_read(path).map_err(|refusal| match refusal {
            Refusal::HermesHome { .. } => Skip::Hidden,
            _ => Skip::Unreadable,
        })?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|_| Skip::Unreadable)?;
        Ok(bytes)
    }

    /// `path` relative to the working directory when it is inside it, else absolute.
    fn display(&self, path: &Path) -> String {
        path.strip_prefix(&self.workdir).ok().filter(|p| !p.as_os_str().is_empty()).unwrap_or(path).display().to_string()
    }
}

impl Found {
    fn report(&self, pattern: &str, root: &Path, glob: Option<&str>, max_results: usize) -> String {
        let within = match glob {
            Some(g) => format!("{} (files matching `{g}`)", root.display()),
            None => root.display().to_string(),
        };
        let mut out = if self.total == 0 {
            format!("no matches for `{pattern}` in {within}")
        } else if self.total > self.lines.len() {
            format!(
                "{} matches (truncated at {max_results}) in {} {}; narrow the pattern, path or glob, or raise max_results (at most {MAX_RESULTS})",
                self.total,
                self.files,
                noun(self.files, "file", "files")
            )
        } else {
            format!("{} {} in {} {}", self.total, noun(self.total, "match", "matches"), self.files, noun(self.files, "file", "files"))
        };
        for line in &self.lines {
            out.push('\n');
            out.push_str(line);
        }
        if self.skipped_large > 0 {
            let _ = write!(out, "\n[skipped {} files over {} MB]", self.skipped_large, MAX_FILE_BYTES / (1024 * 1024));
        }
        if self.unreadable > 0 {
            let _ = write!(out, "\n[{} files or directories could not be read]", self.unreadable);
        }
        if self.hidden > 0 {
            let _ = write!(out, "\n[{} files inside HERMES_HOME were skipped: the sandbox keeps them unreadable]", self.hidden);
        }
        if self.cancelled {
            out.push_str("\n[cancelled: the turn was stopped before the search finished]");
        }
        out
    }
}

fn noun<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::{AgentPaths, ToolSettings};

    fn ctx(dir: &Path) -> ToolContext {
        ToolContext::detached(AgentPaths::under(dir), ToolSettings::default())
    }

    fn tree(dir: &Path) {
        let write = |p: &str, s: &[u8]| {
            let p = dir.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        write(".gitignore", b"target/\n*.log\n");
        write("src/main.rs", b"fn main() {\n    needle();\n}\n");
        write("src/lib/util.py", b"def needle():\n    return 'Needle'\n");
        write("target/debug/out.rs", b"needle in a build artifact\n");
        write("run.log", b"needle in a log\n");
        write(".hidden/secret.txt", b"needle hidden\n");
        write("blob.bin", b"needle\x00\x01binary\n");
    }

    #[tokio::test]
    async fn finds_matches_and_respects_ignore_rules() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let out = SearchFiles.call(&ctx(dir.path()), json!({"pattern": "needle"})).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(out.content, "2 matches in 2 files\nsrc/lib/util.py:1: def needle():\nsrc/main.rs:2:     needle();");
        let out = SearchFiles.call(&ctx(dir.path()), json!({"pattern": "NEEDLE", "case_insensitive": true, "path": "src"})).await;
        assert!(out.content.starts_with("3 matches in 2 files\n"), "{}", out.content);
        assert!(out.content.contains("src/lib/util.py:2:     return 'Needle'"), "{}", out.content);
    }

    #[tokio::test]
    async fn glob_filters_files() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let out = SearchFiles.call(&ctx(dir.path()), json!({"pattern": "needle", "glob": "*.py"})).await;
        assert_eq!(out.content, "1 match in 1 file\nsrc/lib/util.py:1: def needle():");
        let out = SearchFiles.call(&ctx(dir.path()), json!({"pattern": "needle", "glob": "*.go"})).await;
        assert!(!out.is_error && out.content.starts_with("no matches for `needle` in "), "{}", out.content);
        assert!(out.content.ends_with("(files matching `*.go`)"), "{}", out.content);
    }

    #[tokio::test]
    async fn invalid_regex_names_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let out = SearchFiles.call(&ctx(dir.path()), json!({"pattern": "fn main("})).await;
        assert!(out.is_error, "{}", out.content);
        assert!(out.content.contains("invalid regex `fn main(`") && out.content.contains("unclosed group"), "{}", out.content);
    }

    #[tokio::test]
    async fn results_are_capped_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let body: String = (0..50).map(|i| format!("hit {i} {}\n", "y".repeat(400))).collect();
        std::fs::write(dir.path().join("many.txt"), body).unwrap();
        let out = SearchFiles.call(&ctx(dir.path()), json!({"pattern": "^hit", "max_results": 5})).await;
        assert!(out.content.starts_with("50 matches (truncated at 5) in 1 file;"), "{}", out.content);
        let lines: Vec<_> = out.content.lines().skip(1).collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0].starts_with("many.txt:1: hit 0 yyy") && lines[0].ends_with('…'), "{}", lines[0]);
        assert_eq!(lines[0].chars().count(), "many.txt:1: ".len() + MAX_LINE_CHARS + 1);
        let out = SearchFiles.call(&ctx(dir.path()), json!({"pattern": "^hit", "max_results": 0})).await;
        assert!(out.is_error && out.content.contains("`max_results`"), "{}", out.content);
    }

    #[tokio::test]
    async fn missing_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let out = SearchFiles.call(&ctx(dir.path()), json!({"pattern": "x", "path": "nowhere"})).await;
        assert!(out.is_error && out.content.contains("path not found"), "{}", out.content);
    }
}
